/**
 * Each proxy's part of a `mutp get` progress line: `edge-a 1.20 MB/s edge-b 850 kB/s edge-c
 * stalled`, from the client's own per-source counters. Two feeds:
 *
 * - per range (always): each finished range's sources (GetResult.sources) add to their totals;
 * - live (when the client's progress carries them: DownloadProgress.sourceCounters, coded modes
 *   and http mode alike): the bytes each source sent in the range under way, read at most as
 *   often as the line is drawn.
 *
 * With live counters a proxy's rate is measured over the last few seconds, and one that sent
 * nothing for that long while still counted as a source is `stalled`; a source the receiver
 * gave up on is `lost`. With range results only (a client whose progress has no counters), the
 * rate is that of the last range, and nothing is called stalled (a long range would look like a
 * stall between its ends).
 */
import { formatRate, printable } from './format';

/** One source's counters as the client keeps them. */
export interface SourceCounter {
  proxyId: string;
  name: string;
  /** Bytes received from it (in the range under way for live counters, in the range for results). */
  bytes: number;
  /** The receiver's view: 'connecting' | 'active' | 'failed' | 'dropped' (absent for http). */
  state?: string;
}

/** The rate is measured over this much of the recent past. */
export const RATE_WINDOW_MS = 3000;
/** Longest name shown (the line must stay on one row). */
const MAX_NAME = 12;

interface ProxyState {
  name: string;
  /** Bytes of finished ranges. */
  settled: number;
  /** Bytes of the range under way (live counters). */
  live: number;
  state?: string;
  /** Bytes per second of the last finished range (range results only). */
  lastRangeBps?: number;
}

export class ProxyRates {
  private readonly proxies = new Map<string, ProxyState>();
  private readonly samples: { at: number; totals: Map<string, number> }[] = [];
  private liveSeen = false;
  private rangeStartedAt: number;

  constructor(startedAt: number) {
    this.rangeStartedAt = startedAt;
  }

  /** The live counters of the range under way. */
  live(counters: readonly SourceCounter[]): void {
    this.liveSeen = true;
    for (const c of counters) {
      const p = this.proxyOf(c);
      p.live = c.bytes;
      if (c.state !== undefined) p.state = c.state;
    }
  }

  /** A range finished with these sources; proxies that took no part in it are no longer shown. */
  rangeDone(sources: readonly SourceCounter[], now: number): void {
    const elapsedS = Math.max(now - this.rangeStartedAt, 1) / 1000;
    this.rangeStartedAt = now;
    const serving = new Set(sources.map((s) => s.proxyId));
    for (const id of [...this.proxies.keys()]) if (!serving.has(id)) this.proxies.delete(id);
    for (const s of sources) {
      const p = this.proxyOf(s);
      p.settled += s.bytes;
      p.live = 0;
      p.state = s.state;
      p.lastRangeBps = s.bytes / elapsedS;
    }
  }

  /** `name rate` per proxy, or undefined before any proxy is known. Takes a sample at `now`. */
  describe(now: number): string | undefined {
    if (this.proxies.size === 0) return undefined;
    const totals = new Map<string, number>();
    for (const [id, p] of this.proxies) totals.set(id, p.settled + p.live);
    this.samples.push({ at: now, totals });
    while (this.samples.length > 2 && now - this.samples[1].at >= RATE_WINDOW_MS) this.samples.shift();
    const first = this.samples[0];
    const spanMs = now - first.at;
    const parts: string[] = [];
    for (const [id, p] of this.proxies) {
      const safe = printable(p.name);
      const name = safe.length > MAX_NAME ? `${safe.slice(0, MAX_NAME - 1)}~` : safe;
      parts.push(`${name} ${this.stateOf(id, p, totals.get(id)!, first.totals.get(id), spanMs)}`);
    }
    return parts.join(' ');
  }

  private stateOf(id: string, p: ProxyState, total: number, before: number | undefined, spanMs: number): string {
    if (p.state === 'failed' || p.state === 'dropped') return 'lost';
    if (!this.liveSeen) return p.lastRangeBps !== undefined ? formatRate(p.lastRangeBps) : 'waiting';
    // A proxy seen again after a range without it starts from 0: no rate until it has a past.
    if (before === undefined || before > total || spanMs <= 0) return p.state === 'connecting' ? 'connecting' : '-';
    const bps = ((total - before) / spanMs) * 1000;
    if (bps === 0 && spanMs >= RATE_WINDOW_MS) return p.state === 'connecting' ? 'connecting' : 'stalled';
    return formatRate(bps);
  }

  private proxyOf(c: SourceCounter): ProxyState {
    let p = this.proxies.get(c.proxyId);
    if (!p) {
      p = { name: c.name, settled: 0, live: 0 };
      this.proxies.set(c.proxyId, p);
    }
    return p;
  }
}
