/**
 * Upload shaping: one token bucket per proxy, shared by every MUTP transfer and the HTTP
 * baseline, so the proxy's total upload stays at the configured rate (to emulate capped edges).
 * Tokens are bytes; they accrue at `rateBps` up to `burstBytes`. A rate of 0 means unlimited:
 * every call succeeds at once. Time is passed in (ms), so tests drive it with their own clock.
 */
import { MAX_DATAGRAM_BYTES } from '@mutp/shared';

export interface TokenBucketStats {
  rateBps: number;
  burstBytes: number;
  bytesTaken: number;
  /** take() calls refused for lack of tokens (the caller had to wait). */
  refusals: number;
  /** waitTime() answers above zero. */
  waits: number;
}

/** Burst in time at the rate: as much as a 1 ms timer that fires a few ms late has to catch up. */
const DEFAULT_BURST_MS = 4;
/** Never less than a few largest datagrams, so a send never waits for a bucket it cannot fill. */
const MIN_BURST_BYTES = 4 * MAX_DATAGRAM_BYTES;

/**
 * The default burst for a rate. Small on purpose: a capped edge link spaces packets at its rate,
 * and a large burst leaves back to back at the start and after every pause, which the client's
 * rate estimate (packet trains) reads as a much faster source.
 */
export function defaultBurstBytes(rateBps: number): number {
  return Math.max(MIN_BURST_BYTES, Math.ceil((rateBps * DEFAULT_BURST_MS) / 1000));
}

/** Rounding slack: a deficit this small counts as none (else waits could shrink below the clock's resolution). */
const EPSILON_BYTES = 1e-6;

export class TokenBucket {
  private tokens: number;
  private lastRefill: number;
  private readonly counters = { bytesTaken: 0, refusals: 0, waits: 0 };

  constructor(
    readonly rateBps: number,
    readonly burstBytes: number = defaultBurstBytes(rateBps),
    now: number = 0,
  ) {
    if (!(rateBps >= 0) || !Number.isFinite(rateBps)) throw new RangeError('rateBps must be a finite number >= 0');
    if (!(burstBytes > 0)) throw new RangeError('burstBytes must be > 0');
    this.tokens = burstBytes;
    this.lastRefill = now;
  }

  get unlimited(): boolean {
    return this.rateBps === 0;
  }

  private refill(now: number): void {
    if (now > this.lastRefill) {
      this.tokens = Math.min(this.burstBytes, this.tokens + ((now - this.lastRefill) * this.rateBps) / 1000);
      this.lastRefill = now;
    }
  }

  /** Takes `bytes` tokens if there are that many now; false (nothing taken) otherwise. */
  take(bytes: number, now: number): boolean {
    if (this.unlimited) {
      this.counters.bytesTaken += bytes;
      return true;
    }
    this.refill(now);
    if (this.tokens + EPSILON_BYTES < bytes) {
      this.counters.refusals++;
      return false;
    }
    this.tokens = Math.max(0, this.tokens - bytes);
    this.counters.bytesTaken += bytes;
    return true;
  }

  /**
   * Milliseconds until `bytes` tokens are available (0 = now). Requests above the burst size
   * are treated as the burst size: split larger writes, or they would wait forever.
   */
  waitTime(bytes: number, now: number): number {
    const ms = this.timeUntil(bytes, now);
    if (ms > 0) this.counters.waits++;
    return ms;
  }

  /** As waitTime, but not counted as a wait (a timer set for one that was counted already). */
  timeUntil(bytes: number, now: number): number {
    if (this.unlimited) return 0;
    this.refill(now);
    const need = Math.min(bytes, this.burstBytes) - this.tokens;
    if (need <= EPSILON_BYTES) return 0;
    return (need * 1000) / this.rateBps;
  }

  stats(): TokenBucketStats {
    return { rateBps: this.rateBps, burstBytes: this.burstBytes, ...this.counters };
  }
}
