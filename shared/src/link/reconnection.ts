/**
 * When a lost link tries again: at once, then backing off from `firstWaitMs` to `maxWaitMs`,
 * until `windowMs` after the loss (the longest disconnection a transfer survives: its stall
 * timeout). An attempt begun inside a disconnection backs off its own handshake retransmissions
 * and stays stuck long after the network is back, so attempts are short and repeated.
 */

export interface ReconnectionPolicy {
  /** Reconnect at all (off: a lost link is closed, its transfers lose the source). */
  enabled: boolean;
  windowMs: number;
  firstWaitMs: number;
  maxWaitMs: number;
}

export const DEFAULT_RECONNECTION_POLICY: ReconnectionPolicy = {
  enabled: true,
  windowMs: 15_000,
  firstWaitMs: 500,
  maxWaitMs: 2000,
};

export class ReconnectionSchedule {
  private wait: number;
  private readonly deadline: number;
  /** Attempts made so far (the next one's number is this plus one). */
  attempts = 0;

  constructor(
    private readonly policy: ReconnectionPolicy,
    readonly lostAt: number,
    readonly reason: string,
  ) {
    this.wait = policy.firstWaitMs;
    this.deadline = lostAt + policy.windowMs;
  }

  /**
   * After a failed attempt at `now`: when to try next, or undefined when the window is spent.
   * `retryInMs` (the caller knows better, e.g. origo not reachable yet) neither grows the back-off
   * nor extends the window.
   */
  next(now: number, retryInMs?: number): number | undefined {
    const wait = retryInMs ?? this.wait;
    if (now + wait >= this.deadline) return undefined;
    if (retryInMs === undefined) this.wait = Math.min(2 * this.wait, this.policy.maxWaitMs);
    return now + wait;
  }

  /** Time left for an attempt started at `now`. */
  remaining(now: number): number {
    return Math.max(0, this.deadline - now);
  }
}
