/**
 * One timer for every sender of the proxy that waits for upload tokens. Each client peer's
 * TransferHost used to arm a timer of its own whenever the token bucket ran dry: with many
 * clients that was one timer (one wake-up of the event loop) per client and per packet or two.
 * Here the hosts that wait are resumed together when the bucket holds `quantumBytes` again; each
 * sends what the tokens allow (every packet due) and asks to wait again when they run out.
 */
import { MAX_DATAGRAM_BYTES } from '@mutp/shared';
import { TokenBucket } from './token-bucket';

/** The timer a Pacer uses (real timers by default; tests pass their own). */
export interface PacerTimers {
  set(fire: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: PacerTimers = {
  set: (fire, ms) => setTimeout(fire, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Tokens a wait waits for: one datagram by default (packets leave spaced at the rate, as on a
 * capped link); a `quantumMs` of tokens at the rate when given, within [one datagram, burst].
 */
export function pacingQuantumBytes(bucket: TokenBucket, quantumMs = 0): number {
  const bytes = Math.ceil((bucket.rateBps * quantumMs) / 1000);
  return Math.max(MAX_DATAGRAM_BYTES, Math.min(bucket.burstBytes, bytes));
}

export class Pacer {
  /** Who waits, in the order they asked; each resumed once per wait however often it asked. */
  private readonly waiting = new Set<() => void>();
  private timer?: unknown;
  /** Where the next round of resumes starts (round robin: no host always gets the tokens first). */
  private rotation = 0;

  constructor(
    private readonly bucket: TokenBucket,
    readonly quantumBytes = pacingQuantumBytes(bucket),
    private readonly timers: PacerTimers = realTimers,
  ) {}

  /** Calls `resume` once the bucket holds quantumBytes tokens (at the next whole millisecond or later). */
  wait(resume: () => void, now: number): void {
    this.waiting.add(resume);
    if (this.timer !== undefined) return;
    const ms = this.bucket.timeUntil(this.quantumBytes, now);
    this.timer = this.timers.set(() => this.fire(), Math.max(1, Math.ceil(ms)));
  }

  /** Forgets a waiting `resume` (its host closed); the timer goes when nobody waits. */
  cancel(resume: () => void): void {
    this.waiting.delete(resume);
    if (this.waiting.size > 0 || this.timer === undefined) return;
    this.timers.clear(this.timer);
    this.timer = undefined;
  }

  /** Whether `resume` waits for the timer (its host is out of tokens until then). */
  isWaiting(resume: () => void): boolean {
    return this.waiting.has(resume);
  }

  /** Hosts waiting now (tests, metrics). */
  get size(): number {
    return this.waiting.size;
  }

  private fire(): void {
    this.timer = undefined;
    const due = [...this.waiting];
    this.waiting.clear();
    if (due.length === 0) return;
    const start = this.rotation++ % due.length;
    // A resume that finds the bucket dry again calls wait() and is resumed next time. One that
    // throws does not keep the others waiting; the first error goes on as the timer's.
    let failure: { error: unknown } | undefined;
    for (let k = 0; k < due.length; k++) {
      try {
        due[(start + k) % due.length]();
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure) throw failure.error;
  }
}
