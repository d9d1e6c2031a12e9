/** The paper's experiment grid (Fig. 2) and how seeds are aggregated into rows. */
import { SchedulerName } from '@mutp/shared';
import { configWindow, SIM_CONFIGS, SimConfigName } from './configs';
import { PAPER_DEFAULTS, Scenario, SimMode, SimResult } from './scenario';

export interface Variant {
  mode: SimMode;
  scheduler?: SchedulerName;
}

/**
 * http, both uncoded schedulers, both coded schedulers (the paper's are 'random' and 'rarest'),
 * and the fountain mode.
 */
export const VARIANTS: Variant[] = [
  { mode: 'http' },
  { mode: 'uncoded', scheduler: 'random' },
  { mode: 'uncoded', scheduler: 'partitioned' },
  { mode: 'rlnc', scheduler: 'rarest' },
  { mode: 'rlnc', scheduler: 'partitioned' },
  { mode: 'fountain', scheduler: 'partitioned' },
];

/** 'uniform': every source at 896 KB/s; 'mixed': half at 896 and half at 1792 KB/s. */
export function caps(sources: number, kind: 'uniform' | 'mixed'): number[] {
  return Array.from({ length: sources }, (_, i) => (kind === 'mixed' && i >= Math.ceil(sources / 2) ? 1792 : 896));
}

export interface GridOptions {
  sources: number[];
  capKinds: ('uniform' | 'mixed')[];
  objects: number[];
  losses: number[];
  /** Windows in packets, or 'path' (sized per scenario from its caps and RTT, see configs.ts). */
  windows: (number | 'path')[];
  seeds: number;
  variants: Variant[];
  /** The protocol configuration (configs.ts); default 'default'. */
  config?: SimConfigName;
}

export const PAPER_GRID: GridOptions = {
  sources: [1, 2, 4, 6],
  capKinds: ['uniform', 'mixed'],
  objects: [1 << 20, 2 << 20],
  losses: [0, 0.02],
  windows: [PAPER_DEFAULTS.window],
  seeds: 20,
  variants: VARIANTS,
};

export interface ScenarioGroup {
  key: string;
  variant: Variant;
  scenarios: Scenario[];
}

export function buildGrid(o: GridOptions): ScenarioGroup[] {
  const groups: ScenarioGroup[] = [];
  for (const window of o.windows)
    for (const objectBytes of o.objects)
      for (const loss of o.losses)
        for (const n of o.sources)
          for (const kind of o.capKinds) {
            // One source: 'mixed' is the same as 'uniform' (896 KB/s); run it once.
            if (n === 1 && kind === 'mixed' && o.capKinds.includes('uniform')) continue;
            const capsKBps = caps(n, kind);
            for (const variant of o.variants) {
              const scenarios = Array.from({ length: o.seeds }, (_, i) => ({
                ...PAPER_DEFAULTS,
                generationSize: SIM_CONFIGS[o.config ?? 'default'].generationSize,
                startAtCap: SIM_CONFIGS[o.config ?? 'default'].startAtCap,
                weightLevels: SIM_CONFIGS[o.config ?? 'default'].weightLevels,
                capacityHints: SIM_CONFIGS[o.config ?? 'default'].capacityHints,
                senderConfig: SIM_CONFIGS[o.config ?? 'default'].senderConfig,
                receiverConfig: SIM_CONFIGS[o.config ?? 'default'].receiverConfig,
                window: configWindow(window, capsKBps, PAPER_DEFAULTS.rttMs, PAPER_DEFAULTS.symbolSize),
                mode: variant.mode,
                scheduler: variant.scheduler,
                capsKBps,
                objectBytes,
                loss,
                seed: i + 1,
              }));
              groups.push({ key: scenarioKey(scenarios[0]), variant, scenarios });
            }
          }
  return groups;
}

/** Identifies the network scenario, whatever the mode: rows with the same key are compared. */
export function scenarioKey(s: Scenario): string {
  return [s.capsKBps.join('/'), s.objectBytes, s.loss, s.rttMs, s.window, s.generationSize, !!s.startAtCap].join('|');
}

export interface GridRow {
  mode: SimMode;
  scheduler: string;
  sources: number;
  capsKBps: number[];
  objectBytes: number;
  rttMs: number;
  loss: number;
  window: number;
  generationSize: number;
  /** Sources started at their known upload cap (configs.ts). */
  startAtCap: boolean;
  seeds: number;
  failed: number;
  byteExact: boolean;
  medianDownloadMs: number;
  goodputBps: number;
  efficiency: number;
  normalizedGoodput: number;
  sentPerUseful: number;
  /** goodput / the http row's goodput for the same scenario in the same run. */
  speedupVsHttp: number | null;
}

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function aggregate(variant: Variant, results: SimResult[]): GridRow {
  const s = results[0].scenario;
  const ok = results.filter((r) => r.status === 'complete');
  const downloadMs = median(ok.map((r) => r.downloadMs));
  return {
    mode: variant.mode,
    scheduler: variant.mode === 'http' ? '-' : (variant.scheduler ?? 'partitioned'),
    sources: s.capsKBps.length,
    capsKBps: s.capsKBps,
    objectBytes: s.objectBytes,
    rttMs: s.rttMs,
    loss: s.loss,
    window: s.window,
    generationSize: s.generationSize,
    startAtCap: !!s.startAtCap,
    seeds: results.length,
    failed: results.length - ok.length,
    byteExact: ok.every((r) => r.byteExact),
    medianDownloadMs: round(downloadMs, 1),
    goodputBps: Math.round((s.objectBytes * 1000) / downloadMs),
    efficiency: round(median(ok.map((r) => r.efficiency)), 3),
    normalizedGoodput: round(median(results.map((r) => r.normalizedGoodput)), 3),
    sentPerUseful: round(median(results.map((r) => r.sentPerUseful)), 3),
    speedupVsHttp: null,
  };
}

/** Fills speedupVsHttp from the http row of the same scenario. */
export function compareWithHttp(rows: GridRow[]): void {
  const http = new Map<string, GridRow>();
  const key = (r: GridRow) => [r.capsKBps.join('/'), r.objectBytes, r.loss, r.rttMs, r.window].join('|');
  for (const r of rows) if (r.mode === 'http') http.set(key(r), r);
  for (const r of rows) {
    const base = http.get(key(r));
    r.speedupVsHttp = base && base.goodputBps > 0 ? round(r.goodputBps / base.goodputBps, 2) : null;
  }
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
