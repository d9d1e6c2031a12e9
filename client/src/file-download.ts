/**
 * One `mutp get` download to a file: ranges fetched through the proxies one after another
 * (split-download.ts), written to `<file>.part` with a control file (part-file.ts), checked
 * against `--checksum` when given, then renamed into place. A failure or an interrupt leaves
 * the part and control files for `-c`; a wrong checksum removes them (resuming cannot mend it).
 */
import type { ByteRange, SchedulerName } from '@mutp/shared';
import type { DownloadMode, DownloadProgress, GetResult, MutpClient } from '@mutp/shared/client';
import type { Checksum } from './checksum';
import { PartFile, PartIdentity, readControl } from './part-file';
import { downloadSplit, SplitResult } from './split-download';

export interface FileDownloadOptions {
  mode: DownloadMode;
  proxies: number;
  scheduler?: SchedulerName;
  /** The bytes of the resource asked for (`--range`); the whole resource when absent. */
  range?: ByteRange;
  chunkBytes: number;
  /** Tries per range (--max-tries). */
  maxTries: number;
  resume: boolean;
  checksum?: Checksum;
  signal: AbortSignal;
  /** Bytes of the file done (resumed prefix included) and its size once known, per datagram. */
  onBytes?: (done: number, total: number | undefined, progress: DownloadProgress | undefined) => void;
  /** A range failed and is tried again after `waitMs`. */
  onRetry?: (range: ByteRange, attempt: number, error: unknown, waitMs: number) => void;
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
  const start = o.range?.start ?? 0;
  const identity: PartIdentity = {
    url,
    start,
    ...(o.range ? { end: o.range.start + o.range.length - 1 } : {}),
  };
  const control = o.resume ? readControl(file) : undefined;
  const part = control ? PartFile.resume(file, identity, control) : PartFile.create(file, identity);
  const startedAt = now();
  let split: SplitResult;
  try {
    const fetchRange = (range: ByteRange, onProgress: (p: DownloadProgress) => void): Promise<GetResult> =>
      client.get(url, {
        mode: o.mode,
        proxies: o.proxies,
        ...(o.scheduler ? { scheduler: o.scheduler } : {}),
        range,
        signal: o.signal,
        onProgress,
      });
    const resumedAt = part.resumeFrom.nextOffset - start;
    const known = part.resumeFrom.completeLength;
    o.onBytes?.(resumedAt, known !== undefined ? sizeOf(identity, known) : undefined, undefined);
    split = await downloadSplit(
      fetchRange,
      {
        start,
        ...(identity.end !== undefined ? { end: identity.end } : {}),
        chunkBytes: o.chunkBytes,
        maxTries: o.maxTries,
      },
      part,
      part.resumeFrom,
      {
        onBytes: (done, total, progress) => o.onBytes?.(done, total, progress),
        ...(o.onRetry ? { onRetry: o.onRetry } : {}),
        onRange: (_result, progress) => {
          const total = progress.completeLength !== undefined ? sizeOf(identity, progress.completeLength) : undefined;
          o.onBytes?.(progress.nextOffset - start, total, undefined);
        },
      },
    );
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
  const durationMs = Math.max(now() - startedAt, 1e-3);
  return {
    ...split,
    url,
    file,
    mode: o.mode,
    bytes: split.resumedFrom - start + split.fetchedBytes,
    start,
    durationMs,
    goodputBps: (split.fetchedBytes / durationMs) * 1000,
    sha256,
    proxiesAsked: o.proxies,
  };
}

/** The file's size once the resource's length is known. */
function sizeOf(identity: PartIdentity, completeLength: number): number {
  return Math.min(identity.end ?? Infinity, completeLength - 1) - identity.start + 1;
}
