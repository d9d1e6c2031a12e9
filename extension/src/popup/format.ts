/** Number formatting for the popup. */

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(2)} MiB`;
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** Bytes per second as MB/s (10^6), as the benchmarks print them. */
export function formatRate(bps: number): string {
  if (!Number.isFinite(bps) || bps <= 0) return '';
  return bps >= 1e6 ? `${(bps / 1e6).toFixed(2)} MB/s` : `${(bps / 1e3).toFixed(0)} kB/s`;
}

/** The last path segment of a URL (or the string's tail). */
export function shortName(url: string): string {
  try {
    const u = new URL(url);
    const last = u.pathname.split('/').filter(Boolean).pop() ?? u.host;
    return decodeURIComponent(last).slice(0, 60);
  } catch {
    return url.slice(-40);
  }
}
