/**
 * The sweep beyond the paper's grid (sim/src/sweep.ts): which scenarios each slice runs, with
 * which parameters, how shared cells run once, and how rows are compared with Parallel HTTP.
 * Pure construction plus one short seeded simulation over the burst-loss links.
 */
import { loadNodeCodecs } from '@mutp/wasm/node';
import { CodecSet, simulate } from '../src';
import { configWindow, SIM_CONFIGS } from '../src/configs';
import { stationaryLoss } from '../src/link';
import { burstLoss } from '../src/link-spec';
import { buildSweep, MIB, scenarioFor, SWEEP_VARIANTS, sweepMatrix } from '../src/sweep';
import { formatSweepTables } from '../src/sweep-table';
import { fakeDocument } from './sweep-fixtures';

describe('buildSweep', () => {
  const plan = buildSweep({ seeds: 3, config: 'default' });
  const bySlice = (id: string) => plan.slices.find((s) => s.id === id)!;

  test("four slices, each a full map of its axes' values in both cap mixes", () => {
    expect(plan.slices.map((s) => s.id)).toEqual(['size-rtt', 'n-size', 'n-loss', 'rtt-loss']);
    expect(bySlice('size-rtt').y.values).toEqual(['0.25', '0.625', '1.25', '2', '4', '10']);
    expect(bySlice('size-rtt').x.values).toEqual(['5', '10', '20', '40', '100']);
    expect(bySlice('n-loss').y.values).toEqual(['1', '2', '4', '6', '8']);
    expect(bySlice('n-loss').x.values).toEqual(['0 %', '1 %', '2 %', '5 %', '2 % link', '2 % burst']);
    for (const slice of plan.slices) {
      expect(slice.cells).toHaveLength(slice.x.values.length * slice.y.values.length * 2);
      const keys = new Set(slice.cells.map((c) => `${c.capKind}|${c.x}|${c.y}`));
      expect(keys.size).toBe(slice.cells.length);
    }
    expect(plan.groups).toHaveLength(240 * SWEEP_VARIANTS.length);
  });

  test('cells shared between slices (base point, N = 1 in both mixes) run once', () => {
    // 60 + 42 + 45 + 40 distinct network scenarios (see the overlaps below), four modes each.
    expect(plan.runs).toHaveLength(187 * SWEEP_VARIANTS.length);
    const runKeys = new Set(plan.runs.map((r) => r.key));
    expect(plan.groups.every((g) => runKeys.has(g.runKey))).toBe(true);
    const baseKeys = new Set(
      plan.groups
        .filter((g) => g.variant.mode === 'rlnc')
        .filter(({ cell: { point: p } }) => p.sources === 6 && p.capKind === 'mixed' && p.objectBytes === 2 * MIB)
        .filter(({ cell: { point: p } }) => p.rttMs === 40 && p.loss.model === 'iid' && p.loss.p === 0)
        .map((g) => g.runKey),
    );
    expect(baseKeys.size).toBe(1);
    const oneSource = plan.groups.filter((g) => g.slice === 'n-loss' && g.cell.y === '1' && g.cell.x === '0 %');
    expect(new Set(oneSource.filter((g) => g.variant.mode === 'http').map((g) => g.runKey)).size).toBe(1);
  });

  test('each run holds seeds 1..n of one scenario in one mode', () => {
    for (const run of plan.runs.slice(0, 40)) {
      expect(run.scenarios.map((s) => s.seed)).toEqual([1, 2, 3]);
      const first = { ...run.scenarios[0], seed: 0 };
      for (const s of run.scenarios) expect({ ...s, seed: 0 }).toEqual(first);
    }
  });

  test('scenarios carry the slice parameters and the chosen configuration', () => {
    const cell = bySlice('size-rtt').cells.find((c) => c.capKind === 'mixed' && c.y === '0.625' && c.x === '100')!;
    const s = scenarioFor(cell.point, { mode: 'rlnc', scheduler: 'partitioned' }, 7, 'default');
    expect(s).toMatchObject({
      mode: 'rlnc',
      scheduler: 'partitioned',
      capsKBps: [896, 896, 896, 1792, 1792, 1792],
      objectBytes: 655360,
      rttMs: 100,
      loss: 0,
      jitterMs: 2,
      seed: 7,
      window: configWindow(SIM_CONFIGS.default.window, [896, 896, 896, 1792, 1792, 1792], 100, 1120),
      startAtCap: true,
    });
    expect(s.paths).toBeUndefined();
    const paper = scenarioFor(cell.point, { mode: 'rlnc', scheduler: 'partitioned' }, 7, 'paper');
    expect(paper).toMatchObject({ window: 240, startAtCap: false, weightLevels: 32 });
    const uniform8 = bySlice('n-size').cells.find((c) => c.capKind === 'uniform' && c.y === '8' && c.x === '10')!;
    expect(uniform8.point).toMatchObject({ sources: 8, objectBytes: 10 * MIB, rttMs: 40 });
    expect(scenarioFor(uniform8.point, { mode: 'http' }, 1, 'default').capsKBps).toEqual(Array(8).fill(896));
  });

  test('Bernoulli columns use the abstract network; the link columns give every source an emulated path', () => {
    const cells = bySlice('n-loss').cells.filter((c) => c.capKind === 'mixed' && c.y === '4');
    const at = (x: string) => scenarioFor(cells.find((c) => c.x === x)!.point, { mode: 'fountain' }, 1, 'default');
    expect(at('5 %')).toMatchObject({ loss: 0.05, rttMs: 40 });
    expect(at('5 %').paths).toBeUndefined();
    for (const [x, kind] of [
      ['2 % link', 'iid'],
      ['2 % burst', 'gilbertElliott'],
    ] as const) {
      const s = at(x);
      expect(s.loss).toBe(0.02);
      expect(s.paths).toHaveLength(4);
      for (const path of s.paths!)
        for (const d of [path.down, path.up]) {
          expect(d).toMatchObject({ rate: { kind: 'unlimited' }, delayMs: 20, jitter: { kind: 'uniform', maxMs: 2 } });
          expect(d.loss!.kind).toBe(kind);
          expect(stationaryLoss(d.loss)).toBeCloseTo(0.02, 12);
        }
    }
    const ge = at('2 % burst').paths![0].down.loss!;
    expect(ge.kind === 'gilbertElliott' && 1 / ge.pBadToGood).toBe(4);
  });

  test('unknown slices are refused', () => {
    expect(() => buildSweep({ seeds: 1, config: 'default', slices: ['nope'] })).toThrow(/unknown slice nope/);
  });
});

describe('burstLoss', () => {
  test('whole bursts with the given mean loss and mean length', () => {
    const spec = burstLoss(0.05, 3);
    expect(spec).toMatchObject({ kind: 'gilbertElliott', lossGood: 0, lossBad: 1 });
    expect(stationaryLoss(spec)).toBeCloseTo(0.05, 12);
    expect(spec.kind === 'gilbertElliott' && spec.pBadToGood).toBeCloseTo(1 / 3, 12);
  });

  test('refuses a mean loss outside (0, 1) or bursts under one packet', () => {
    expect(() => burstLoss(0, 4)).toThrow(RangeError);
    expect(() => burstLoss(1, 4)).toThrow(RangeError);
    expect(() => burstLoss(0.02, 0.5)).toThrow(RangeError);
  });
});

describe('sweepRows', () => {
  const doc = fakeDocument(['n-loss'], 3);

  test('one row per cell and mode, every parameter and the loss model on it', () => {
    expect(doc.rows).toHaveLength(60 * SWEEP_VARIANTS.length);
    const burst = doc.rows.find(
      (r) => r.mode === 'rlnc' && r.capKind === 'mixed' && r.y === '6' && r.x === '2 % burst',
    )!;
    expect(burst).toMatchObject({
      slice: 'n-loss',
      sources: 6,
      capsKBps: [896, 896, 896, 1792, 1792, 1792],
      objectBytes: 2 * MIB,
      rttMs: 40,
      loss: 0.02,
      lossModel: 'burst-link',
      meanBurstPackets: 4,
      seeds: 3,
      failed: 0,
      byteExact: true,
    });
  });

  test('speedup is goodput over the http row of the same cell', () => {
    for (const r of doc.rows) {
      const http = doc.rows.find(
        (h) => h.mode === 'http' && h.slice === r.slice && h.capKind === r.capKind && h.x === r.x && h.y === r.y,
      )!;
      expect(r.speedupVsHttp).toBeCloseTo(r.goodputBps / http.goodputBps, 2);
    }
    const rlnc = doc.rows.find((r) => r.mode === 'rlnc')!;
    // fakeResult: http takes 4 / 1.2 times as long as rlnc (plus the seed's ms).
    expect(rlnc.speedupVsHttp).toBeGreaterThan(3);
  });

  test('sweepMatrix lays the rows out in the slice order, and the terminal tables print them', () => {
    const matrix = sweepMatrix(doc, 'n-loss', 'uniform', 'fountain / partitioned');
    expect(matrix).toHaveLength(5);
    expect(matrix.map((row) => row.map((r) => `${r!.y}|${r!.x}`))[1]).toEqual(
      ['0 %', '1 %', '2 %', '5 %', '2 % link', '2 % burst'].map((x) => `2|${x}`),
    );
    const text = formatSweepTables(doc);
    const cell = matrix[3][2]!;
    expect(text).toContain(`${cell.efficiency.toFixed(2)} ${cell.speedupVsHttp!.toFixed(2)}x`);
    expect(text).toContain(
      'sources × loss, mixed caps (half 896, half 1792 KB/s), 2 MiB, RTT 40 ms: rlnc / partitioned',
    );
  });
});

describe('a burst-loss cell, simulated', () => {
  let codecs: CodecSet;
  beforeAll(async () => {
    codecs = await loadNodeCodecs();
  });

  test('completes byte-exact in every mode, its links dropping packets', () => {
    const point = {
      sources: 2,
      capKind: 'mixed' as const,
      objectBytes: MIB / 4,
      rttMs: 40,
      loss: { model: 'burst-link' as const, p: 0.05, meanBurstPackets: 4 },
    };
    for (const variant of SWEEP_VARIANTS) {
      const r = simulate(scenarioFor(point, variant, 1, 'default'), { codecs });
      expect(r.status).toBe('complete');
      expect(r.byteExact).toBe(true);
      if (variant.mode !== 'http') expect(r.linkDrops!.loss).toBeGreaterThan(0);
    }
  });
});
