/**
 * Downloads a series of segments in play order through one proxy set, staging upcoming ones at
 * those proxies (SegmentStager): the loop `mutp playlist` and bench:mobility run. The extension's
 * loader does the same segment by segment as the player asks (extension/src/downloader).
 *
 * The proxy set is chosen once, so a segment is fetched from the proxies it was staged at;
 * MutpClient replaces a proxy that cannot be reached for one download, and the stager replaces
 * it in the set between two segments.
 */
import type { ByteRange } from '../../range';
import type { DownloadMode, GetOptions, GetResult } from '../client';
import type { Clock } from '../host';
import type { ProxyInfo } from '../../signalling';
import type { SegmentRef } from './chunk-profile';
import type { StagingConfig } from './staging-manager';
import type { SpreadConfig } from './spread-rule';
import { SegmentStager, StagerStats, StagingClient } from './stager';

/** What the series needs of MutpClient. */
export interface SeriesClient extends StagingClient {
  get(url: string, o: GetOptions): Promise<GetResult>;
}

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
  client: SeriesClient,
  clock: Clock,
  segments: readonly SegmentRef[],
  o: SeriesOptions,
): Promise<SeriesResult> {
  const started = clock.now();
  const stager = new SegmentStager(client, clock, {
    mode: o.mode,
    proxies: o.proxies,
    staging: o.staging,
    ...(o.stagingConfig ? { stagingConfig: o.stagingConfig } : {}),
    ...(o.spread !== undefined ? { spread: o.spread } : {}),
    ...(o.spreadConfig ? { spreadConfig: o.spreadConfig } : {}),
  });
  stager.setUpcoming(segments);
  for (let attempt = 1; stager.current() === undefined; attempt++) {
    try {
      await stager.proxies(o.signal);
    } catch (e) {
      // Origo out of reach (a disconnection): asked again, as a segment would be.
      if (o.signal?.aborted || attempt >= (o.attempts ?? 1)) throw e;
      o.onRetry?.(e, -1);
    }
  }

  const outcomes: SegmentOutcome[] = [];
  try {
    for (const [index, s] of segments.entries()) {
      const startAt = clock.now();
      const staged = stager.fetchStarted(s);
      let retries = 0;
      let lostBytes = 0;
      let result: GetResult | undefined;
      let use: ProxyInfo[] = [];
      while (result === undefined) {
        const download = stager.downloadOf(s, o.proxies);
        use = download.use;
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
            proxies: download.proxies,
            use,
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
      stager.fetchCompleted(s, undefined, result);
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
      if (next !== undefined) await stager.afterSegment(result, next, undefined, o.signal, use);
    }
  } finally {
    stager.close();
  }
  const { handoffs, ...staging } = stager.stats();
  return {
    segments: outcomes,
    totalMs: clock.now() - started,
    proxies: [...(stager.current() ?? [])],
    handoffs,
    staging,
  };
}
