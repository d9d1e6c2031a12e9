/** Human-readable summary of one download (the CLI and the demo print it). */
import { GetResult, SeriesResult } from '@mutp/shared/client';

const mb = (bytesPerSecond: number) => `${(bytesPerSecond / 1e6).toFixed(2)} MB/s`;

export function formatResult(url: string, r: GetResult): string {
  const lines = [
    `${url}: ${r.object.length} bytes in ${r.durationMs.toFixed(0)} ms (${r.mode}), goodput ${mb(r.goodputBps)}, ` +
      `normalized goodput ${r.normalizedGoodput.toFixed(3)}`,
  ];
  const range = r.attributes?.range;
  if (range)
    lines.push(
      `  bytes ${range.start}-${range.start + r.object.length - 1} of ${range.completeLength ?? 'an unknown length'}` +
        (r.attributes?.contentType ? `, ${r.attributes.contentType}` : ''),
    );
  else if (r.attributes?.contentType) lines.push(`  ${r.attributes.contentType}`);
  for (const s of r.sources) {
    const detail = 'useful' in s ? `${s.useful} useful of ${s.received} received` : `${s.bytes} bytes received`;
    lines.push(`  ${s.name.padEnd(16)} share ${(s.share * 100).toFixed(1).padStart(5)}%  ${detail}`);
  }
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
      `${r.proxies.length} proxies: ${r.proxies.map((p) => p.name).join(', ')}), goodput ${mb((bytes / r.totalMs) * 1000)}`,
    `  staged when fetched: ${staged}/${r.segments.length}; hints ${st.ordersSent} (${st.hintsStaged} of ` +
      `${st.hintsAnswered} proxy answers staged), wasted ${st.wasted}; proxy set changed ${r.handoffs} times`,
    `  staging ahead ${st.neededAhead}: fetch ${ms(st.fetchMs)}, origin to edge ${ms(st.stagingLatencyMs)}, ` +
      `edge round trip ${ms(st.edgeRttMs)}`,
  ].join('\n');
}
