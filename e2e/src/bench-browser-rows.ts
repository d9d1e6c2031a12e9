/**
 * bench:browser's cells (the plays of one mode and N) and the rows, CSV lines and table made of
 * them. A Chromium cell's segments are the extension's download records (transfer time in the
 * downloader frame, per-proxy shares of the useful packets, normalized goodput); a Firefox cell
 * has no records (bench-browser-runtime.ts), so its segments are the page's timings (from the
 * player's request to the answer: the hook, relay and frame included), its shares the proxies'
 * bytes sent, and it has no normalized goodput or staging; a segment the hook sent to the network
 * (a fallback) is timed there too, so its rows hold only where `fallbacks` is 0 (`served` says how
 * many MUTP served). Every row also gives the page-timed
 * median, the one measure both runtimes share (`pageMedianSegmentGoodputBps`).
 */
import { quantile } from './box-plot';
import type { PageSegment, PlayResult } from './browser-play';
import type { BenchRuntime } from './bench-browser-runtime';
import type { SenderSummary } from './sender-log';

export const MODES = ['http', 'uncoded', 'rlnc', 'fountain'] as const;
export type BenchMode = (typeof MODES)[number];

export interface Cell {
  runtime: BenchRuntime;
  mode: BenchMode;
  sources: number;
  capsKBps: number[];
  plays: PlayResult[];
  origoRecords: number;
  /** Staging hints the proxies answered during the plays, by outcome (all proxies summed). */
  stageHints: Record<string, number>;
  /** Bytes each proxy sent to clients during the plays (MUTP datagrams and HTTP bodies). */
  proxyBytes: Record<string, number>;
  /** QUIC (WebTransport) sessions the proxies accepted during the plays. */
  quicSessionsAccepted: number;
  /** The proxies' senders over the cell's transfers (--sender-stats). */
  senders?: SenderSummary;
}

/** What the rows are made of: a segment with its time and goodput (records or page, see the top). */
export interface MeasuredSegment {
  url: string;
  objectBytes: number;
  durationMs: number;
  goodputBps: number;
  normalizedGoodput: number | null;
}

export interface Row {
  runtime: BenchRuntime;
  mode: BenchMode;
  sources: number;
  capsKBps: number[];
  stream: string;
  /** The proxies' transport asked for (--transport); `quicSessionsAccepted` says what was used. */
  transport: string;
  quicSessionsAccepted: number;
  /** Where the segment times come from: the extension's records, or the page (Firefox). */
  timing: 'extension' | 'page';
  plays: number;
  /** Segments timed (records or page) and, of the page's media requests, how many MUTP served (the hook's counters). */
  segments: number;
  served: number;
  medianSegmentGoodputBps: number;
  p25SegmentGoodputBps: number | null;
  p75SegmentGoodputBps: number | null;
  /** The page-timed median (both runtimes): from the player's request to its answer. */
  pageMedianSegmentGoodputBps: number | null;
  normalizedGoodput: number | null;
  medianSegmentMs: number | null;
  medianStartupMs: number | null;
  stalls: number;
  fallbacks: number;
  fallbackReasons: Record<string, number>;
  /** Mean share of each proxy (by cap) over the segments (Firefox: of the bytes the proxies sent). */
  proxyShares: Record<string, number>;
  origoRecords: number;
  /** Staging hints the proxies answered in this cell's plays, by outcome (staged, cached, busy, ...). */
  stageHints: Record<string, number>;
  /** Seeks made in all plays (--seeks). */
  seeks: number;
  /**
   * The extension's staging at the end of each play, summed: hints sent, staged, and segments
   * staged but never asked for (`wasted`, the staging overhead), and each play's spread at its end
   * (proxies each new segment was staged at: spread-rule.ts); null without staging or records.
   */
  staging: { ordersSent: number; hintsStaged: number; wasted: number; spreads: (number | null)[] } | null;
  /** wasted / seeks (null without seeks or staging). */
  wastedPerSeek: number | null;
  speedupVsHttp: number | null;
  profile: string;
  /** Proxies restarted before each play, caches never warmed (--cold). */
  cold: boolean;
  /** The extension settings from --settings (besides mode, proxies, origoUrl, exposeCounters). */
  settings: Record<string, unknown>;
  /** The simulator's goodput for one median-size segment in the same mode, caps and profile (median of 5 seeds). */
  simSegmentGoodputBps: number | null;
  /** --sender-stats: the proxies' own counters of the cell's transfers (sender-log.ts). */
  senders?: SenderSummary;
}

/** What every row of a run shares. */
export interface RunContext {
  stream: string;
  transport: string;
  profile: string;
  cold: boolean;
  settings: Record<string, unknown>;
}

export const median = (xs: number[]) =>
  quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
export const round = (x: number, d = 3) => (Number.isFinite(x) ? Math.round(x * 10 ** d) / 10 ** d : null);

const pageMeasured = (s: PageSegment): MeasuredSegment => ({
  url: s.url,
  objectBytes: s.bytes,
  durationMs: s.durationMs,
  goodputBps: s.goodputBps,
  normalizedGoodput: null,
});

/** The segments a cell's row is made of: downloaded by MUTP, not from the frame's cache. */
export function measuredSegments(cell: Cell): MeasuredSegment[] {
  if (cell.runtime === 'firefox') return cell.plays.flatMap((p) => p.pageSegments.map(pageMeasured));
  return cell.plays.flatMap((p) =>
    p.segments
      .filter((s) => s.ok && !s.cached)
      .map((s) => ({
        url: s.url,
        objectBytes: s.objectBytes,
        durationMs: s.durationMs,
        goodputBps: s.goodputBps,
        normalizedGoodput: s.normalizedGoodput,
      })),
  );
}

/** The last staging snapshot of each play's records, summed over the plays. */
export function stagingOf(plays: PlayResult[]): Row['staging'] {
  let sum: Row['staging'] = null;
  for (const p of plays) {
    const last = [...p.segments].reverse().find((s) => s.staging)?.staging;
    if (!last) continue;
    sum ??= { ordersSent: 0, hintsStaged: 0, wasted: 0, spreads: [] };
    sum.ordersSent += last.ordersSent;
    sum.hintsStaged += last.hintsStaged;
    sum.wasted += last.wasted;
    sum.spreads.push(last.spread ?? null);
  }
  return sum;
}

function sharesOf(cell: Cell): Record<string, number> {
  const byName = (e: [string, number][]) => Object.fromEntries(e.sort(([a], [b]) => a.localeCompare(b)));
  if (cell.runtime === 'firefox') {
    const total = Object.values(cell.proxyBytes).reduce((a, b) => a + b, 0);
    return byName(Object.entries(cell.proxyBytes).map(([k, v]) => [k, total > 0 ? (round(v / total) ?? 0) : 0]));
  }
  const shares: Record<string, number[]> = {};
  for (const p of cell.plays)
    for (const s of p.segments.filter((x) => x.ok && !x.cached))
      for (const x of s.proxies) (shares[x.name] ??= []).push(x.share);
  return byName(Object.entries(shares).map(([k, v]) => [k, round(v.reduce((a, b) => a + b, 0) / v.length) ?? 0]));
}

export function rowOf(cell: Cell, run: RunContext): Row {
  const seeks = cell.plays.reduce((a, p) => a + p.seeks, 0);
  const staging = stagingOf(cell.plays);
  const segs = measuredSegments(cell);
  const goodputs = segs.map((s) => s.goodputBps).sort((a, b) => a - b);
  const pageGoodputs = cell.plays.flatMap((p) => p.pageSegments.map((s) => s.goodputBps));
  const normalized = segs.flatMap((s) => (s.normalizedGoodput === null ? [] : [Math.min(1, s.normalizedGoodput)]));
  const reasons: Record<string, number> = {};
  for (const p of cell.plays)
    for (const [k, v] of Object.entries(p.counters.fallbacks)) reasons[k] = (reasons[k] ?? 0) + v;
  return {
    runtime: cell.runtime,
    mode: cell.mode,
    sources: cell.sources,
    capsKBps: cell.capsKBps,
    stream: run.stream,
    transport: run.transport,
    quicSessionsAccepted: cell.quicSessionsAccepted,
    timing: cell.runtime === 'firefox' ? 'page' : 'extension',
    plays: cell.plays.length,
    segments: segs.length,
    served: cell.plays.reduce((a, p) => a + p.counters.served, 0),
    medianSegmentGoodputBps: Math.round(median(goodputs)),
    p25SegmentGoodputBps: round(quantile(goodputs, 0.25), 0),
    p75SegmentGoodputBps: round(quantile(goodputs, 0.75), 0),
    pageMedianSegmentGoodputBps: round(median(pageGoodputs), 0),
    normalizedGoodput: normalized.length > 0 ? round(median(normalized)) : null,
    medianSegmentMs: round(median(segs.map((s) => s.durationMs)), 1),
    medianStartupMs: round(median(cell.plays.map((p) => p.startupMs)), 0),
    stalls: cell.plays.reduce((a, p) => a + p.state.stalls, 0),
    fallbacks: Object.values(reasons).reduce((a, b) => a + b, 0),
    fallbackReasons: reasons,
    proxyShares: sharesOf(cell),
    origoRecords: cell.origoRecords,
    stageHints: cell.stageHints,
    seeks,
    staging,
    wastedPerSeek: seeks > 0 && staging ? round(staging.wasted / seeks, 2) : null,
    speedupVsHttp: null,
    profile: run.profile,
    cold: run.cold,
    settings: run.settings,
    simSegmentGoodputBps: null,
    ...(cell.senders ? { senders: cell.senders } : {}),
  };
}

/**
 * One line per segment: the extension's records (Chromium) or the page's segments (Firefox: no
 * total, normalized goodput, ok or shares); `page_ms` is the page's time for the same URL.
 */
export function csvOf(cells: Cell[]): string {
  const lines = [
    'runtime,mode,sources,caps_kBps,play,segment,bytes,duration_ms,total_ms,page_ms,goodput_Bps,normalized_goodput,ok,reason,shares',
  ];
  const name = (url: string) => new URL(url).pathname.split('/').pop();
  for (const c of cells)
    for (const p of c.plays) {
      const pageMs = new Map(p.pageSegments.map((s) => [s.url, round(s.durationMs, 1)]));
      const head = [c.runtime, c.mode, c.sources, c.capsKBps.join('/'), p.repeat];
      if (c.runtime === 'firefox') {
        for (const s of p.pageSegments)
          lines.push(
            [...head, name(s.url), s.bytes, round(s.durationMs, 1), '', pageMs.get(s.url), Math.round(s.goodputBps)]
              .concat(['', '', '', ''])
              .join(','),
          );
        continue;
      }
      for (const s of p.segments) {
        const shares = s.proxies.map((x) => `${x.name}:${round(x.share, 4)}`).join(' ');
        lines.push(
          [
            ...head,
            name(s.url),
            s.bytes,
            round(s.durationMs, 1),
            round(s.totalMs, 1),
            pageMs.get(s.url) ?? '',
            Math.round(s.goodputBps),
            round(s.normalizedGoodput, 4),
            s.ok,
            s.reason ?? '',
            shares,
          ].join(','),
        );
      }
    }
  return `${lines.join('\n')}\n`;
}

export function printTable(rows: Row[]): void {
  const mb = (b: number | null) => (b === null ? '-' : (b / 1e6).toFixed(2));
  console.log(
    'runtime   mode      N  caps KB/s            segs  median MB/s  p25-p75 MB/s  page MB/s  norm.gp  median ms  startup ms  stalls  fallbacks  quic  x http  shares',
  );
  for (const r of rows) {
    console.log(
      `${r.runtime.padEnd(9)} ${r.mode.padEnd(9)} ${String(r.sources)}  ${r.capsKBps.join('/').padEnd(20)} ${String(r.segments).padStart(4)}  ` +
        `${mb(r.medianSegmentGoodputBps).padStart(11)}  ${`${mb(r.p25SegmentGoodputBps)}-${mb(r.p75SegmentGoodputBps)}`.padStart(12)}  ` +
        `${mb(r.pageMedianSegmentGoodputBps).padStart(9)}  ` +
        `${String(r.normalizedGoodput ?? '-').padStart(7)}  ${String(r.medianSegmentMs).padStart(9)}  ${String(r.medianStartupMs).padStart(10)}  ` +
        `${String(r.stalls).padStart(6)}  ${String(r.fallbacks).padStart(9)}  ${String(r.quicSessionsAccepted).padStart(4)}  ` +
        `${String(r.speedupVsHttp ?? '-').padStart(6)}  ` +
        Object.entries(r.proxyShares)
          .map(([k, v]) => `${k}:${v}`)
          .join(' '),
    );
  }
}
