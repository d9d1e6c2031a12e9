/**
 * Downloads a series of segments in play order through one proxy set, staging upcoming ones at
 * those proxies: the loop `mutp playlist` and bench:mobility run, one PlaybackSession call per
 * segment. The extension's loader does the same segment by segment as the player asks
 * (extension/src/downloader).
 *
 * The proxy set is chosen once, so a segment is fetched from the proxies it was staged at;
 * MutpClient replaces a proxy that cannot be reached for one download, and the session replaces
 * it in the set between two segments.
 */
import type { ByteRange } from '../../range';
import type { ProxyInfo } from '../../signalling';
import type { DownloadMode } from '../client';
import type { DownloadProgress } from '../download';
import type { Clock } from '../host';
import type { SegmentRef } from '../staging/chunk-profile';
import type { StagingConfig } from '../staging/staging-manager';
import type { SpreadConfig } from '../staging/spread-rule';
import type { StagerStats } from '../staging/stager';
import { PlaybackClient, PlaybackSession } from './session';

export interface SeriesOptions {
  mode: DownloadMode;
  proxies: number;
  /** Stage upcoming segments (SoftStage); false: every segment is fetched on demand. */
  staging: boolean;
  stagingConfig?: Partial<StagingConfig>;
  /** Proxies each segment is staged at and fetched from (StagerOptions.spread; default 'auto'). */
  spread?: number | 'auto';
  spreadConfig?: Partial<SpreadConfig>;
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
  staging: Omit<StagerStats, 'handoffs'>;
}

export async function downloadSeries(
  client: PlaybackClient,
  clock: Clock,
  segments: readonly SegmentRef[],
  o: SeriesOptions,
): Promise<SeriesResult> {
  const started = clock.now();
  const session = new PlaybackSession(client, clock, {
    mode: o.mode,
    proxies: o.proxies,
    staging: o.staging,
    ...(o.stagingConfig ? { stagingConfig: o.stagingConfig } : {}),
    ...(o.spread !== undefined ? { spread: o.spread } : {}),
    ...(o.spreadConfig ? { spreadConfig: o.spreadConfig } : {}),
  });
  const outcomes: SegmentOutcome[] = [];
  try {
    for (let attempt = 1; session.current() === undefined; attempt++) {
      try {
        await session.proxies(o.signal);
      } catch (e) {
        // Origo out of reach (a disconnection): asked again, as a segment would be.
        if (o.signal?.aborted || attempt >= (o.attempts ?? 1)) throw e;
        o.onRetry?.(e, -1);
      }
    }
    for (const [index, s] of segments.entries()) {
      const { onProgress, onStart, onRetry } = o;
      const fetched = await session.fetch(s, {
        // The whole list once: the session keeps it, and each fetch moves the playing position on.
        ...(index === 0 ? { upcoming: segments.slice(1) } : {}),
        ...(o.signal ? { signal: o.signal } : {}),
        ...(o.attempts !== undefined ? { attempts: o.attempts } : {}),
        ...(o.attemptTimeoutMs !== undefined ? { attemptTimeoutMs: o.attemptTimeoutMs } : {}),
        ...(onProgress ? { onProgress: (p: DownloadProgress) => onProgress(index, p) } : {}),
        ...(onStart ? { onAttempt: () => onStart(index) } : {}),
        ...(onRetry ? { onRetry: (e: unknown) => onRetry(e, index) } : {}),
      });
      const { result } = fetched;
      const outcome: SegmentOutcome = {
        url: s.url,
        ...(s.range ? { range: { ...s.range } } : {}),
        bytes: result.object.length,
        startMs: fetched.startedAt - started,
        durationMs: fetched.endedAt - fetched.startedAt,
        staged: fetched.staged,
        sources: result.sources.map((x) => x.proxyId),
        retries: fetched.retries,
        lostBytes: fetched.lostBytes,
      };
      outcomes.push(outcome);
      o.onSegment?.(outcome, result.object, index);
    }
  } finally {
    session.close();
  }
  const { handoffs, ...staging } = session.stats();
  return {
    segments: outcomes,
    totalMs: clock.now() - started,
    proxies: [...(session.current() ?? [])],
    handoffs,
    staging,
  };
}
