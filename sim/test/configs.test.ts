/**
 * The named configurations: `paper` keeps the published behaviour (sources grow from the initial
 * window), `default` starts each source at its known upload cap, which removes the start-up
 * round trip spent at a fraction of the link. Seeded simulations: the results are exact.
 */
import { loadNodeCodecs } from '@mutp/wasm/node';
import { CodecSet, simulateMutp } from '../src';
import { configWindow, SIM_CONFIGS, SimConfigName } from '../src/configs';
import { PAPER_DEFAULTS } from '../src/scenario';

let codecs: CodecSet;
beforeAll(async () => {
  codecs = await loadNodeCodecs();
});

function run(config: SimConfigName, mode: 'rlnc' | 'fountain', seed: number) {
  const c = SIM_CONFIGS[config];
  return simulateMutp(
    {
      ...PAPER_DEFAULTS,
      mode,
      capsKBps: [896, 896, 896, 1792, 1792, 1792],
      objectBytes: 2 << 20,
      loss: 0,
      window: configWindow(
        c.window,
        [896, 896, 896, 1792, 1792, 1792],
        PAPER_DEFAULTS.rttMs,
        PAPER_DEFAULTS.symbolSize,
      ),
      generationSize: c.generationSize,
      startAtCap: c.startAtCap,
      seed,
    },
    { codecs },
  );
}

test.each(['rlnc', 'fountain'] as const)(
  '%s at N = 6, mixed caps, 2 MiB: starting at the cap is faster, byte-exact, on every seed',
  (mode) => {
    for (let seed = 1; seed <= 3; seed++) {
      const paper = run('paper', mode, seed);
      const fast = run('default', mode, seed);
      expect([paper.status, fast.status, paper.byteExact, fast.byteExact]).toEqual([
        'complete',
        'complete',
        true,
        true,
      ]);
      expect(fast.efficiency).toBeGreaterThan(paper.efficiency + 0.05);
    }
  },
);

test('fountain in the default configuration comes within 5 % of the physical limit', () => {
  expect(run('default', 'fountain', 1).efficiency).toBeGreaterThan(0.95);
});
