/**
 * When origo could not be reached, it is left alone for a while: each failed connection attempt
 * (timed out, refused, closed before the welcome) marks it down for a back-off period that
 * doubles from `firstMs` up to `maxMs`, and a welcome resets it. While down, callers go elsewhere
 * at once (the extension: to the network) instead of each waiting out a timeout, and since an
 * attempt is only made when origo is not down, there is at most one attempt per period.
 */
import { Clock } from './host';

export interface BackoffPolicy {
  /** The first period after a failure. */
  firstMs: number;
  /** The longest period, however many failures in a row. */
  maxMs: number;
}

/** The extension's policy: 2 s, 4 s, 8 s, ... 60 s. */
export const DEFAULT_ORIGO_BACKOFF: BackoffPolicy = { firstMs: 2000, maxMs: 60_000 };

export interface OrigoDown {
  /** Time left before origo is tried again. */
  remainingMs: number;
  /** The whole period of this back-off. */
  periodMs: number;
  /** Why the last attempt failed. */
  cause: string;
  /** Failed attempts in a row. */
  failures: number;
}

export class OrigoBackoff {
  private failures = 0;
  private downUntil = -Infinity;
  private periodMs = 0;
  private cause = '';

  constructor(
    private readonly policy: BackoffPolicy,
    private readonly clock: Pick<Clock, 'now'>,
  ) {}

  /** Undefined when origo may be tried now. */
  down(): OrigoDown | undefined {
    const remainingMs = this.downUntil - this.clock.now();
    if (remainingMs <= 0) return undefined;
    return { remainingMs, periodMs: this.periodMs, cause: this.cause, failures: this.failures };
  }

  /** An attempt failed: down for the next period (twice the last one, within the policy). */
  failed(cause: string): void {
    const first = Math.max(0, this.policy.firstMs);
    this.periodMs = Math.min(Math.max(first, this.policy.maxMs), first * 2 ** Math.min(this.failures, 30));
    this.failures++;
    this.cause = cause;
    this.downUntil = this.clock.now() + this.periodMs;
  }

  /** origo welcomed the client: the next failure starts from the first period again. */
  succeeded(): void {
    this.failures = 0;
    this.periodMs = 0;
    this.cause = '';
    this.downUntil = -Infinity;
  }
}

/** How a back-off is shown: `origo-down (back-off 8 s): <cause>`. */
export function describeDown(down: OrigoDown): string {
  const seconds = Math.round(down.periodMs / 100) / 10;
  return `origo-down (back-off ${seconds} s, ${Math.ceil(down.remainingMs / 100) / 10} s left): ${down.cause}`;
}
