/**
 * Where a new transfer's sending starts (Sender `warmStart`): from the path estimate of the
 * previous transfer on the same connection when it ended recently (players ask for a segment
 * every few seconds), else at the source's known upload capacity, else nowhere (the Sender's
 * cautious initial window).
 */
import { PathEstimate } from '../sender/sender';

export class WarmStart {
  /** The last ended transfer's path estimate (warm start for the next one). */
  private lastPath?: { estimate: PathEstimate; at: number };

  constructor(
    /** How long a path estimate stays good for the next transfer (EndpointLimits.pathMemoryMs). */
    private readonly pathMemoryMs: number,
    /** The source's own upload capacity in bytes/s, if known. */
    private readonly uploadCapBps: number | undefined,
    /** The Sender's initial RTT guess, ms. */
    private readonly initialRttMs: number,
  ) {}

  remember(estimate: PathEstimate, now: number): void {
    this.lastPath = { estimate, at: now };
  }

  /** The previous transfer's estimate, if it ended recently enough. */
  recentPath(now: number): PathEstimate | undefined {
    const p = this.lastPath;
    return p && now - p.at <= this.pathMemoryMs ? p.estimate : undefined;
  }

  /** A first estimate from the known capacity; the RTT is the sender's initial guess until measured. */
  capStart(): PathEstimate | undefined {
    const cap = this.uploadCapBps;
    if (cap === undefined || !(cap > 0)) return undefined;
    return { rateBps: cap, minRttMs: this.initialRttMs };
  }
}
