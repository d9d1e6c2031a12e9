/**
 * The proxies' own view of each transfer, read from their "transfer ended" debug log lines
 * (proxy/src/transfer-host.ts): how many packets each sender declared lost or expired, how often
 * it was blocked by its in-flight limit or found nothing to send, and its RTT. Comparing `lost`
 * with the emulated links' drop counters tells real losses from false loss detection.
 */

export interface SenderSummary {
  transfers: number;
  dataSent: number;
  lost: number;
  expired: number;
  blockedByInFlight: number;
  nothingToSend: number;
  /** Medians over the transfers. */
  srttMs: number | null;
  minRttMs: number | null;
  /** The same per proxy (by name), without the per-proxy breakdown. */
  byProxy?: Record<string, Omit<SenderSummary, 'byProxy'>>;
}

interface TransferEnded {
  proxy: string;
  dataSent: number;
  lost: number;
  expired: number;
  blockedByInFlight: number;
  nothingToSend: number;
  srttMs: number;
  minRttMs: number;
}

/** Collects the ended transfers from proxy log lines; `take()` returns and forgets them. */
export class SenderLog {
  private ended: TransferEnded[] = [];

  /** Feed with every log line of a proxy process (pino JSON; anything else is ignored). */
  onLine(proxy: string, line: string): void {
    if (!line.includes('"transfer ended"')) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return;
    }
    const r = parsed as Partial<Record<keyof TransferEnded, unknown>>;
    const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    this.ended.push({
      proxy,
      dataSent: num(r.dataSent),
      lost: num(r.lost),
      expired: num(r.expired),
      blockedByInFlight: num(r.blockedByInFlight),
      nothingToSend: num(r.nothingToSend),
      srttMs: num(r.srttMs),
      minRttMs: num(r.minRttMs),
    });
  }

  take(): SenderSummary {
    const ended = this.ended;
    this.ended = [];
    const byProxy: Record<string, Omit<SenderSummary, 'byProxy'>> = {};
    for (const proxy of new Set(ended.map((e) => e.proxy)).values())
      byProxy[proxy] = summarize(ended.filter((e) => e.proxy === proxy));
    return { ...summarize(ended), byProxy };
  }
}

function summarize(ended: TransferEnded[]): Omit<SenderSummary, 'byProxy'> {
  const sum = (k: Exclude<keyof TransferEnded, 'proxy'>) => ended.reduce((a, e) => a + e[k], 0);
  return {
    transfers: ended.length,
    dataSent: sum('dataSent'),
    lost: sum('lost'),
    expired: sum('expired'),
    blockedByInFlight: sum('blockedByInFlight'),
    nothingToSend: sum('nothingToSend'),
    srttMs: medianOf(ended.map((e) => e.srttMs)),
    minRttMs: medianOf(ended.map((e) => e.minRttMs)),
  };
}

function medianOf(values: number[]): number | null {
  if (values.length === 0) return null;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
