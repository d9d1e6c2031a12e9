/**
 * `npm run bench:sim -- --sweep [slices] [--seeds N] [--json] [--config default|paper]`: maps of
 * the parameter space beyond the paper's grid (issue 13). The full cross product (N x object x
 * RTT x loss x caps) is too much to run, so each slice is a 2-D map through the base point
 * (N = 6 mixed caps, 2 MiB, RTT 40 ms, no loss), for both cap mixes and the four default modes:
 * - `size-rtt`: object size x RTT, N = 6, no loss;
 * - `n-size`: N x object size, 40 ms, no loss;
 * - `n-loss`: N x loss, 2 MiB, 40 ms; its loss columns are Bernoulli per datagram, then two at
 *   2 % mean over the emulated links of link.ts: i.i.d. (the control: same link model) and in
 *   Gilbert-Elliott bursts of 4 packets on average;
 * - `rtt-loss`: RTT x the same loss columns, N = 6, 2 MiB.
 * The JSON document (`SweepDocument`) carries every parameter per row; `sweep-doc.ts` turns it
 * into heatmaps and docs/sim-sweep.md.
 */
import { configWindow, SIM_CONFIGS, SimConfig, SimConfigName } from './configs';
import { aggregate, caps, GridRow, Variant } from './grid';
import { burstLoss, DirectionSpec, LinkSpec, LossSpec } from './link-spec';
import { runAll } from './run-pool';
import { PAPER_DEFAULTS, Scenario, SimResult } from './scenario';

export type CapKind = 'uniform' | 'mixed';

/**
 * How datagrams are lost (both directions, as the paper grid's `loss`):
 * - `iid`: the simulator's abstract network, Bernoulli per datagram (jitter may reorder);
 * - `iid-link` / `burst-link`: per-source emulated links (link.ts; FIFO, so jitter never
 *   reorders) with i.i.d. or Gilbert-Elliott loss of mean `p`. Parallel HTTP's model sees only a
 *   link's stationary loss (http-model.ts), so for it both are i.i.d. at `p`.
 */
export type SweepLoss =
  | { model: 'iid'; p: number }
  | { model: 'iid-link'; p: number }
  | { model: 'burst-link'; p: number; meanBurstPackets: number };

/** One network scenario: everything but the mode and the seed. */
export interface NetworkPoint {
  sources: number;
  capKind: CapKind;
  objectBytes: number;
  rttMs: number;
  loss: SweepLoss;
}

/** What the JSON carries about a slice: enough to title and lay out its maps. */
export interface SliceMeta {
  id: string;
  title: string;
  /** The parameters every cell of the slice shares. */
  fixed: string;
  /** Columns of the map, left to right, and rows, top to bottom. */
  x: { label: string; values: string[] };
  y: { label: string; values: string[] };
  capKinds: CapKind[];
  /** Notes on column or row labels that need explaining. */
  notes: string[];
}

export interface SweepCell {
  capKind: CapKind;
  x: string;
  y: string;
  point: NetworkPoint;
}

export interface SweepSlice extends SliceMeta {
  cells: SweepCell[];
}

export interface SweepRow extends GridRow {
  slice: string;
  capKind: CapKind;
  /** The cell's column and row labels (SliceMeta x.values, y.values). */
  x: string;
  y: string;
  lossModel: SweepLoss['model'];
  /** Gilbert-Elliott's mean burst in packets; null for i.i.d. loss. */
  meanBurstPackets: number | null;
}

export interface SweepDocument {
  kind: 'mutp-sim-sweep';
  config: SimConfigName;
  seeds: number;
  /** The configuration's fields (configs.ts), symbol size and jitter. */
  protocol: SimConfig & { symbolSize: number; jitterMs: number; [field: string]: unknown };
  variants: string[];
  slices: SliceMeta[];
  /** Distinct simulations run (cells shared between slices run once). */
  simulations: number;
  elapsedSeconds: number;
  rows: SweepRow[];
}

export const MIB = 1 << 20;

/** Issue 13's values. Object sizes are SoftStage's chunk sizes, taken as MiB so 2 is the base point's. */
export const SWEEP_SOURCES = [1, 2, 4, 6, 8];
export const SWEEP_OBJECT_MIB = [0.25, 0.625, 1.25, 2, 4, 10];
export const SWEEP_RTTS_MS = [5, 10, 20, 40, 100];
export const SWEEP_LOSSES = [0, 0.01, 0.02, 0.05];
/** The burst-loss column: 2 % mean, like the Bernoulli 2 % column, in bursts of 4 packets. */
export const SWEEP_BURST = { p: 0.02, meanBurstPackets: 4 };
export const SWEEP_BASE = { sources: 6, capKind: 'mixed' as CapKind, objectBytes: 2 * MIB, rttMs: 40, loss: 0 };
export const CAP_KINDS: CapKind[] = ['uniform', 'mixed'];

/** Parallel HTTP and the three coded or uncoded modes with today's default scheduler. */
export const SWEEP_VARIANTS: Variant[] = [
  { mode: 'http' },
  { mode: 'uncoded', scheduler: 'partitioned' },
  { mode: 'rlnc', scheduler: 'partitioned' },
  { mode: 'fountain', scheduler: 'partitioned' },
];

export function variantName(v: { mode: string; scheduler?: string }): string {
  return v.mode === 'http' ? 'Parallel HTTP' : `${v.mode} / ${v.scheduler ?? 'partitioned'}`;
}

export function capKindName(kind: CapKind): string {
  return kind === 'uniform' ? 'all 896 KB/s' : 'mixed caps (half 896, half 1792 KB/s)';
}

const percent = (p: number) => `${+(p * 100).toFixed(2)} %`;
const mib = (bytes: number) => `${+(bytes / MIB).toFixed(3)}`;

export function lossLabel(loss: SweepLoss): string {
  if (loss.model === 'iid') return percent(loss.p);
  if (loss.model === 'iid-link') return `${percent(loss.p)} link`;
  return `${percent(loss.p)} burst`;
}

/** Object size x RTT at N = 6, no loss. */
export function sizeRttSlice(): SweepSlice {
  const cells: SweepCell[] = [];
  for (const capKind of CAP_KINDS)
    for (const size of SWEEP_OBJECT_MIB)
      for (const rttMs of SWEEP_RTTS_MS)
        cells.push({
          capKind,
          x: String(rttMs),
          y: mib(size * MIB),
          point: {
            sources: SWEEP_BASE.sources,
            capKind,
            objectBytes: Math.round(size * MIB),
            rttMs,
            loss: { model: 'iid', p: 0 },
          },
        });
  return {
    id: 'size-rtt',
    title: 'object size × RTT',
    fixed: `N = ${SWEEP_BASE.sources}, no loss`,
    x: { label: 'RTT (ms)', values: SWEEP_RTTS_MS.map(String) },
    y: { label: 'object (MiB)', values: SWEEP_OBJECT_MIB.map((s) => mib(s * MIB)) },
    capKinds: CAP_KINDS,
    notes: [],
    cells,
  };
}

/** Bernoulli loss columns, then 2 % i.i.d. over the link model (the control) and 2 % in bursts. */
export function lossColumns(): SweepLoss[] {
  return [
    ...SWEEP_LOSSES.map((p): SweepLoss => ({ model: 'iid', p })),
    { model: 'iid-link', p: SWEEP_BURST.p },
    { model: 'burst-link', ...SWEEP_BURST },
  ];
}

const LOSS_AXIS_LABEL = 'loss per datagram, each direction';

function lossNotes(): string[] {
  const [link, burst] = lossColumns().slice(-2);
  return [
    `"${lossLabel(link)}": the same i.i.d. loss over the emulated links of sim/src/link.ts (FIFO, so jitter never reorders), the control for the burst column.`,
    `"${lossLabel(burst)}": Gilbert-Elliott loss over those links, ${percent(SWEEP_BURST.p)} mean in bursts of ${SWEEP_BURST.meanBurstPackets} packets on average; Parallel HTTP's model sees only the mean (i.i.d.), so its two link columns are the same run.`,
  ];
}

const ONE_SOURCE_NOTE = 'N = 1 has one cap (896 KB/s): its row is the same run in both cap mixes.';

/** N x loss at 2 MiB and 40 ms, with the link-model control and burst-loss columns. */
export function nLossSlice(): SweepSlice {
  const losses = lossColumns();
  const cells: SweepCell[] = [];
  for (const capKind of CAP_KINDS)
    for (const sources of SWEEP_SOURCES)
      for (const loss of losses)
        cells.push({
          capKind,
          x: lossLabel(loss),
          y: String(sources),
          point: { sources, capKind, objectBytes: SWEEP_BASE.objectBytes, rttMs: SWEEP_BASE.rttMs, loss },
        });
  return {
    id: 'n-loss',
    title: 'sources × loss',
    fixed: `${mib(SWEEP_BASE.objectBytes)} MiB, RTT ${SWEEP_BASE.rttMs} ms`,
    x: { label: LOSS_AXIS_LABEL, values: losses.map(lossLabel) },
    y: { label: 'sources N', values: SWEEP_SOURCES.map(String) },
    capKinds: CAP_KINDS,
    notes: [...lossNotes(), ONE_SOURCE_NOTE],
    cells,
  };
}

/** RTT x loss at N = 6 and 2 MiB: where the constant window meets repair round trips. */
export function rttLossSlice(): SweepSlice {
  const losses = lossColumns();
  const cells: SweepCell[] = [];
  for (const capKind of CAP_KINDS)
    for (const rttMs of SWEEP_RTTS_MS)
      for (const loss of losses)
        cells.push({
          capKind,
          x: lossLabel(loss),
          y: String(rttMs),
          point: { sources: SWEEP_BASE.sources, capKind, objectBytes: SWEEP_BASE.objectBytes, rttMs, loss },
        });
  return {
    id: 'rtt-loss',
    title: 'RTT × loss',
    fixed: `N = ${SWEEP_BASE.sources}, ${mib(SWEEP_BASE.objectBytes)} MiB`,
    x: { label: LOSS_AXIS_LABEL, values: losses.map(lossLabel) },
    y: { label: 'RTT (ms)', values: SWEEP_RTTS_MS.map(String) },
    capKinds: CAP_KINDS,
    notes: lossNotes(),
    cells,
  };
}

/** N x object size at 40 ms, no loss: how much object each source needs to pay off. */
export function nSizeSlice(): SweepSlice {
  const cells: SweepCell[] = [];
  for (const capKind of CAP_KINDS)
    for (const sources of SWEEP_SOURCES)
      for (const size of SWEEP_OBJECT_MIB)
        cells.push({
          capKind,
          x: mib(size * MIB),
          y: String(sources),
          point: {
            sources,
            capKind,
            objectBytes: Math.round(size * MIB),
            rttMs: SWEEP_BASE.rttMs,
            loss: { model: 'iid', p: 0 },
          },
        });
  return {
    id: 'n-size',
    title: 'sources × object size',
    fixed: `RTT ${SWEEP_BASE.rttMs} ms, no loss`,
    x: { label: 'object (MiB)', values: SWEEP_OBJECT_MIB.map((s) => mib(s * MIB)) },
    y: { label: 'sources N', values: SWEEP_SOURCES.map(String) },
    capKinds: CAP_KINDS,
    notes: [ONE_SOURCE_NOTE],
    cells,
  };
}

export const SWEEP_SLICES: Record<string, () => SweepSlice> = {
  'size-rtt': sizeRttSlice,
  'n-size': nSizeSlice,
  'n-loss': nLossSlice,
  'rtt-loss': rttLossSlice,
};
export const SWEEP_SLICE_IDS = Object.keys(SWEEP_SLICES);

export interface SweepOptions {
  seeds: number;
  config: SimConfigName;
  /** Slice ids (SWEEP_SLICE_IDS); default all. */
  slices?: string[];
  variants?: Variant[];
}

function lossSpec(loss: SweepLoss): LossSpec {
  if (loss.p === 0) return { kind: 'none' };
  return loss.model === 'burst-link' ? burstLoss(loss.p, loss.meanBurstPackets) : { kind: 'iid', p: loss.p };
}

/** A path with the abstract network's delay and jitter and the given loss, no rate limit of its own. */
export function lossyPath(rttMs: number, jitterMs: number, loss: SweepLoss): LinkSpec {
  const direction: DirectionSpec = {
    rate: { kind: 'unlimited' },
    delayMs: rttMs / 2,
    jitter: { kind: 'uniform', maxMs: jitterMs },
    loss: lossSpec(loss),
  };
  return { down: direction, up: { ...direction } };
}

export function scenarioFor(point: NetworkPoint, variant: Variant, seed: number, config: SimConfigName): Scenario {
  const capsKBps = caps(point.sources, point.capKind);
  const scenario: Scenario = {
    ...PAPER_DEFAULTS,
    // Every field of the configuration is a scenario field (window, start at cap, weights, ...).
    ...SIM_CONFIGS[config],
    mode: variant.mode,
    scheduler: variant.scheduler,
    capsKBps,
    objectBytes: point.objectBytes,
    rttMs: point.rttMs,
    // With paths the links carry the loss; `loss` still records the mean for the rows.
    loss: point.loss.p,
    seed,
    window: configWindow(SIM_CONFIGS[config].window, capsKBps, point.rttMs, PAPER_DEFAULTS.symbolSize),
  };
  if (point.loss.model !== 'iid')
    scenario.paths = capsKBps.map(() => lossyPath(point.rttMs, PAPER_DEFAULTS.jitterMs, point.loss));
  return scenario;
}

/** One map cell in one mode: `runKey` names its simulations, shared by equal cells of other slices. */
export interface SweepGroup {
  slice: string;
  cell: SweepCell;
  variant: Variant;
  runKey: string;
}

export interface SweepPlan {
  slices: SweepSlice[];
  groups: SweepGroup[];
  /** Distinct runs, in order: each key's `seeds` scenarios. */
  runs: { key: string; scenarios: Scenario[] }[];
}

/** N = 1 has one cap whatever the mix: the key uses the caps, so both mixes share its runs. */
function runKey(point: NetworkPoint, variant: Variant): string {
  const loss = point.loss.model === 'burst-link' ? `${point.loss.p}/${point.loss.meanBurstPackets}` : point.loss.p;
  return [
    variantName(variant),
    caps(point.sources, point.capKind).join('/'),
    point.objectBytes,
    point.rttMs,
    point.loss.model,
    loss,
  ].join('|');
}

export function buildSweep(o: SweepOptions): SweepPlan {
  const ids = o.slices ?? SWEEP_SLICE_IDS;
  const unknown = ids.filter((id) => !SWEEP_SLICES[id]);
  if (unknown.length)
    throw new RangeError(`unknown slice ${unknown.join(', ')}; slices: ${SWEEP_SLICE_IDS.join(', ')}`);
  const slices = ids.map((id) => SWEEP_SLICES[id]());
  const variants = o.variants ?? SWEEP_VARIANTS;
  const groups: SweepGroup[] = [];
  const runs = new Map<string, Scenario[]>();
  for (const slice of slices)
    for (const cell of slice.cells)
      for (const variant of variants) {
        const key = runKey(cell.point, variant);
        if (!runs.has(key))
          runs.set(
            key,
            Array.from({ length: o.seeds }, (_, i) => scenarioFor(cell.point, variant, i + 1, o.config)),
          );
        groups.push({ slice: slice.id, cell, variant, runKey: key });
      }
  return { slices, groups, runs: [...runs].map(([key, scenarios]) => ({ key, scenarios })) };
}

/** Medians per group, then each row's goodput against the http row of its cell. */
export function sweepRows(plan: SweepPlan, results: Map<string, SimResult[]>): SweepRow[] {
  const rows: SweepRow[] = plan.groups.map((g) => {
    const loss = g.cell.point.loss;
    return {
      ...aggregate(g.variant, results.get(g.runKey)!),
      slice: g.slice,
      capKind: g.cell.capKind,
      x: g.cell.x,
      y: g.cell.y,
      lossModel: loss.model,
      meanBurstPackets: loss.model === 'burst-link' ? loss.meanBurstPackets : null,
    };
  });
  const cellKey = (r: SweepRow) => [r.slice, r.capKind, r.x, r.y].join('|');
  const http = new Map(rows.filter((r) => r.mode === 'http').map((r) => [cellKey(r), r]));
  for (const r of rows) {
    const base = http.get(cellKey(r));
    r.speedupVsHttp = base && base.goodputBps > 0 ? Math.round((r.goodputBps / base.goodputBps) * 100) / 100 : null;
  }
  return rows;
}

export async function runSweep(
  o: SweepOptions,
  onProgress?: (done: number, total: number) => void,
): Promise<SweepDocument> {
  const started = Date.now();
  const plan = buildSweep(o);
  const scenarios = plan.runs.flatMap((r) => r.scenarios);
  const flat = await runAll(scenarios, (done) => onProgress?.(done, scenarios.length));
  const results = new Map<string, SimResult[]>();
  let offset = 0;
  for (const run of plan.runs) {
    results.set(run.key, flat.slice(offset, offset + run.scenarios.length));
    offset += run.scenarios.length;
  }
  return {
    kind: 'mutp-sim-sweep',
    config: o.config,
    seeds: o.seeds,
    protocol: { ...SIM_CONFIGS[o.config], symbolSize: PAPER_DEFAULTS.symbolSize, jitterMs: PAPER_DEFAULTS.jitterMs },
    variants: (o.variants ?? SWEEP_VARIANTS).map(variantName),
    slices: plan.slices.map(sliceMeta),
    simulations: scenarios.length,
    elapsedSeconds: Math.round((Date.now() - started) / 1000),
    rows: sweepRows(plan, results),
  };
}

function sliceMeta(s: SweepSlice): SliceMeta {
  const { id, title, fixed, x, y, capKinds, notes } = s;
  return { id, title, fixed, x, y, capKinds, notes };
}

/** The rows of one map (slice, cap mix, variant) as [y][x], in the slice's order; null where missing. */
export function sweepMatrix(
  doc: Pick<SweepDocument, 'rows' | 'slices'>,
  sliceId: string,
  capKind: CapKind,
  variant: string,
): (SweepRow | null)[][] {
  const slice = doc.slices.find((s) => s.id === sliceId);
  if (!slice) throw new RangeError(`no slice ${sliceId}`);
  const byCell = new Map<string, SweepRow>();
  for (const r of doc.rows)
    if (r.slice === sliceId && r.capKind === capKind && variantName(r) === variant) byCell.set(`${r.x}|${r.y}`, r);
  return slice.y.values.map((y) => slice.x.values.map((x) => byCell.get(`${x}|${y}`) ?? null));
}
