import { idealMs, Scenario, simulate } from '../src';
import { CongestionControl, simulateHttp } from '../src/http-model';
import { profileByName } from '../src/profiles';

/** The bench's fleet (e2e/src/bench-e2e.ts): four 896 KB/s proxies, then two 1792 KB/s. */
const FLEET = [896, 896, 896, 896, 1792, 1792];
const MIXED = { caps: [896, 896, 1792, 1792], hosts: [0, 1, 4, 5] };
const UNIFORM = { caps: [896, 896, 896, 896], hosts: [0, 1, 2, 3] };

/** A profile's cell as bench:e2e predicts it (e2e/src/sim-prediction.ts): the profile's links per host. */
function profileCell(name: string, cell: { caps: number[]; hosts: number[] }, seed: number): Scenario {
  const profile = profileByName(name);
  const links = profile.links(FLEET, 1);
  return {
    mode: 'http',
    capsKBps: cell.caps,
    objectBytes: 2 << 20,
    rttMs: profile.rttMs,
    jitterMs: 0,
    loss: 0,
    window: 480,
    generationSize: 24,
    symbolSize: 1120,
    seed,
    paths: cell.hosts.map((h) => links.paths[h]),
    maxSimMs: 600_000,
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Median efficiency over seeds 1..5, as the bench's `simEfficiency`. */
function efficiency(name: string, cell: { caps: number[]; hosts: number[] }, cc?: CongestionControl): number {
  return median(
    [1, 2, 3, 4, 5].map((seed) => {
      const s = profileCell(name, cell, seed);
      return idealMs(s) / simulateHttp(s, cc ? { congestionControl: cc } : {}).downloadMs;
    }),
  );
}

function abstract(loss: number, seed: number, caps = [896, 1792]): Scenario {
  return {
    mode: 'http',
    capsKBps: caps,
    objectBytes: 1 << 20,
    rttMs: 40,
    jitterMs: 0,
    loss,
    window: 480,
    generationSize: 24,
    symbolSize: 1120,
    seed,
  };
}

describe('Parallel HTTP model', () => {
  test('paper (no loss) is where the old model put it, within 3 %', () => {
    // The model before the congestion-control fix (Reno only): 0.327 mixed, 0.255 uniform.
    expect(efficiency('paper', MIXED)).toBeGreaterThan(0.327 * 0.97);
    expect(efficiency('paper', MIXED)).toBeLessThan(0.327 * 1.03);
    expect(efficiency('paper', UNIFORM)).toBeGreaterThan(0.255 * 0.97);
    expect(efficiency('paper', UNIFORM)).toBeLessThan(0.255 * 1.03);
    // Without loss the congestion control does not matter: every source reaches its cap in slow start.
    for (const cc of ['bbr', 'cubic', 'reno'] as const)
      expect(Math.abs(efficiency('paper', MIXED, cc) - efficiency('paper', MIXED))).toBeLessThan(0.01);
  });

  test('paper-loss2 is within 15 % of the testbed (bench:e2e, Linux BBR)', () => {
    // bench:e2e --profile paper-loss2 --quick, 2026-11-27 (docs/testbed.md, "Parallel HTTP under
    // loss"): http efficiency 0.35 mixed, 0.26 uniform (medians of 3 warm repeats).
    const mixed = efficiency('paper-loss2', MIXED);
    const uniform = efficiency('paper-loss2', UNIFORM);
    expect(Math.abs(mixed / 0.35 - 1)).toBeLessThan(0.15);
    expect(Math.abs(uniform / 0.26 - 1)).toBeLessThan(0.15);
    // The default is BBR, and what simulate() runs.
    const s = profileCell('paper-loss2', MIXED, 1);
    expect(simulate(s)).toEqual(simulateHttp(s, { congestionControl: 'bbr' }));
  });

  test('loss-based congestion control collapses at 2 % loss, as Linux CUBIC and Reno do on the testbed', () => {
    // Measured there, one 1792 KB/s connection: cubic median 6.0 s, reno 7.3 s for 2 MiB (bbr 1.33 s).
    const oneFast = { caps: [1792], hosts: [4] };
    const ms = (cc: CongestionControl) =>
      median(
        [1, 2, 3, 4, 5].map(
          (seed) => simulateHttp(profileCell('paper-loss2', oneFast, seed), { congestionControl: cc }).downloadMs,
        ),
      );
    expect(ms('bbr')).toBeGreaterThan(1250);
    expect(ms('bbr')).toBeLessThan(1450);
    expect(ms('reno')).toBeGreaterThan(6200);
    expect(ms('reno')).toBeLessThan(8300);
    expect(ms('cubic')).toBeGreaterThan(3600);
    expect(ms('cubic')).toBeLessThan(9700);
  });

  test('reno is the old model, unchanged', () => {
    // downloadMs of the model before the fix, seed 1 (abstract scenario, 1 MiB, caps 896 + 1792).
    expect(simulateHttp(abstract(0, 1), { congestionControl: 'reno' }).downloadMs).toBeCloseTo(716.8587820870536, 9);
    expect(simulateHttp(abstract(0.01, 1), { congestionControl: 'reno' }).downloadMs).toBeCloseTo(
      1451.6800362723213,
      9,
    );
    expect(simulateHttp(abstract(0.05, 1), { congestionControl: 'reno' }).downloadMs).toBeCloseTo(5664.705984933036, 9);
  });

  test.each(['bbr', 'cubic', 'reno'] as const)('%s: more loss never raises throughput (mean over seeds)', (cc) => {
    const losses = [0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1];
    const goodputs = losses.map((loss) => {
      const runs = Array.from({ length: 10 }, (_, i) => simulateHttp(abstract(loss, i + 1), { congestionControl: cc }));
      return runs.reduce((sum, r) => sum + r.goodputBps, 0) / runs.length;
    });
    for (let i = 1; i < goodputs.length; i++) expect(goodputs[i]).toBeLessThanOrEqual(goodputs[i - 1]);
    expect(goodputs[goodputs.length - 1]).toBeLessThan(goodputs[0]);
  });

  test.each(['bbr', 'cubic', 'reno'] as const)('%s: deterministic for a seed', (cc) => {
    const s = profileCell('paper-loss2', MIXED, 3);
    const a = simulateHttp(s, { congestionControl: cc });
    expect(simulateHttp(s, { congestionControl: cc })).toEqual(a);
    expect(a.status).toBe('complete');
    expect(simulateHttp({ ...s, seed: 4 }, { congestionControl: cc }).downloadMs).not.toBe(a.downloadMs);
  });

  test('a disconnection still costs every congestion control its outage', () => {
    const s = abstract(0, 1);
    const onOff: Scenario = {
      ...s,
      paths: s.capsKBps.map((cap) => ({
        down: {
          rate: { kind: 'constant', bytesPerSecond: Math.round(cap * 1024 * 1.1) },
          delayMs: 20,
          schedule: {
            loop: true,
            segments: [
              { durationMs: 300, connected: true },
              { durationMs: 400, connected: false },
            ],
          },
        },
        up: { rate: { kind: 'unlimited' }, delayMs: 20 },
      })),
    };
    for (const cc of ['bbr', 'cubic', 'reno'] as const) {
      const steady = simulateHttp(s, { congestionControl: cc });
      const cut = simulateHttp(onOff, { congestionControl: cc });
      expect(cut.status).toBe('complete');
      expect(cut.downloadMs).toBeGreaterThan(steady.downloadMs + 400);
    }
  });
});
