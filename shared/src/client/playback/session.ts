/**
 * One player's segments through one proxy set, one call per segment (as a p2p-media-loader or
 * hls.js loader is called): a PlaybackSession per client, mode and N owns the set, the hints for
 * upcoming segments, which proxies each segment goes to (the spread rule), the handoff between
 * segments and the segment's download itself. SegmentStager (../staging/stager.ts) decides; the
 * session drives it in the order it needs, so callers cannot get that order wrong:
 *
 *   setUpcoming → proxies → [handoff] → fetchStarted → downloadOf → get → fetchCompleted → afterSegment
 *
 * `downloadSeries` (series.ts, `mutp playlist` and bench:mobility) is a loop over it; the
 * extension's downloader keeps one per page frame and calls it for every staged request.
 */
import type { ProxyInfo } from '../../signalling';
import type { DownloadProgress } from '../download';
import type { GetOptions, GetResult } from '../client';
import type { Clock } from '../host';
import type { SegmentRef } from '../staging/chunk-profile';
import { SegmentStager, StagerOptions, StagerStats, StagingClient } from '../staging/stager';

/** What a playback session needs of MutpClient. */
export interface PlaybackClient extends StagingClient {
  get(url: string, o: GetOptions): Promise<GetResult>;
}

export type PlaybackOptions = StagerOptions & {
  /**
   * When the set is settled after a segment (its failed, degrading or leaving proxies replaced):
   * 'before-next' (the default; a series) as the next segment is asked for, staging it at the
   * newcomers before its download; 'background' (a player's loader) at once, without holding
   * anything up: the page has its bytes, and the next segment takes the set as it is by then.
   */
  handoff?: 'before-next' | 'background';
};

export interface FetchOptions {
  /**
   * The segments listed after this one in its track, in play order (a player gives them with
   * every request; a series may give its whole list once). Omitted: the track's list stays.
   */
  upcoming?: readonly SegmentRef[];
  /** The playlist the segment belongs to (video and audio renditions are followed apart). */
  track?: string;
  signal?: AbortSignal;
  /** Shorter limits for this segment (a caller with a deadline): origo, choosing the set included, and proxy connections. */
  origoTimeoutMs?: number;
  connectTimeoutMs?: number;
  /**
   * Tries (default 1): a download that failed (stalled past the client's stall timeout, every
   * proxy lost) is asked for again, as a player retries a segment.
   */
  attempts?: number;
  /** A try taking longer than this is given up (and tried again if attempts remain). */
  attemptTimeoutMs?: number;
  onProgress?: (progress: DownloadProgress) => void;
  /** A try starts now. */
  onAttempt?: () => void;
  /** A try failed and is made again. */
  onRetry?: (error: unknown) => void;
}

export interface FetchedSegment {
  result: GetResult;
  /** A proxy had answered "staged" for it when its download started. */
  staged: boolean;
  /** The proxies it was staged at and asked for (GetOptions.use), as of its last try. */
  use: readonly ProxyInfo[];
  /** When its download started (after a handoff before it) and ended, on the session's clock. */
  startedAt: number;
  endedAt: number;
  /** Failed tries before the one that succeeded. */
  retries: number;
  /** Bytes the failed tries had decoded (lost: the next try starts again). */
  lostBytes: number;
}

export class PlaybackSession {
  private readonly stager: SegmentStager;
  /** The last segment's download, whose handoff the next fetch settles first ('before-next'). */
  private unsettled?: { result: GetResult; use: readonly ProxyInfo[] };

  constructor(
    private readonly client: PlaybackClient,
    private readonly clock: Clock,
    private readonly o: PlaybackOptions,
  ) {
    this.stager = new SegmentStager(client, clock, o);
  }

  /**
   * The proxy set, chosen through origo the first time (again after a failed choice); `fetch`
   * chooses it too, so this is for a caller that wants the choice apart (to retry it).
   */
  proxies(signal?: AbortSignal, origoTimeoutMs?: number): Promise<readonly ProxyInfo[]> {
    return this.stager.proxies(signal, origoTimeoutMs);
  }

  /** The set in use, if chosen. */
  current(): readonly ProxyInfo[] | undefined {
    return this.stager.current();
  }

  /**
   * Downloads `segment` through the set: stages what comes after it as the staging rule says,
   * tries it `attempts` times, and settles the set for the next one (`handoff`). Rejects with the
   * last try's error, or with the failure to choose the set (origo down or hung, no proxies).
   */
  async fetch(segment: SegmentRef, o: FetchOptions = {}): Promise<FetchedSegment> {
    const track = o.track;
    if (o.upcoming) this.stager.setUpcoming([segment, ...o.upcoming], track);
    // Awaited only the first time: a chosen set costs the download no tick.
    if (!this.stager.current()) await this.stager.proxies(o.signal, o.origoTimeoutMs);
    const unsettled = this.unsettled;
    this.unsettled = undefined;
    if (unsettled) await this.stager.afterSegment(unsettled.result, segment, track, o.signal, unsettled.use);

    const startedAt = this.clock.now();
    const staged = this.stager.fetchStarted(segment, track);
    let retries = 0;
    let lostBytes = 0;
    for (;;) {
      const { use, proxies } = this.stager.downloadOf(segment, this.o.proxies);
      let progress: DownloadProgress | undefined;
      const attempt = this.attemptSignal(o);
      o.onAttempt?.();
      try {
        const result = await this.client.get(segment.url, {
          mode: this.o.mode,
          proxies,
          use,
          ...(segment.range ? { range: segment.range } : {}),
          signal: attempt.signal,
          ...(o.origoTimeoutMs !== undefined ? { origoTimeoutMs: o.origoTimeoutMs } : {}),
          ...(o.connectTimeoutMs !== undefined ? { connectTimeoutMs: o.connectTimeoutMs } : {}),
          // Called for every datagram: keeps the last progress only (what a failed try had decoded).
          onProgress: (p) => {
            progress = p;
            o.onProgress?.(p);
          },
        });
        const endedAt = this.clock.now();
        this.segmentDone(segment, o, result, use);
        return { result, staged, use, startedAt, endedAt, retries, lostBytes };
      } catch (e) {
        if (o.signal?.aborted || retries + 1 >= (o.attempts ?? 1)) throw e;
        retries++;
        lostBytes +=
          progress && progress.totalDof > 0 ? Math.round((progress.bytes * progress.dof) / progress.totalDof) : 0;
        o.onRetry?.(e);
      } finally {
        attempt.release();
      }
    }
  }

  stats(): StagerStats {
    return this.stager.stats();
  }

  /** No more hints or handoffs (the series ended, the page went away); a download under way ends as it would. */
  close(): void {
    this.unsettled = undefined;
    this.stager.close();
  }

  /** `segment` was fetched in full: its sources tell the spread rule, and the set is settled for the next one. */
  private segmentDone(segment: SegmentRef, o: FetchOptions, result: GetResult, use: readonly ProxyInfo[]): void {
    this.stager.fetchCompleted(segment, o.track, result);
    if (this.o.handoff === 'background') {
      // Settled in the background: the caller gets its bytes now, the next segment uses the new set.
      void this.stager.afterSegment(result, o.upcoming?.[0], o.track, undefined, use).catch(() => undefined);
    } else {
      this.unsettled = { result, use };
    }
  }

  /** One try's signal: aborted with the caller's, or when the try runs past `attemptTimeoutMs`. */
  private attemptSignal(o: FetchOptions): { signal: AbortSignal; release: () => void } {
    const attempt = new AbortController();
    const abort = () => attempt.abort();
    const cancelTimer =
      o.attemptTimeoutMs !== undefined ? this.clock.setTimer(o.attemptTimeoutMs, abort) : () => undefined;
    if (o.signal?.aborted) abort();
    o.signal?.addEventListener('abort', abort);
    return {
      signal: attempt.signal,
      release: () => {
        cancelTimer();
        o.signal?.removeEventListener('abort', abort);
      },
    };
  }
}
