/**
 * How many upcoming segments to have staged at the edge, decided reactively from measured values
 * (SoftStage, seed 000 §III-D): staging one more segment takes a round trip to the edge plus the
 * origin-to-edge latency, and fetching the N already staged takes N times the edge-to-client
 * fetch time; while that is shorter, one more must be staged now. So the client keeps
 *
 *   N = ceil((RTT_edge + L_stage) / L_fetch)   (at least 1, at most maxAhead)
 *
 * segments staged ahead of what it has fetched, and stages exactly one ahead until both
 * latencies are measured: never blindly far ahead.
 *
 * Sans-IO: the caller feeds events (the playlist, fetches, stage answers) with the time and asks
 * `decide(now)` which segments to order; sending the STAGE hints is its job.
 */
import { ChunkProfile, newProfile, SegmentRef, segmentKey } from './chunk-profile';
import { Samples } from './samples';

export interface StagingConfig {
  /** Never more than this many unfetched segments staged or ordered ahead. */
  maxAhead: number;
  /** Latency estimates are medians of the last this-many samples. */
  samples: number;
  /** An order nobody answered within this long may go out again ... */
  stageTimeoutMs: number;
  /** ... at most this many orders per segment in all. */
  maxOrders: number;
}

export const DEFAULT_STAGING_CONFIG: StagingConfig = {
  maxAhead: 4,
  samples: 5,
  stageTimeoutMs: 10_000,
  maxOrders: 2,
};

export interface StagingStats {
  ordersSent: number;
  /** Segments staged or ordered that left the playlist unfetched (a seek, a stream switch). */
  wasted: number;
  fetchMs: number | null;
  stagingLatencyMs: number | null;
  edgeRttMs: number | null;
  neededAhead: number;
}

export class StagingManager {
  private readonly config: StagingConfig;
  /** The playlist from the playing position on, in play order. */
  private upcoming: ChunkProfile[] = [];
  private readonly byKey = new Map<string, ChunkProfile>();
  private readonly fetchTimes: Samples;
  private readonly stagingLatencies: Samples;
  private readonly edgeRtts: Samples;
  private ordersSent = 0;
  private wasted = 0;

  constructor(config: Partial<StagingConfig> = {}) {
    this.config = { ...DEFAULT_STAGING_CONFIG, ...config };
    if (!(this.config.maxAhead >= 1)) throw new RangeError(`maxAhead must be at least 1, got ${this.config.maxAhead}`);
    this.fetchTimes = new Samples(this.config.samples);
    this.stagingLatencies = new Samples(this.config.samples);
    this.edgeRtts = new Samples(this.config.samples);
  }

  /**
   * The upcoming segments from the playing position on (again after a seek, a stream switch or a
   * playlist refresh). Segments still listed keep what is known of them; those that left the list
   * staged or ordered but never asked for are counted as wasted (one whose download started and
   * was abandoned, as a player does on a seek, was asked for: its staging was not for nothing).
   */
  setUpcoming(segments: readonly SegmentRef[]): void {
    const next: ChunkProfile[] = [];
    const keys = new Set<string>();
    for (const s of segments) {
      const key = segmentKey(s);
      if (keys.has(key)) continue;
      keys.add(key);
      next.push(this.byKey.get(key) ?? newProfile(s));
    }
    for (const [key, p] of this.byKey) {
      if (keys.has(key)) continue;
      if (p.fetchStartedAt === undefined && p.staging !== 'none') this.wasted++;
      this.byKey.delete(key);
    }
    for (const p of next) this.byKey.set(p.key, p);
    this.upcoming = next;
  }

  /** A round trip to the edge proxies, as the caller measured it (its proxy links). */
  observeEdgeRtt(ms: number): void {
    this.edgeRtts.add(ms);
  }

  fetchStarted(s: SegmentRef, now: number): void {
    const p = this.byKey.get(segmentKey(s));
    if (p && p.fetchStartedAt === undefined) p.fetchStartedAt = now;
  }

  /** Fetched in full. Only fetches of staged segments measure the edge-to-client time. */
  fetchCompleted(s: SegmentRef, now: number): void {
    const p = this.byKey.get(segmentKey(s));
    if (!p || p.fetched) return;
    p.fetched = true;
    if (p.fetchStartedAt === undefined) return;
    p.fetchMs = now - p.fetchStartedAt;
    if (p.staging === 'ready') this.fetchTimes.add(p.fetchMs);
  }

  /** The caller sent a stage order for `s` (to the proxies it chose). */
  stageOrdered(s: SegmentRef, now: number): void {
    const p = this.byKey.get(segmentKey(s));
    if (!p) return;
    p.staging = p.staging === 'ready' ? 'ready' : 'pending';
    p.orderedAt = now;
    p.orders++;
    this.ordersSent++;
  }

  /**
   * A proxy answered "staged". `originLatencyMs` is what it reported its origin fetch took; the
   * rest of the order's round trip is a sample of the RTT to the edge.
   */
  staged(s: SegmentRef, proxyId: string, now: number, originLatencyMs?: number): void {
    const p = this.byKey.get(segmentKey(s));
    if (!p || p.orderedAt === undefined) return;
    if (!p.holders.includes(proxyId)) p.holders.push(proxyId);
    if (p.staging === 'ready') return;
    p.staging = 'ready';
    const roundTrip = now - p.orderedAt;
    p.stagingLatencyMs = originLatencyMs ?? roundTrip;
    this.stagingLatencies.add(p.stagingLatencyMs);
    if (originLatencyMs !== undefined) this.edgeRtts.add(roundTrip - originLatencyMs);
  }

  /** A proxy could not stage `s`: without another holder it is back to NONE (may be ordered again). */
  stageFailed(s: SegmentRef, proxyId: string): void {
    const p = this.byKey.get(segmentKey(s));
    if (!p) return;
    p.holders = p.holders.filter((h) => h !== proxyId);
    if (p.holders.length === 0) p.staging = 'none';
  }

  /** Segments to stage ahead: SoftStage's N, or 1 until fetch and staging times are measured. */
  neededAhead(): number {
    const fetchMs = this.fetchTimes.median;
    const stagingMs = this.stagingLatencies.median;
    if (fetchMs === null || stagingMs === null) return 1;
    const rttMs = this.edgeRtts.median ?? 0;
    const n = fetchMs > 0 ? Math.ceil((rttMs + stagingMs) / fetchMs) : this.config.maxAhead;
    return Math.min(this.config.maxAhead, Math.max(1, n));
  }

  /** The segments to order now, in play order (the caller then reports each with stageOrdered). */
  decide(now: number): SegmentRef[] {
    const needed = this.neededAhead();
    const orders: SegmentRef[] = [];
    let staged = 0;
    let ahead = 0;
    for (const p of this.upcoming) {
      // Being fetched already: its download fetches it from the origin if no proxy has it.
      if (p.fetched || p.fetchStartedAt !== undefined) continue;
      if (ahead++ >= this.config.maxAhead || staged >= needed) break;
      if (p.staging === 'ready' || (p.staging === 'pending' && !this.orderTimedOut(p, now))) {
        staged++;
        continue;
      }
      if (p.orders >= this.config.maxOrders) continue;
      orders.push(p.range ? { url: p.url, range: { ...p.range } } : { url: p.url });
      staged++;
    }
    return orders;
  }

  private orderTimedOut(p: ChunkProfile, now: number): boolean {
    return p.orderedAt !== undefined && now - p.orderedAt >= this.config.stageTimeoutMs;
  }

  /** The segment listed after `s`, if any. */
  after(s: SegmentRef): SegmentRef | undefined {
    const i = this.upcoming.findIndex((p) => p.key === segmentKey(s));
    const p = i < 0 ? undefined : this.upcoming[i + 1];
    if (p === undefined) return undefined;
    return p.range ? { url: p.url, range: { ...p.range } } : { url: p.url };
  }

  profile(s: SegmentRef): Readonly<ChunkProfile> | undefined {
    return this.byKey.get(segmentKey(s));
  }

  stats(): StagingStats {
    return {
      ordersSent: this.ordersSent,
      wasted: this.wasted,
      fetchMs: this.fetchTimes.median,
      stagingLatencyMs: this.stagingLatencies.median,
      edgeRttMs: this.edgeRtts.median,
      neededAhead: this.neededAhead(),
    };
  }
}
