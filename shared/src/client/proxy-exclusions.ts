/**
 * The proxies a client does not ask origo for, each for its own while: those it could not reach,
 * those that polluted a download, and those leaving (going away by their own word, or withdrawn
 * by origo). Whoever follows a segment series is told when a proxy starts leaving.
 */
import { WithdrawReason } from '..';
import { Clock } from './host';

/** A proxy that could not be reached is not asked for again for this long. */
const FAILED_PROXY_EXCLUSION_MS = 60_000;
/** A proxy that polluted a download is not asked for again by this client for an hour. */
const POLLUTER_EXCLUSION_MS = 60 * 60_000;
/**
 * A proxy origo withdrew (`withdrawn`: draining, reported, revoked) is kept out of this client's
 * downloads this long; origo itself no longer offers it. At most this many are remembered.
 */
const WITHDRAWN_EXCLUSION_MS = 10 * 60_000;
const MAX_WITHDRAWN = 256;

export class ProxyExclusions {
  /** Proxies that failed to connect, by when; excluded when asking origo for a while. */
  private readonly failedAt = new Map<string, number>();
  /** Of those, the ones given their second chance since (secondChances()): not given another. */
  private readonly retried = new Set<string>();
  /** Proxies a download excluded as polluters, by when; not asked for again for a long while. */
  private readonly pollutedAt = new Map<string, number>();
  /** Proxies origo withdrew, by when (insertion order: the oldest is forgotten first). */
  private readonly withdrawnAt = new Map<string, number>();
  private readonly leavingListeners = new Set<(proxyId: string) => void>();

  constructor(
    private readonly clock: Clock,
    /** The proxies whose live link said they are going away (ERROR GoingAway). */
    private readonly goingAway: () => string[],
    private readonly trace?: (line: string) => void,
  ) {}

  /** Proxies not to ask origo for now: recently failed, polluting, or going away. */
  avoided(): string[] {
    const now = this.clock.now();
    for (const [id, at] of this.failedAt) {
      if (at >= now - FAILED_PROXY_EXCLUSION_MS) continue;
      this.failedAt.delete(id);
      this.retried.delete(id);
    }
    for (const [id, at] of this.pollutedAt) if (at < now - POLLUTER_EXCLUSION_MS) this.pollutedAt.delete(id);
    return [...this.failedAt.keys(), ...this.pollutedAt.keys(), ...this.leaving()];
  }

  /**
   * Proxies that failed once and may be asked for again now, each once per failure, because a
   * download has fewer links than it asked for: one failed handshake under load (a loopback
   * WebRTC start on a busy machine) would otherwise cost every download of the next minute that
   * source. Taken: a second failure excludes them for the whole period. `failedNow` (in the
   * download asking) are not earlier failures: neither given nor taken.
   */
  secondChances(failedNow: readonly string[]): string[] {
    this.avoided();
    const notThese = new Set([...failedNow, ...this.pollutedAt.keys(), ...this.leaving()]);
    const given = [...this.failedAt.keys()].filter((id) => !this.retried.has(id) && !notThese.has(id));
    for (const id of given) this.retried.add(id);
    return given;
  }

  /**
   * Proxies that said they are going away (ERROR GoingAway: they drain) or that origo withdrew
   * (`withdrawn`). Their transfers under way go on; new downloads skip them, and a segment series
   * replaces them between two segments.
   */
  leaving(): string[] {
    const now = this.clock.now();
    for (const [id, at] of this.withdrawnAt) if (at < now - WITHDRAWN_EXCLUSION_MS) this.withdrawnAt.delete(id);
    return [...new Set([...this.goingAway(), ...this.withdrawnAt.keys()])];
  }

  /** `proxyId` could not be reached now. */
  failed(proxyId: string): void {
    this.failedAt.set(proxyId, this.clock.now());
  }

  /** After a network change: proxies that failed on the old network may be tried again. */
  forgetFailures(): void {
    this.failedAt.clear();
    this.retried.clear();
  }

  /** Whether a download has already excluded `proxyId` as a polluter (and it was reported then). */
  isPolluter(proxyId: string): boolean {
    return this.pollutedAt.has(proxyId);
  }

  /** A download excluded `proxyId` as a polluter now. */
  polluted(proxyId: string): void {
    this.pollutedAt.set(proxyId, this.clock.now());
  }

  withdrawn(proxyId: string, reason: WithdrawReason): void {
    this.trace?.(`origo withdrew proxy ${proxyId} (${reason}): no new downloads from it`);
    this.withdrawnAt.delete(proxyId);
    this.withdrawnAt.set(proxyId, this.clock.now());
    if (this.withdrawnAt.size > MAX_WITHDRAWN) this.withdrawnAt.delete(this.withdrawnAt.keys().next().value!);
    this.announceLeaving(proxyId);
  }

  /**
   * Calls `listener` with each proxy that says it is going away or that origo withdraws, when it
   * does (a segment series begins its handoff then, while the segment under way finishes).
   * Returns the unsubscribe function.
   */
  onLeaving(listener: (proxyId: string) => void): () => void {
    this.leavingListeners.add(listener);
    return () => this.leavingListeners.delete(listener);
  }

  announceLeaving(proxyId: string): void {
    for (const listener of [...this.leavingListeners]) listener(proxyId);
  }
}
