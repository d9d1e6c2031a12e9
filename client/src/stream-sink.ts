/**
 * Where `mutp get -o -` writes: each verified range goes to a stream (stdout) in order, as soon
 * as it is verified, with the stream's back-pressure respected. A SHA-256 of what was written is
 * kept for `--checksum` and the summary. Nothing can be taken back once written, so a stream
 * download cannot resume (`-c` is refused with `-o -`), and a wrong checksum is reported after
 * the bytes went out (as curl does).
 */
import { createHash } from 'node:crypto';
import type { Writable } from 'node:stream';
import type { SplitProgress, SplitSink } from './split-download';

export class StreamSinkError extends Error {
  override readonly name = 'StreamSinkError';
}

export class StreamSink implements SplitSink {
  private readonly hash = createHash('sha256');
  private written = 0;
  private broken?: Error;
  private readonly onError = (e: Error) => (this.broken ??= e);

  constructor(
    private readonly stream: Writable,
    /** The resource offset of the first byte written (its `--range` start). */
    private readonly start: number,
    /** Wraps each wait for the reader to take a write (the `--timeout` clock stops meanwhile). */
    private readonly whileReaderWaits: (flushed: Promise<void>) => Promise<void> = (flushed) => flushed,
  ) {
    // A reader that went away (EPIPE) fails the download instead of crashing the process.
    stream.on('error', this.onError);
  }

  async write(offset: number, bytes: Uint8Array): Promise<void> {
    if (offset !== this.start + this.written)
      throw new StreamSinkError(`write at ${offset}, expected ${this.start + this.written}`);
    if (this.broken) throw this.failure(this.broken);
    const flushed = new Promise<void>((resolve, reject) =>
      this.stream.write(bytes, (e) => {
        if (!e) return resolve();
        this.onError(e);
        reject(this.failure(e));
      }),
    );
    this.hash.update(bytes);
    this.written += bytes.length;
    await this.whileReaderWaits(flushed);
  }

  /** Nothing to record: a stream cannot be resumed. */
  commit(_progress: SplitProgress): Promise<void> {
    return Promise.resolve();
  }

  get verifiedBytes(): number {
    return this.written;
  }

  digest(): string {
    return this.hash.copy().digest('hex');
  }

  /** Stops listening for the stream's errors (the download is over). */
  close(): void {
    this.stream.off('error', this.onError);
  }

  private failure(e: Error): StreamSinkError {
    return new StreamSinkError(`cannot write to the output: ${e.message}`);
  }
}
