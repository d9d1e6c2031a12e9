/**
 * Downloads a series of segments in play order through one proxy set, staging upcoming ones at
 * those proxies as the StagingManager decides (SoftStage): the loop `mutp playlist` and
 * bench:mobility run, and what a player's loader does segment by segment.
 *
 * The proxy set is chosen once, so a segment is fetched from the proxies it was staged at;
 * MutpClient replaces a proxy that cannot be reached. Hints are sent in the background and never
 * block a download: a segment whose staging has not finished is fetched on demand (the proxy's
 * cache joins its fetch under way, so the origin is asked once either way).
 */
import type { ByteRange } from '../../range';
import type { StagedAnswer } from '../../signalling';
import type { DownloadMode, GetOptions, GetResult } from '../client';
import type { Clock } from '../host';
import type { ProxyInfo } from '../../signalling';
import type { SegmentRef } from './chunk-profile';
import { StagingConfig, StagingManager, StagingStats } from './staging-manager';

/** What the series needs of MutpClient. */
export interface SeriesClient {
  chooseProxies(count: number, mode: DownloadMode, o?: Pick<GetOptions, 'signal' | 'exclude'>): Promise<ProxyInfo[]>;
  stage(
    url: string,
    proxies: readonly ProxyInfo[],
    o?: { range?: ByteRange; timeoutMs?: number },
  ): Promise<StagedAnswer[]>;
  get(url: string, o: GetOptions): Promise<GetResult>;
}

export interface SeriesOptions {
  mode: DownloadMode;
  proxies: number;
  /** Stage upcoming segments (SoftStage); false: every segment is fetched on demand. */
  staging: boolean;
  stagingConfig?: Partial<StagingConfig>;
  signal?: AbortSignal;
  /**
   * Tries per segment (default 1): a segment whose download failed (stalled past the client's
   * stall timeout, every proxy lost) is asked for again, as a player retries a segment.
   */
  attempts?: number;
  /** A download of one segment taking longer than this is given up (and tried again if attempts remain). */
  attemptTimeoutMs?: number;
  /** Progress of segment `index`'s download (GetOptions.onProgress). */
  onProgress?: (index: number, progress: { dof: number; totalDof: number; bytes: number }) => void;
  /** Segment `index`'s download (attempt) starts now. */
  onStart?: (index: number) => void;
  /** A download of segment `index` failed and is tried again (-1: choosing the proxies failed). */
  onRetry?: (error: unknown, index: number) => void;
  /** Called after each segment, in order (the object included; the series does not keep it). */
  onSegment?: (outcome: SegmentOutcome, object: Uint8Array, index: number) => void;
}

export interface SegmentOutcome {
  url: string;
  range?: ByteRange;
  bytes: number;
  /** When its download started, ms after the series started. */
  startMs: number;
  durationMs: number;
  /** A proxy had answered "staged" for it when its download started. */
  staged: boolean;
  sources: string[];
  /** Failed downloads of it before the one that succeeded. */
  retries: number;
  /** Bytes of it the failed downloads had decoded (lost: the next try starts again). */
  lostBytes: number;
}

export interface SeriesResult {
  segments: SegmentOutcome[];
  totalMs: number;
  /** The proxies of the series at its end (the chosen set, changed by handoffs). */
  proxies: ProxyInfo[];
  /** Times the proxy set changed between two segments (chunk-aware handoff). */
  handoffs: number;
  staging: StagingStats & { hintsAnswered: number; hintsStaged: number };
}

export async function downloadSeries(
  client: SeriesClient,
  clock: Clock,
  segments: readonly SegmentRef[],
  o: SeriesOptions,
): Promise<SeriesResult> {
  const started = clock.now();
  const manager = new StagingManager(o.stagingConfig);
  manager.setUpcoming(segments);
  let proxies: ProxyInfo[] | undefined;
  for (let attempt = 1; proxies === undefined; attempt++) {
    try {
      proxies = await client.chooseProxies(o.proxies, o.mode, { signal: o.signal });
    } catch (e) {
      // Origo out of reach (a disconnection): asked again, as a segment would be.
      if (o.signal?.aborted || attempt >= (o.attempts ?? 1)) throw e;
      o.onRetry?.(e, -1);
    }
  }
  let set: ProxyInfo[] = proxies;
  let handoffs = 0;
  let hintsAnswered = 0;
  let hintsStaged = 0;
  let done = false;

  /** A hint's answers into the manager. */
  const record = (s: SegmentRef, answers: readonly StagedAnswer[]) => {
    const at = clock.now();
    for (const a of answers) {
      hintsAnswered++;
      if (a.status === 'staged') {
        hintsStaged++;
        manager.staged(s, a.proxyId, at, a.originMs);
      } else {
        manager.stageFailed(s, a.proxyId);
      }
    }
  };

  /**
   * Chunk-aware handoff, between two segments: proxies of the set that failed in the last one are
   * replaced by others origo offers, and the next segment is staged at the newcomers before the
   * switch (a segment is never moved in the middle; while it runs, the Receiver shifts the work
   * to its live sources). Without replacements the set goes on without them.
   */
  const handoff = async (failing: readonly ProxyInfo[], upcoming: SegmentRef): Promise<ProxyInfo[]> => {
    const keep = set.filter((p) => !failing.includes(p));
    let fresh: ProxyInfo[] = [];
    try {
      fresh = await client.chooseProxies(failing.length, o.mode, {
        signal: o.signal,
        exclude: set.map((p) => p.proxyId),
      });
    } catch {
      // Origo out of reach: go on with the proxies left (MutpClient replaces dead ones itself).
    }
    if (fresh.length === 0) return keep.length > 0 ? keep : set;
    handoffs++;
    if (o.staging) {
      manager.stageOrdered(upcoming, clock.now());
      const range = upcoming.range ? { range: upcoming.range } : {};
      const answers = await client
        .stage(upcoming.url, fresh, { ...range, timeoutMs: HANDOFF_STAGE_WAIT_MS })
        .catch(() => [] as StagedAnswer[]);
      record(upcoming, answers);
    }
    return [...keep, ...fresh];
  };

  /** Orders what the manager says is needed now; each answer may call for more. */
  const stageAhead = () => {
    if (!o.staging || done || o.signal?.aborted) return;
    const now = clock.now();
    for (const s of manager.decide(now)) {
      manager.stageOrdered(s, now);
      // A hint is only a hint: one that could not be sent leaves the segment to be fetched on demand.
      const target = set;
      void client.stage(s.url, target, s.range ? { range: s.range } : {}).then(
        (answers) => {
          record(s, answers);
          stageAhead();
        },
        () => target.forEach((p) => manager.stageFailed(s, p.proxyId)),
      );
    }
  };

  const outcomes: SegmentOutcome[] = [];
  try {
    for (const [index, s] of segments.entries()) {
      const startAt = clock.now();
      const staged = manager.profile(s)?.staging === 'ready';
      manager.fetchStarted(s, startAt);
      stageAhead();
      let retries = 0;
      let lostBytes = 0;
      let result: GetResult | undefined;
      while (result === undefined) {
        let decoded = 0;
        const attempt = new AbortController();
        const cancelTimer =
          o.attemptTimeoutMs !== undefined ? clock.setTimer(o.attemptTimeoutMs, () => attempt.abort()) : () => {};
        const onAbort = () => attempt.abort();
        o.signal?.addEventListener('abort', onAbort);
        o.onStart?.(index);
        try {
          result = await client.get(s.url, {
            mode: o.mode,
            proxies: o.proxies,
            use: set,
            ...(s.range ? { range: s.range } : {}),
            signal: attempt.signal,
            onProgress: (p) => {
              decoded = p.totalDof > 0 ? Math.round((p.bytes * p.dof) / p.totalDof) : 0;
              o.onProgress?.(index, p);
            },
          });
        } catch (e) {
          if (o.signal?.aborted || retries + 1 >= (o.attempts ?? 1)) throw e;
          retries++;
          lostBytes += decoded;
          o.onRetry?.(e, index);
        } finally {
          cancelTimer();
          o.signal?.removeEventListener('abort', onAbort);
        }
      }
      const end = clock.now();
      manager.fetchCompleted(s, end);
      const outcome: SegmentOutcome = {
        url: s.url,
        ...(s.range ? { range: { ...s.range } } : {}),
        bytes: result.object.length,
        startMs: startAt - started,
        durationMs: end - startAt,
        staged,
        sources: result.sources.map((x) => x.proxyId),
        retries,
        lostBytes,
      };
      outcomes.push(outcome);
      o.onSegment?.(outcome, result.object, index);
      const next = segments[index + 1];
      if (next !== undefined && o.mode !== 'http') {
        const failing = failedIn(result, set);
        if (failing.length > 0) set = await handoff(failing, next);
      }
    }
  } finally {
    done = true;
  }
  return {
    segments: outcomes,
    totalMs: clock.now() - started,
    proxies: set,
    handoffs,
    staging: { ...manager.stats(), hintsAnswered, hintsStaged },
  };
}

/** How long a handoff waits for the newcomers to stage the next segment before switching to them. */
const HANDOFF_STAGE_WAIT_MS = 5000;

/** Proxies of `set` that failed in a download: lost, excluded, or replaced by another. */
function failedIn(result: GetResult, set: readonly ProxyInfo[]): ProxyInfo[] {
  return set.filter((p) => {
    const source = result.sources.find((s) => s.proxyId === p.proxyId);
    if (source === undefined) return true;
    return 'state' in source && (source.state === 'failed' || source.state === 'dropped');
  });
}
