/** Sweep documents made without simulating: deterministic stand-in results for the report tests. */
import { SIM_CONFIGS } from '../src/configs';
import { Scenario, SimResult } from '../src/scenario';
import { buildSweep, SWEEP_SLICE_IDS, SWEEP_VARIANTS, SweepDocument, sweepRows, variantName } from '../src/sweep';

/** A deterministic stand-in for a simulation: faster modes, fewer sources and less loss finish sooner. */
export function fakeResult(s: Scenario): SimResult {
  const modeFactor = { http: 4, uncoded: 1.3, rlnc: 1.2, fountain: 1.1 }[s.mode];
  const downloadMs = (100 + s.rttMs + s.objectBytes / 10_000) * modeFactor * (1 + s.loss * 10) + s.seed;
  return {
    scenario: s,
    status: 'complete',
    downloadMs,
    goodputBps: (s.objectBytes * 1000) / downloadMs,
    efficiency: 100 / downloadMs,
    normalizedGoodput: 1,
    sentPerUseful: 1,
    wastedAfterCompletion: 0,
    byteExact: true,
    sources: [],
  };
}

export function fakeDocument(slices = SWEEP_SLICE_IDS, seeds = 1): SweepDocument {
  const plan = buildSweep({ seeds, config: 'default', slices });
  const results = new Map(plan.runs.map((r) => [r.key, r.scenarios.map(fakeResult)]));
  return {
    kind: 'mutp-sim-sweep',
    config: 'default',
    seeds,
    protocol: { ...SIM_CONFIGS.default, symbolSize: 1120, jitterMs: 2 },
    variants: SWEEP_VARIANTS.map(variantName),
    slices: plan.slices.map(({ id, title, fixed, x, y, capKinds, notes }) => ({
      id,
      title,
      fixed,
      x,
      y,
      capKinds,
      notes,
    })),
    simulations: plan.runs.length * seeds,
    elapsedSeconds: 1,
    rows: sweepRows(plan, results),
  };
}
