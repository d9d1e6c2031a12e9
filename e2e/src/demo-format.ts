/**
 * What the demo (`npm run demo`, e2e/src/demo.ts) prints, as pure functions: its plan before it
 * starts anything, each mode's last download per proxy, and the comparison table. One convention
 * for units throughout, SI: 1 kB = 1000 B, 1 MB = 10^6 B, rates in MB/s. The proxies' caps are
 * given to them in their flag's unit (`--upload-limit`, KiB/s) and printed here in MB/s.
 */
import type { GetResult } from '@mutp/shared/client';

/** Bytes in one unit of the proxies' `--upload-limit` (KiB/s). */
export const UPLOAD_LIMIT_UNIT_BYTES = 1024;

/** "512 B", "12.3 kB", "1.94 MB", "2.10 GB": SI units, three significant figures or so. */
export function formatBytes(bytes: number): string {
  if (Math.abs(bytes) < 1e3) return `${Math.round(bytes)} B`;
  if (Math.abs(bytes) < 1e6) return `${(bytes / 1e3).toFixed(1)} kB`;
  if (Math.abs(bytes) < 1e9) return `${(bytes / 1e6).toFixed(2)} MB`;
  return `${(bytes / 1e9).toFixed(2)} GB`;
}

/** A rate in MB/s (10^6 B/s), two decimals: the unit of the comparison table and the CLI. */
export function formatRate(bytesPerSecond: number): string {
  return `${(bytesPerSecond / 1e6).toFixed(2)} MB/s`;
}

/** A proxy's cap in bytes per second from its `--upload-limit` value. */
export function capBytesPerSecond(uploadKBps: number): number {
  return uploadKBps * UPLOAD_LIMIT_UNIT_BYTES;
}

/** What each mode does, in one line. */
export const MODE_DESCRIPTIONS: Record<string, string> = {
  http: 'Parallel HTTP (the baseline): the whole segment from every proxy; the first verified response wins, the rest is wasted',
  uncoded: 'MUTP over WebRTC data channels, original packets: each proxy sends its own part',
  rlnc: 'MUTP over WebRTC data channels, random linear network coding (RLNC): any packet from any proxy helps',
  fountain: 'MUTP over WebRTC data channels, the wirehair fountain code: any packet from any proxy helps',
};

export interface DemoPlan {
  /** The stream's folder under e2e/media/out, e.g. high/hls-ts. */
  stream: string;
  /** Sizes of the segments each mode downloads, in bytes. */
  segmentBytes: number[];
  modes: readonly string[];
  proxies: readonly { name: string; uploadKBps: number }[];
}

/** "1.95 MB", or "1.87-1.95 MB" when the sizes differ. */
export function sizeRange(sizes: readonly number[]): string {
  const lo = formatBytes(Math.min(...sizes));
  const hi = formatBytes(Math.max(...sizes));
  if (lo === hi) return lo;
  const [loValue, loUnit] = lo.split(' ');
  return loUnit === hi.split(' ')[1] ? `${loValue}-${hi}` : `${lo} to ${hi}`;
}

/** What the demo is about to do, printed before it starts anything. */
export function describePlan(plan: DemoPlan): string {
  const n = plan.proxies.length;
  const segments = plan.segmentBytes.length;
  const total = plan.segmentBytes.reduce((a, b) => a + b, 0);
  const capSum = plan.proxies.reduce((a, p) => a + capBytesPerSecond(p.uploadKBps), 0);
  const caps = plan.proxies.map((p) => `${p.name} ${formatRate(capBytesPerSecond(p.uploadKBps))}`).join(', ');
  const width = Math.max(...plan.modes.map((m) => m.length));
  return [
    'MUTP local demo. It will:',
    `  1. start a local origin serving ${segments} generated H.264 segment${segments === 1 ? '' : 's'} of ` +
      `${plan.stream} (${sizeRange(plan.segmentBytes)} each, ${formatBytes(total)} in all);`,
    `  2. start origo and ${n} proxy processes on loopback, upload capped at ${caps} ` +
      `(${formatRate(capSum)} together);`,
    `  3. download the same ${segments} segment${segments === 1 ? '' : 's'} in each of ${plan.modes.length} modes, ` +
      `every download through all ${n} proxies with the Node client:`,
    ...plan.modes.map((m) => `       ${m.padEnd(width)}  ${MODE_DESCRIPTIONS[m] ?? ''}`.trimEnd()),
    "  4. check every byte against the origin, then print each mode's last download per proxy and a comparison.",
    'Units: 1 kB = 1000 B, 1 MB = 10^6 B; packets are the data packets (datagrams) a proxy sent.',
  ].join('\n');
}

/** One download, as the demo shows it: time and goodput, then what each proxy sent and whether it counted. */
export function formatDownload(label: string, r: GetResult): string {
  const lines = [
    `${label}: ${formatBytes(r.object.length)} in ${r.durationMs.toFixed(0)} ms (${r.mode}), ` +
      `goodput ${formatRate(r.goodputBps)}, normalized goodput ${r.normalizedGoodput.toFixed(3)}`,
  ];
  const width = Math.max(0, ...r.sources.map((s) => s.name.length));
  if (r.mode === 'http') {
    let wasted = 0;
    let losers = 0;
    for (const s of r.sources) {
      const won = s.share === 1;
      if (!won) {
        wasted += s.bytes;
        losers++;
      }
      lines.push(
        `  ${s.name.padEnd(width)}  ${won ? 'won   ' : 'wasted'} ${formatBytes(s.bytes).padStart(9)}` +
          (won ? '  (its response is the object)' : '  (lost the race)'),
      );
    }
    lines.push(
      `  wasted: ${formatBytes(wasted)} sent by the ${losers} ${losers === 1 ? 'proxy' : 'proxies'} that lost the race`,
    );
  } else {
    for (const s of r.sources) {
      const packets = `${s.useful} of ${s.received} packets useful, `;
      const state = s.state === 'failed' || s.state === 'dropped' ? `, ${s.state}` : '';
      lines.push(
        `  ${s.name.padEnd(width)}  share ${(s.share * 100).toFixed(1).padStart(5)}%  ${packets}` +
          `${formatBytes(s.bytes)} received${state}`,
      );
    }
  }
  return lines.join('\n');
}

export interface DemoRow {
  mode: string;
  sources: number;
  /** The proxies' `--upload-limit` values (KiB/s). */
  capsKBps: number[];
  segments: number;
  bytes: number;
  medianSegmentMs: number;
  medianGoodputBps: number;
  normalizedGoodput: number;
  efficiency: number;
  speedupVsHttp: number | null;
  verified: boolean;
}

/** The comparison of every mode, one row each, units in the header. */
export function formatTable(rows: readonly DemoRow[]): string {
  const header = 'mode      segments  median ms  goodput MB/s  normalized  efficiency  vs http  verified';
  return [
    header,
    ...rows.map(
      (r) =>
        `${r.mode.padEnd(9)} ${String(r.segments).padStart(8)} ${String(r.medianSegmentMs).padStart(10)} ` +
        `${(r.medianGoodputBps / 1e6).toFixed(2).padStart(13)} ${r.normalizedGoodput.toFixed(3).padStart(11)} ` +
        `${r.efficiency.toFixed(3).padStart(11)} ${r.speedupVsHttp === null ? '-'.padStart(7) + ' ' : r.speedupVsHttp.toFixed(2).padStart(7) + 'x'}  ${r.verified ? 'yes' : 'NO'}`,
    ),
  ].join('\n');
}

/** What the table's columns mean, with the best efficiency Parallel HTTP can reach with these caps. */
export function tableNotes(capsKBps: readonly number[]): string {
  const caps = capsKBps.map(capBytesPerSecond);
  const sum = caps.reduce((a, b) => a + b, 0);
  return [
    'goodput = segment bytes / time (median of the segments); normalized = segment bytes / bytes received from all proxies;',
    `efficiency = goodput / sum of the caps (${formatRate(sum)}); Parallel HTTP can at best reach the fastest ` +
      `proxy's share (${(Math.max(...caps) / sum).toFixed(2)}).`,
  ].join('\n');
}
