/**
 * The rate the client reports to each source, held to what the client actually handles while its
 * host drops received messages unread (docs/protocol.md §9.2, "Receive drops").
 *
 * A host whose thread falls behind its transport (node-rtc's per-turn receive budget) drops what
 * it cannot take before the receiver sees it. Those drops are invisible here except as losses,
 * and the sources rightly ignore loss. Worse, the messages it does hand on are read back to back
 * from a backlog, so their trains span the thread's speed, not the path's, and the train
 * estimate (rate-estimator.ts) reads several times what the client takes in: the sources' in-flight
 * limits grow, the backlog grows, and most of what they send is dropped. So while the host's drop
 * count grows, each source is told the rate at which this receiver handled its data over the last
 * `windowMs`, never more than its estimate; the sources' windows shrink to it and the thread keeps
 * up. After `holdMs` without a new drop the cap loosens, doubling every `holdMs`, so a client that
 * got faster (a load that passed) gets back to its estimate within a few holds.
 *
 * Without a drop count (the simulator, the browser) or while it stands still, the estimate is
 * reported unchanged.
 */

/** Buckets of the handled-rate window: coarse enough to be cheap, fine enough to slide smoothly. */
const BUCKETS = 10;
/**
 * Never report less than this (bytes/s, about 44 datagrams of 1138 bytes a second): a source told
 * 0 keeps its last rate (path-state.ts), and one whose data the host dropped entirely still needs
 * a window to be measured again.
 */
export const MIN_CAPPED_RATE_BPS = 50_000;
/** The cap is lifted once it has doubled this many times since the last drop. */
const MAX_DOUBLINGS = 6;

export interface HandledRateConfig {
  /** The handled rate is measured over this much of the recent past. */
  windowMs: number;
  /** After a drop the cap stays at the handled rate this long, then doubles every as long. */
  holdMs: number;
}

/** One source's handled bytes over a sliding window of BUCKETS buckets. */
class HandledMeter {
  private readonly buckets = new Float64Array(BUCKETS);
  /** The bucket number (time / bucketMs) the newest bucket holds; -1 before any data. */
  private newest = -1;
  private firstAt = 0;

  constructor(private readonly bucketMs: number) {}

  add(bytes: number, now: number): void {
    if (this.newest < 0) this.firstAt = now;
    this.advance(now);
    this.buckets[this.newest % BUCKETS] += bytes;
  }

  /** Bytes per second over the window (or since the first data, when that is shorter); 0 before any. */
  rate(now: number): number {
    if (this.newest < 0) return 0;
    this.advance(now);
    let sum = 0;
    for (let i = 0; i < BUCKETS; i++) sum += this.buckets[i];
    const spanMs = Math.min(BUCKETS * this.bucketMs, Math.max(this.bucketMs, now - this.firstAt));
    return (sum * 1000) / spanMs;
  }

  private advance(now: number): void {
    const bucket = Math.max(0, Math.floor(now / this.bucketMs));
    if (this.newest < 0) {
      this.newest = bucket;
      return;
    }
    if (bucket <= this.newest) return; // the clock never runs back; a stale `now` adds to the newest
    const stale = Math.min(BUCKETS, bucket - this.newest);
    for (let i = 1; i <= stale; i++) this.buckets[(this.newest + i) % BUCKETS] = 0;
    this.newest = bucket;
  }
}

export class HandledRates {
  private readonly meters: HandledMeter[];
  private dropsSeen = 0;
  private lastDropAt = -Infinity;

  /**
   * `receiveDrops`: the host's count of received messages it dropped unread so far (monotonic;
   * absent: the host never drops, and rates pass unchanged).
   */
  constructor(
    sourceCount: number,
    private readonly config: HandledRateConfig,
    private readonly receiveDrops?: () => number,
  ) {
    const bucketMs = Math.max(1, config.windowMs / BUCKETS);
    this.meters = Array.from({ length: sourceCount }, () => new HandledMeter(bucketMs));
    this.dropsSeen = receiveDrops?.() ?? 0;
  }

  /** A data message of source `index` (`bytes` on the wire) reached the receiver at `now`. */
  onData(index: number, bytes: number, now: number): void {
    if (this.receiveDrops) this.meters[index]?.add(bytes, now);
  }

  /** The rate to report to source `index`, given its train `estimate` (bytes/s). */
  reportedRate(index: number, estimate: number, now: number): number {
    if (!this.receiveDrops || estimate <= 0) return estimate;
    const drops = this.receiveDrops();
    if (drops > this.dropsSeen) {
      this.dropsSeen = drops;
      this.lastDropAt = now;
    }
    const sinceDrop = now - this.lastDropAt;
    if (!(sinceDrop < this.config.holdMs * (MAX_DOUBLINGS + 1))) return estimate;
    const doublings = Math.max(0, Math.floor(sinceDrop / this.config.holdMs));
    const cap = Math.max(MIN_CAPPED_RATE_BPS, this.meters[index].rate(now)) * 2 ** doublings;
    return Math.min(estimate, cap);
  }
}
