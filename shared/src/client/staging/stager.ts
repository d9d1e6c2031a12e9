/**
 * Keeps upcoming segments staged at one proxy set (SoftStage) and changes that set only between
 * segments (chunk-aware handoff): what a PlaybackSession (../playback/session.ts) drives for
 * `mutp playlist`, bench:mobility and the extension's loader. The session downloads; this decides
 * and sends the hints.
 *
 * Segments belong to tracks (a player's video and audio renditions, named by their playlist):
 * each track has its own StagingManager, so two interleaved series do not count each other's
 * segments as skipped. At most `maxTracks` are followed; the least recently used is dropped, and
 * what it had staged but never fetched counts as wasted (a stream switch).
 *
 * Hints are sent in the background and never block a download: a segment whose staging has not
 * finished is fetched on demand (the proxy's cache joins its fetch under way, so the origin is
 * asked once either way).
 */
import type { ByteRange } from '../../range';
import type { ProxyInfo, StagedAnswer } from '../../signalling';
import type { DownloadMode, GetOptions, GetResult } from '../client';
import type { Clock } from '../host';
import { AskBackoff } from './ask-backoff';
import { Assignments } from './assignments';
import { SegmentRef, segmentKey } from './chunk-profile';
import { SlowProxies } from './slow-proxies';
import { SpreadConfig, SpreadRule } from './spread-rule';
import { StagingConfig, StagingManager, StagingStats } from './staging-manager';

/** What the spread rule reads of a finished download (GetResult has it): each source's measured rate. */
export interface DeliveredBy {
  sources: readonly { proxyId: string; rateBps?: number }[];
}

/** What staging needs of MutpClient. */
export interface StagingClient {
  chooseProxies(
    count: number,
    mode: DownloadMode,
    /** `awaitProxies` false: an empty offer right after origo's return is the answer (MutpClient.chooseProxies). */
    o?: Pick<GetOptions, 'signal' | 'exclude' | 'origoTimeoutMs'> & { awaitProxies?: boolean },
  ): Promise<ProxyInfo[]>;
  stage(
    url: string,
    proxies: readonly ProxyInfo[],
    o?: { range?: ByteRange; timeoutMs?: number; mode?: DownloadMode },
  ): Promise<StagedAnswer[]>;
  /** Proxies that said they are going away (they drain) or origo withdrew: replaced at the next segment boundary. */
  leavingProxies?(): readonly string[];
  /** Calls `listener` when a proxy says it is going away or origo withdraws one; returns the unsubscribe. */
  onProxyLeaving?(listener: (proxyId: string) => void): () => void;
  /**
   * True while origo is away (no session, one was had): downloads go on through the open links,
   * and a handoff, which needs origo's offers, waits for its return instead of for the request's
   * origo limit (which would hold the next segment back that long).
   */
  origoAway?(): boolean;
  /**
   * How many network changes the client has seen (MutpClient.networkChanges): after one, origo
   * is asked for the set again at the next segment boundary, since it offers proxies by the
   * client's address (locality) and the client may have moved to another region.
   */
  networkChanges?(): number;
}

export interface StagerOptions {
  mode: DownloadMode;
  proxies: number;
  /** Send hints (SoftStage); false: the set and its handoffs only, every segment fetched on demand. */
  staging: boolean;
  stagingConfig?: Partial<StagingConfig>;
  /** Tracks followed at once (default 4). */
  maxTracks?: number;
  /**
   * Proxies each segment is staged at and fetched from: a number, or 'auto' (the default) for
   * SpreadRule's choice from measured rates (the whole set until staging is seen to fall behind).
   */
  spread?: number | 'auto';
  spreadConfig?: Partial<SpreadConfig>;
}

export type StagerStats = StagingStats & {
  /** Proxies each new segment goes to now, and how often the rule moved that number. */
  spread: number | null;
  spreadMoves: number;
  hintsAnswered: number;
  hintsStaged: number;
  handoffs: number;
  /** Proxies replaced because they were degrading (slow-proxies.ts), not failing. */
  slowReplaced: number;
  /** Proxies replaced because they said they are going away (draining). */
  goingAwayReplaced: number;
  /** Proxies replaced because origo no longer offered them after a network change (locality). */
  relocatedReplaced: number;
};

/** How long a handoff waits for the newcomers to stage the next segment before switching to them. */
export const HANDOFF_STAGE_WAIT_MS = 5000;
/**
 * After origo had no replacement for a failing or degrading proxy, it is not asked again for
 * REPLACEMENT_BACKOFF_MS, doubling on each empty answer up to the maximum (ask-backoff.ts).
 */
export { MAX_REPLACEMENT_BACKOFF_MS, REPLACEMENT_BACKOFF_MS } from './ask-backoff';
const DEFAULT_TRACK = '';

export class SegmentStager {
  private set?: ProxyInfo[];
  private choosing?: Promise<ProxyInfo[]>;
  private readonly tracks = new Map<string, StagingManager>();
  private closed = false;
  private handoffs = 0;
  private slowReplaced = 0;
  private goingAwayReplaced = 0;
  private relocatedReplaced = 0;
  /** The client's network-change count the set was chosen (or last asked for again) under. */
  private networkSeen = 0;
  private readonly slow = new SlowProxies();
  private hintsAnswered = 0;
  private hintsStaged = 0;
  /** Orders and waste of dropped tracks (their managers are gone). */
  private droppedOrders = 0;
  private droppedWasted = 0;
  private lastTrack = DEFAULT_TRACK;
  /** When origo may be asked for a replacement again (it had none), and for a set after a move (no answer). */
  private readonly replacing = new AskBackoff();
  private readonly relocating = new AskBackoff();
  /** The proxies each upcoming segment was given to. */
  private readonly assigned = new Assignments();
  private spreadRule?: SpreadRule;
  private hintsInFlight = 0;
  /** A handoff begun while a segment downloads (proxyLeaving()); the next boundary waits for it. */
  private handingOff?: Promise<void>;
  /** The segment whose download started last, and its track. */
  private lastStarted?: { segment: SegmentRef; track: string };
  private readonly stopLeavingNotices?: () => void;

  constructor(
    private readonly client: StagingClient,
    private readonly clock: Clock,
    private readonly o: StagerOptions,
  ) {
    // A proxy going away while a segment downloads: its handoff begins at once (proxyLeaving).
    this.stopLeavingNotices = client.onProxyLeaving?.(() => void this.proxyLeaving().catch(() => undefined));
  }

  /** The set in use, if chosen. */
  current(): readonly ProxyInfo[] | undefined {
    return this.set;
  }

  /**
   * The proxy set, chosen through origo the first time (again after a failed choice), within
   * `origoTimeoutMs` when given (a caller with a deadline).
   */
  proxies(signal?: AbortSignal, origoTimeoutMs?: number): Promise<ProxyInfo[]> {
    if (this.set) return Promise.resolve(this.set);
    if (!this.choosing) {
      // Read before the choice: a change while origo answers is followed at the next boundary.
      const seen = this.client.networkChanges?.() ?? 0;
      const choosing = this.client.chooseProxies(this.o.proxies, this.o.mode, {
        ...(signal ? { signal } : {}),
        ...(origoTimeoutMs !== undefined ? { origoTimeoutMs } : {}),
      });
      this.choosing = choosing;
      choosing.then(
        (set) => {
          if (this.choosing !== choosing) return;
          this.set = set;
          this.networkSeen = seen;
          this.spreadRule ??= new SpreadRule(set.length, this.o.spreadConfig);
        },
        () => {
          if (this.choosing === choosing) this.choosing = undefined;
        },
      );
    }
    return this.choosing;
  }

  /** The segments of `track` from the playing position on (again after a seek or a playlist refresh). */
  setUpcoming(segments: readonly SegmentRef[], track = DEFAULT_TRACK): void {
    this.track(track).setUpcoming(segments);
  }

  /**
   * `s`'s download starts now: whether a proxy had staged it, and hints for what comes after it
   * go out (never for `s` itself: its download fetches it from the origin if no proxy has it).
   */
  fetchStarted(s: SegmentRef, track = DEFAULT_TRACK): boolean {
    const manager = this.track(track);
    const profile = manager.profile(s);
    const staged = profile?.staging === 'ready';
    const at = this.assigned.of(segmentKey(s));
    if (profile !== undefined && profile.orders > 0 && at !== undefined && this.autoSpread()) {
      this.spreadRule?.observeStart(at.length, !at.every((id) => profile.holders.includes(id)));
    }
    manager.fetchStarted(s, this.clock.now());
    this.lastStarted = { segment: s, track };
    this.stageAhead(track);
    return staged;
  }

  /**
   * `s` was fetched in full; its download's sources (a GetResult's) tell the spread rule what its
   * proxies delivered.
   */
  fetchCompleted(s: SegmentRef, track = DEFAULT_TRACK, result?: DeliveredBy): void {
    this.track(track).fetchCompleted(s, this.clock.now());
    const key = segmentKey(s);
    const at = this.assigned.of(key);
    if (result !== undefined && at !== undefined && this.autoSpread()) {
      const delivered = result.sources.reduce((sum, x) => sum + (at.includes(x.proxyId) ? (x.rateBps ?? 0) : 0), 0);
      this.spreadRule?.observeFetch(at.length, delivered);
      this.spreadRule?.decide();
    }
    this.assigned.forget(key);
  }

  private autoSpread(): boolean {
    return this.o.spread === undefined || this.o.spread === 'auto';
  }

  /** Proxies a segment not yet given to any goes to now (without staging, auto has nothing to measure: all). */
  private spread(set: readonly ProxyInfo[]): number {
    const rule = this.o.staging ? this.spreadRule?.current() : undefined;
    const wanted = typeof this.o.spread === 'number' ? this.o.spread : (rule ?? set.length);
    return Math.max(1, Math.min(wanted, set.length));
  }

  /**
   * What `s`'s download asks MutpClient for (GetOptions `use` and `proxies`): its sources, and
   * how many. Part of the set: just those; the whole set: `asked`, so origo fills what it lacks.
   */
  downloadOf(s: SegmentRef, asked: number): { use: ProxyInfo[]; proxies: number } {
    const use = this.sourcesFor(s);
    return { use, proxies: use.length < (this.set?.length ?? 0) ? use.length : asked };
  }

  /**
   * The proxies `s` is staged at and downloaded from: the whole set, or `spread` of it, the same
   * ones for its hint and its download, taken in turn so each proxy gets its share of segments.
   */
  sourcesFor(s: SegmentRef): ProxyInfo[] {
    const set = this.set ?? [];
    return this.assigned.assign(segmentKey(s), set, this.spread(set));
  }

  /**
   * Chunk-aware handoff, between two segments: proxies of the set that said they are going away
   * (draining: their transfers under way finish, new ones are refused), failed in the last
   * download (lost, excluded, replaced) or have been degrading (far below their share for
   * several segments: slow-proxies.ts) are replaced by others origo offers, and `next` is staged
   * at the newcomers before the switch (a segment is never moved in the middle; while it runs,
   * the Receiver shifts the work to its live sources). Without replacements the set stays as it
   * is. After a network change, origo is first asked for the whole set again (relocate()): the
   * proxies it no longer offers (the old region's) are replaced by its newcomers the same way.
   * Resolves once the set for `next` is settled.
   */
  async afterSegment(
    result: GetResult,
    next?: SegmentRef,
    track = DEFAULT_TRACK,
    signal?: AbortSignal,
    used?: readonly ProxyInfo[],
  ): Promise<void> {
    // A handoff begun during the segment (a proxy going away) completes first.
    await this.handingOff;
    const set = this.set;
    if (!set || this.closed || this.o.mode === 'http') return;
    // Only the proxies asked for this segment can have failed in it (`used`, when not the whole set).
    const asked = used === undefined ? set : set.filter((p) => used.some((u) => u.proxyId === p.proxyId));
    const goneIds = new Set(this.client.leavingProxies?.() ?? []);
    const goingAway = set.filter((p) => goneIds.has(p.proxyId));
    const failing = failedIn(result, asked).filter((p) => !goneIds.has(p.proxyId));
    const degrading = this.slow.judge(result, asked).filter((p) => !failing.includes(p) && !goneIds.has(p.proxyId));
    const why = { goingAway, failing, degrading };
    const moved = await this.relocate(set, signal);
    if (this.closed || this.set !== set) return;
    if (moved !== undefined && moved.fresh.length > 0) {
      // Origo's new choice already leaves out proxies going away and recently failed: those it
      // offered again stay (a failing one is replaced at a later boundary, as without a move).
      const { relocated } = moved;
      const leavers = { goingAway: goingAway.filter((p) => relocated.includes(p)), failing: [], degrading: [] };
      await this.switchTo(set, { ...leavers, relocated }, moved.fresh, next, track);
    } else {
      await this.handOff(set, why, next, track, signal);
    }
  }

  /**
   * After a network change: origo's choice of a whole set from the client's new address, as the
   * proxies of `set` it no longer offers (`relocated`: another region's, or ones it would not
   * choose now) and those it offers instead (`fresh`). Undefined without a change since the set
   * was chosen, or while origo is away or does not answer: asked again at a later boundary, after
   * the replacement back-off (none while origo is known to be away; a hung origo does not hold
   * every next segment for the origo limit). An empty offer counts as an answer (the set stays),
   * so a change costs origo one request.
   */
  private async relocate(
    set: readonly ProxyInfo[],
    signal: AbortSignal | undefined,
  ): Promise<{ relocated: ProxyInfo[]; fresh: ProxyInfo[] } | undefined> {
    const changes = this.client.networkChanges?.() ?? 0;
    const now = this.clock.now();
    if (changes === this.networkSeen || !this.relocating.mayAsk(now) || this.client.origoAway?.()) return undefined;
    let offered: ProxyInfo[];
    try {
      offered = await this.client.chooseProxies(set.length, this.o.mode, {
        ...(signal ? { signal } : {}),
        // Origo just back without its proxies: the set stays, the next segment is not held.
        awaitProxies: false,
      });
    } catch (e) {
      if ((e as { code?: unknown }).code === 'no-proxies') this.networkSeen = changes;
      else this.relocating.missed(this.clock.now());
      return undefined;
    }
    this.relocating.answered();
    this.networkSeen = changes;
    const offeredIds = new Set(offered.map((p) => p.proxyId));
    const held = new Set(set.map((p) => p.proxyId));
    return {
      relocated: set.filter((p) => !offeredIds.has(p.proxyId)),
      fresh: offered.filter((p) => !held.has(p.proxyId)),
    };
  }

  /**
   * A proxy of the set says it is going away (or origo withdrew it) while a segment downloads:
   * the handoff begins now, not at the segment's end. The download under way keeps its sources
   * (they were fixed when it started) and the leaver serves it to the end; origo is asked for a
   * replacement and `next` is staged there meanwhile, so the switch at the boundary (afterSegment
   * waits for this) does not wait for the newcomer's origin fetch. Called on the client's leaving
   * notices (StagingClient.onProxyLeaving); `next` and `track` default to the segment listed
   * after the one whose download started last.
   */
  proxyLeaving(next?: SegmentRef, track?: string, signal?: AbortSignal): Promise<void> {
    const last = this.lastStarted;
    track ??= last?.track ?? this.lastTrack;
    next ??= last && last.track === track ? this.tracks.get(track)?.after(last.segment) : undefined;
    const set = this.set;
    if (this.handingOff || !set || this.closed || this.o.mode === 'http') return this.handingOff ?? Promise.resolve();
    const goneIds = new Set(this.client.leavingProxies?.() ?? []);
    const goingAway = set.filter((p) => goneIds.has(p.proxyId));
    if (goingAway.length === 0) return Promise.resolve();
    const handoff = this.handOff(set, { goingAway, failing: [], degrading: [] }, next, track, signal).finally(() => {
      if (this.handingOff === handoff) this.handingOff = undefined;
    });
    this.handingOff = handoff;
    return handoff;
  }

  /**
   * Replaces `leaving` proxies of `set` with others origo offers (going away first, then failing,
   * then degrading, while newcomers last), staging `next` at the newcomers before the switch.
   */
  private async handOff(
    set: ProxyInfo[],
    why: { goingAway: ProxyInfo[]; failing: ProxyInfo[]; degrading: ProxyInfo[] },
    next: SegmentRef | undefined,
    track: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const { goingAway, degrading } = why;
    const leaving = [...goingAway, ...why.failing, ...degrading];
    if (leaving.length === 0 || !this.replacing.mayAsk(this.clock.now()) || this.client.origoAway?.()) return;
    let fresh: ProxyInfo[] = [];
    try {
      fresh = await this.client.chooseProxies(leaving.length, this.o.mode, {
        ...(signal ? { signal } : {}),
        exclude: set.map((p) => p.proxyId),
        // None to be had yet (origo just back): the set stays, the next segment is not held.
        awaitProxies: false,
      });
    } catch {
      // Origo out of reach: go on with the proxies left (MutpClient replaces dead ones itself).
    }
    if (this.closed) return;
    if (fresh.length === 0) this.replacing.missed(this.clock.now());
    else this.replacing.answered();
    // Without replacements the set stays whole: a proxy that failed once may serve the next
    // segment, and MutpClient replaces one it cannot reach for that download. (Shrinking the set
    // here left a player with fewer and fewer sources after transient failures.)
    await this.switchTo(set, { ...why, relocated: [] }, fresh, next, track);
  }

  /**
   * Switches from `set` to `fresh` in place of its leavers, staging `next` at the newcomers first.
   * Fewer newcomers than leavers: those going away go first (they take no new transfers), then
   * the failed ones, then those origo no longer offers after a move; degrading ones stay while
   * none replaces them.
   */
  private async switchTo(
    set: ProxyInfo[],
    why: { goingAway: ProxyInfo[]; failing: ProxyInfo[]; relocated: ProxyInfo[]; degrading: ProxyInfo[] },
    fresh: ProxyInfo[],
    next: SegmentRef | undefined,
    track: string,
  ): Promise<void> {
    const { goingAway, relocated, degrading } = why;
    const before = [...goingAway, ...why.failing];
    const moved = relocated.filter((p) => !before.includes(p));
    const leaving = [...before, ...moved, ...degrading.filter((p) => !relocated.includes(p))];
    if (this.set !== set || fresh.length === 0 || leaving.length === 0) return;
    this.handoffs++;
    const replaced = leaving.slice(0, fresh.length);
    fresh = fresh.slice(0, replaced.length);
    this.slowReplaced += replaced.filter((p) => degrading.includes(p) && !relocated.includes(p)).length;
    this.goingAwayReplaced += replaced.filter((p) => goingAway.includes(p)).length;
    this.relocatedReplaced += replaced.filter((p) => relocated.includes(p)).length;
    replaced.forEach((p) => this.slow.forget(p.proxyId));
    // Segments given to a leaver go to its newcomer instead.
    const successor = new Map(replaced.map((p, i) => [p.proxyId, fresh[i].proxyId]));
    this.assigned.handOver(successor);
    const nextIds = next === undefined ? undefined : this.assigned.of(segmentKey(next));
    const newcomersForNext = nextIds === undefined ? fresh : fresh.filter((p) => nextIds.includes(p.proxyId));
    if (this.o.staging && next !== undefined && newcomersForNext.length > 0) {
      const manager = this.track(track);
      manager.stageOrdered(next, this.clock.now());
      const answers = await this.client
        .stage(next.url, newcomersForNext, { ...this.hintOptions(next), timeoutMs: HANDOFF_STAGE_WAIT_MS })
        .catch(() => [] as StagedAnswer[]);
      this.record(manager, next, answers);
    }
    this.set = [...set.filter((p) => !replaced.includes(p)), ...fresh];
    this.spreadRule?.setSize(this.set.length);
  }

  /** No more hints or handoffs (the series ended, the page went away). */
  close(): void {
    this.closed = true;
    this.stopLeavingNotices?.();
  }

  stats(): StagerStats {
    let ordersSent = this.droppedOrders;
    let wasted = this.droppedWasted;
    for (const m of this.tracks.values()) {
      const s = m.stats();
      ordersSent += s.ordersSent;
      wasted += s.wasted;
    }
    const last = this.tracks.get(this.lastTrack)?.stats() ?? new StagingManager(this.o.stagingConfig).stats();
    return {
      ...last,
      spread: this.set ? this.spread(this.set) : null,
      spreadMoves: this.spreadRule?.moves ?? 0,
      ordersSent,
      wasted,
      hintsAnswered: this.hintsAnswered,
      hintsStaged: this.hintsStaged,
      handoffs: this.handoffs,
      slowReplaced: this.slowReplaced,
      goingAwayReplaced: this.goingAwayReplaced,
      relocatedReplaced: this.relocatedReplaced,
    };
  }

  private track(name: string): StagingManager {
    this.lastTrack = name;
    let manager = this.tracks.get(name);
    if (manager) {
      this.tracks.delete(name); // most recently used last
    } else {
      manager = new StagingManager(this.o.stagingConfig);
      while (this.tracks.size >= Math.max(1, this.o.maxTracks ?? 4)) {
        const [oldest, dropped] = this.tracks.entries().next().value as [string, StagingManager];
        dropped.setUpcoming([]); // its staged, unfetched segments become waste
        const s = dropped.stats();
        this.droppedOrders += s.ordersSent;
        this.droppedWasted += s.wasted;
        this.tracks.delete(oldest);
      }
    }
    this.tracks.set(name, manager);
    return manager;
  }

  /** Orders what the track's manager says is needed now; each answer may call for more. */
  private stageAhead(track: string): void {
    const set = this.set;
    if (!this.o.staging || this.closed || !set) return;
    const manager = this.tracks.get(track);
    if (!manager) return;
    const now = this.clock.now();
    for (const s of manager.decide(now)) {
      manager.stageOrdered(s, now);
      const at = this.sourcesFor(s);
      const inFlight = ++this.hintsInFlight;
      // A hint is only a hint: one that could not be sent leaves the segment to be fetched on demand.
      void this.client.stage(s.url, at, this.hintOptions(s)).then(
        (answers) => {
          this.hintsInFlight--;
          this.record(manager, s, answers);
          this.observeStaging(at, inFlight, answers);
          if (this.tracks.get(track) === manager) this.stageAhead(track);
        },
        () => {
          this.hintsInFlight--;
          at.forEach((p) => manager.stageFailed(s, p.proxyId));
        },
      );
    }
  }

  /** A hint staged at every proxy it went to: a sample of the rate staging goes at. */
  private observeStaging(at: readonly ProxyInfo[], inFlight: number, answers: readonly StagedAnswer[]): void {
    if (!this.autoSpread()) return;
    const staged = answers.filter((a) => a.status === 'staged');
    if (staged.length < at.length) return;
    const slowest = staged.reduce((a, b) => (b.originMs > a.originMs ? b : a));
    this.spreadRule?.observeStaging(at.length, inFlight, slowest.originMs, slowest.bytes);
  }

  /** What every hint for `s` carries: its range, and the mode (the proxies prepare its encoder). */
  private hintOptions(s: SegmentRef): { range?: ByteRange; mode: DownloadMode } {
    return { ...(s.range ? { range: s.range } : {}), mode: this.o.mode };
  }

  /** A hint's answers into the manager. */
  private record(manager: StagingManager, s: SegmentRef, answers: readonly StagedAnswer[]): void {
    const at = this.clock.now();
    for (const a of answers) {
      this.hintsAnswered++;
      if (a.status === 'staged') {
        this.hintsStaged++;
        manager.staged(s, a.proxyId, at, a.originMs);
      } else {
        manager.stageFailed(s, a.proxyId);
      }
    }
  }
}

/** Proxies of `set` that failed in a download: lost, excluded, or replaced by another. */
function failedIn(result: GetResult, set: readonly ProxyInfo[]): ProxyInfo[] {
  return set.filter((p) => {
    const source = result.sources.find((s) => s.proxyId === p.proxyId);
    if (source === undefined) return true;
    return 'state' in source && (source.state === 'failed' || source.state === 'dropped');
  });
}
