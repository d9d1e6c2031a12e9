/**
 * One `mutp get` download to a file: ranges fetched through the proxies one after another
 * (split-download.ts), the next ones staged at the same proxies meanwhile (range-prefetch.ts),
 * written to `<file>.part` with a control file (part-file.ts), checked against `--checksum` when
 * given, then renamed into place. A failure or an interrupt leaves the part and control files
 * for `-c`; a wrong checksum removes them (resuming cannot mend it). With `-o -` the ranges go
 * to stdout instead (stream-sink.ts).
 */
import type { Writable } from 'node:stream';
import type { ByteRange, SchedulerName } from '@mutp/shared';
import type { DownloadMode, DownloadProgress, GetResult, MutpClient } from '@mutp/shared/client';
import type { Checksum } from './checksum';
import { PartFile, PartIdentity, readControl } from './part-file';
import { PrefetchStats, RangePrefetch } from './range-prefetch';
import { downloadSplit, SplitProgress, SplitResult, SplitSink } from './split-download';
import { StreamSink } from './stream-sink';

export interface FileDownloadOptions {
  mode: DownloadMode;
  proxies: number;
  scheduler?: SchedulerName;
  /** The bytes of the resource asked for (`--range`); the whole resource when absent. */
  range?: ByteRange;
  chunkBytes: number;
  /** Ranges staged at the proxies ahead of the one downloaded (--prefetch-ranges); 0: none. */
  prefetchRanges: number;
  /** Tries per range (--max-tries). */
  maxTries: number;
  resume: boolean;
  checksum?: Checksum;
  signal: AbortSignal;
  /** Bytes of the file done (resumed prefix included) and its size once known, per datagram. */
  onBytes?: (done: number, total: number | undefined, progress: DownloadProgress | undefined) => void;
  /** A range was verified and written: its per-proxy figures. */
  onRangeDone?: (result: GetResult) => void;
  /** A range failed and is tried again after `waitMs`. */
  onRetry?: (range: ByteRange, attempt: number, error: unknown, waitMs: number) => void;
  /** `-o -`: wraps each wait for stdout's reader to take a range (stream-sink.ts). */
  whileReaderWaits?: (flushed: Promise<void>) => Promise<void>;
}

export interface FileResult extends SplitResult {
  url: string;
  file: string;
  mode: DownloadMode;
  /** Bytes in the file. */
  bytes: number;
  /** Where the file's bytes start in the resource (0 unless `--range`). */
  start: number;
  durationMs: number;
  /** This run's bytes per second of its own duration. */
  goodputBps: number;
  sha256: string;
  proxiesAsked: number;
  /** What the look-ahead hinted and how the proxies answered. */
  prefetch: PrefetchStats;
}

export class ChecksumError extends Error {
  override readonly name = 'ChecksumError';
}

export async function downloadToFile(
  client: MutpClient,
  url: string,
  file: string,
  o: FileDownloadOptions,
  now: () => number = () => performance.now(),
): Promise<FileResult> {
  const identity = identityOf(url, o.range);
  const control = o.resume ? readControl(file) : undefined;
  const part = control ? PartFile.resume(file, identity, control) : PartFile.create(file, identity);
  const startedAt = now();
  let fetched: Fetched;
  try {
    fetched = await fetchInto(client, identity, part, part.resumeFrom, o);
  } catch (e) {
    // Kept for -c only when it holds verified bytes; an empty one would just be in the way.
    if (part.verifiedBytes > 0) part.close();
    else part.discard();
    throw e;
  }
  const sha256 = part.digest();
  if (o.checksum && o.checksum.hex !== sha256) {
    part.discard();
    throw new ChecksumError(`${file}: sha-256 is ${sha256}, expected ${o.checksum.hex}; the file was removed`);
  }
  part.finish();
  return resultOf(fetched, { url, file, sha256, startedAt, now, o });
}

/**
 * `-o -`: the download written to `stream` (stdout) range by range as each is verified. A
 * wrong checksum is an error after the bytes went out; nothing is resumable.
 */
export async function downloadToStream(
  client: MutpClient,
  url: string,
  stream: Writable,
  o: Omit<FileDownloadOptions, 'resume'>,
  now: () => number = () => performance.now(),
): Promise<FileResult> {
  const identity = identityOf(url, o.range);
  const sink = new StreamSink(stream, identity.start, o.whileReaderWaits);
  const startedAt = now();
  let fetched: Fetched;
  try {
    fetched = await fetchInto(client, identity, sink, { nextOffset: identity.start }, o);
  } finally {
    sink.close();
  }
  const sha256 = sink.digest();
  if (o.checksum && o.checksum.hex !== sha256)
    throw new ChecksumError(
      `${STDOUT_NAME}: sha-256 is ${sha256}, expected ${o.checksum.hex}; the bytes were already written`,
    );
  return resultOf(fetched, { url, file: STDOUT_NAME, sha256, startedAt, now, o });
}

/** How `-o -` is named in messages and the summary. */
export const STDOUT_NAME = '(stdout)';

interface Fetched {
  split: SplitResult;
  start: number;
  prefetch: PrefetchStats;
}

function identityOf(url: string, range: ByteRange | undefined): PartIdentity {
  return { url, start: range?.start ?? 0, ...(range ? { end: range.start + range.length - 1 } : {}) };
}

/** The ranges from `from` on fetched into `sink`, the next ones staged ahead meanwhile. */
async function fetchInto(
  client: MutpClient,
  identity: PartIdentity,
  sink: SplitSink,
  from: SplitProgress,
  o: Omit<FileDownloadOptions, 'resume'>,
): Promise<Fetched> {
  const { url, start } = identity;
  const prefetch = new RangePrefetch(client, url, o.mode, o.proxies, o.signal);
  const fetchRange = async (range: ByteRange, onProgress: (p: DownloadProgress) => void): Promise<GetResult> => {
    // Without look-ahead the client chooses per range, as before.
    const use = o.prefetchRanges > 0 ? await prefetch.proxySet() : undefined;
    return client.get(url, {
      mode: o.mode,
      proxies: o.proxies,
      ...(o.scheduler ? { scheduler: o.scheduler } : {}),
      ...(use ? { use } : {}),
      range,
      signal: o.signal,
      onProgress,
    });
  };
  const known = from.completeLength;
  o.onBytes?.(from.nextOffset - start, known !== undefined ? sizeOf(identity, known) : undefined, undefined);
  const split = await downloadSplit(
    fetchRange,
    {
      start,
      ...(identity.end !== undefined ? { end: identity.end } : {}),
      chunkBytes: o.chunkBytes,
      maxTries: o.maxTries,
      lookahead: o.prefetchRanges,
    },
    sink,
    from,
    {
      onBytes: (done, total, progress) => o.onBytes?.(done, total, progress),
      onUpcoming: (ranges) => prefetch.ahead(ranges),
      onRetry: (range, attempt, error, waitMs) => {
        prefetch.forget();
        o.onRetry?.(range, attempt, error, waitMs);
      },
      onRange: (result, progress) => {
        o.onRangeDone?.(result);
        const total = progress.completeLength !== undefined ? sizeOf(identity, progress.completeLength) : undefined;
        o.onBytes?.(progress.nextOffset - start, total, undefined);
      },
    },
  );
  return { split, start, prefetch: { ...prefetch.stats } };
}

function resultOf(
  { split, start, prefetch }: Fetched,
  r: {
    url: string;
    file: string;
    sha256: string;
    startedAt: number;
    now: () => number;
    o: Pick<FileDownloadOptions, 'mode' | 'proxies'>;
  },
): FileResult {
  const durationMs = Math.max(r.now() - r.startedAt, 1e-3);
  return {
    ...split,
    url: r.url,
    file: r.file,
    mode: r.o.mode,
    bytes: split.resumedFrom - start + split.fetchedBytes,
    start,
    durationMs,
    goodputBps: (split.fetchedBytes / durationMs) * 1000,
    sha256: r.sha256,
    proxiesAsked: r.o.proxies,
    prefetch,
  };
}

/** The file's size once the resource's length is known. */
function sizeOf(identity: PartIdentity, completeLength: number): number {
  return Math.min(identity.end ?? Infinity, completeLength - 1) - identity.start + 1;
}
