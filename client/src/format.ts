/** Human-readable summaries of downloads (the CLI and the demo print them). Units are SI: 1 kB = 1000 B. */
import { SeriesResult } from '@mutp/shared/client';
import type { FileResult } from './file-download';

const mb = (bytesPerSecond: number) => `${(bytesPerSecond / 1e6).toFixed(2)} MB/s`;

/** 999 B, 12.3 kB, 4.56 MB, 2.15 GB (SI, as the rates). */
export function formatBytes(bytes: number): string {
  if (bytes < 1000) return `${Math.round(bytes)} B`;
  const [value, unit] = bytes < 1e6 ? [bytes / 1e3, 'kB'] : bytes < 1e9 ? [bytes / 1e6, 'MB'] : [bytes / 1e9, 'GB'];
  return `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${unit}`;
}

export const formatRate = (bytesPerSecond: number): string => `${formatBytes(bytesPerSecond)}/s`;

/**
 * A name from the network (a proxy's, as origo relays it: any 128 characters) made safe for a
 * terminal: control characters (escape sequences that would move the cursor, recolour or retitle
 * the terminal) and anything outside printable ASCII become `?`.
 */
export const printable = (name: string): string => name.replace(/[^\x20-\x7e]/g, '?');

/** What one `mutp get` to a file did: bytes, time, goodput, where the bytes sit, each proxy's part. */
export function formatFileResult(r: FileResult): string {
  const lines = [
    `${r.url} -> ${r.file}: ${r.fetchedBytes} bytes in ${r.durationMs.toFixed(0)} ms (${r.mode}), ` +
      `goodput ${mb(r.goodputBps)}, normalized goodput ${r.normalizedGoodput.toFixed(3)}`,
  ];
  if (r.resumedFrom > r.start)
    lines.push(`  resumed at byte ${r.resumedFrom}: ${r.resumedFrom - r.start} bytes were already verified`);
  const where =
    r.start > 0 || r.bytes !== r.completeLength
      ? `bytes ${r.start}-${r.start + r.bytes - 1} of ${r.completeLength ?? 'an unknown length'}`
      : `${r.bytes} bytes`;
  lines.push(
    `  ${where}${r.contentType ? `, ${r.contentType}` : ''}, in ${r.ranges} range${r.ranges === 1 ? '' : 's'}`,
  );
  lines.push(`  sha-256 ${r.sha256}`);
  if (r.prefetch.hinted > 0)
    lines.push(
      `  ${r.prefetch.hinted} range${r.prefetch.hinted === 1 ? '' : 's'} staged ahead: ` +
        `${r.prefetch.staged} proxy answers staged, ${r.prefetch.failed} failed`,
    );
  if (r.retries > 0)
    lines.push(`  ${r.retries} range${r.retries === 1 ? ' was' : 's were'} tried again after a failure`);
  for (const p of r.proxies) {
    // Parallel HTTP: what a proxy sent beyond its winning responses was thrown away.
    const wasted = r.mode === 'http' ? Math.max(0, p.bytes - Math.round(p.share * r.fetchedBytes)) : 0;
    const detail =
      p.packets !== undefined
        ? `${p.packets.useful} of ${p.packets.received} packets useful, ${formatBytes(p.bytes)} received`
        : `${formatBytes(p.bytes)} received${r.mode === 'http' ? `, ${formatBytes(wasted)} wasted` : ''}`;
    const failed = p.failures.length > 0 ? `; stopped serving: ${printable(p.failures.join('; '))}` : '';
    lines.push(
      `  ${printable(p.name).padEnd(16)} share ${(p.share * 100).toFixed(1).padStart(5)}%  ${detail}${failed}`,
    );
  }
  if (r.ranges > 0 && r.mostProxies < r.proxiesAsked)
    lines.push(`  asked for ${r.proxiesAsked} proxies; origo offered ${r.mostProxies}`);
  return lines.join('\n');
}

/** Summary of a series of segments (`mutp playlist`). */
export function formatSeries(r: SeriesResult, mode: string): string {
  const bytes = r.segments.reduce((sum, s) => sum + s.bytes, 0);
  const staged = r.segments.filter((s) => s.staged).length;
  const st = r.staging;
  const ms = (v: number | null) => (v === null ? '-' : `${v.toFixed(0)} ms`);
  return [
    `${r.segments.length} segments, ${bytes} bytes in ${(r.totalMs / 1000).toFixed(2)} s (${mode}, ` +
      `${r.proxies.length} proxies: ${r.proxies.map((p) => printable(p.name)).join(', ')}), goodput ${mb((bytes / r.totalMs) * 1000)}`,
    `  staged when fetched: ${staged}/${r.segments.length}; hints ${st.ordersSent} (${st.hintsStaged} of ` +
      `${st.hintsAnswered} proxy answers staged), wasted ${st.wasted}; proxy set changed ${r.handoffs} times`,
    `  staging ahead ${st.neededAhead}: fetch ${ms(st.fetchMs)}, origin to edge ${ms(st.stagingLatencyMs)}, ` +
      `edge round trip ${ms(st.edgeRttMs)}`,
  ].join('\n');
}
