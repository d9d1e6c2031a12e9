/**
 * Where a download writes while it runs: `<file>.part` holds the bytes, `<file>.mutp` (a small
 * JSON control file, as aria2's `.aria2`) says which download they belong to and how far they
 * are verified. Each range is written and flushed to disk before the control file moves past
 * it (written to a temporary name and renamed, so it is never half written): after a crash or
 * SIGKILL the control file never claims bytes the `.part` file lacks. At the end the `.part`
 * file is renamed to its name and the control file removed.
 *
 * A SHA-256 of the file is kept as it grows (a resumed file's verified prefix is read back once),
 * for `--checksum` and the summary.
 */
import { createHash, Hash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fdatasyncSync,
  fstatSync,
  ftruncateSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { z } from 'zod';
import type { SplitProgress, SplitSink } from './split-download';

const CONTROL_FORMAT = 1;

const controlSchema = z
  .object({
    format: z.literal(CONTROL_FORMAT),
    url: z.string(),
    start: z.number().int().nonnegative(),
    end: z.number().int().nonnegative().optional(),
    nextOffset: z.number().int().nonnegative(),
    completeLength: z.number().int().positive().optional(),
  })
  .strict();

export type ControlRecord = z.infer<typeof controlSchema>;

/** What a part file is for: the URL and the bytes of it asked for. */
export interface PartIdentity {
  url: string;
  start: number;
  end?: number;
}

export class PartFileError extends Error {
  override readonly name = 'PartFileError';
}

export const partPath = (file: string) => `${file}.part`;
export const controlPath = (file: string) => `${file}.mutp`;

/** The control record of an interrupted download of `file`, or undefined when there is none. */
export function readControl(file: string): ControlRecord | undefined {
  const path = controlPath(file);
  if (!existsSync(path)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new PartFileError(`${path} is not a control file (${e instanceof Error ? e.message : String(e)})`);
  }
  const record = controlSchema.safeParse(parsed);
  if (!record.success)
    throw new PartFileError(`${path} is not a control file of this version: ${record.error.message}`);
  return record.data;
}

export class PartFile implements SplitSink {
  private readonly fd: number;
  private readonly hash: Hash = createHash('sha256');
  private hashedTo: number;
  private closed = false;

  private constructor(
    readonly file: string,
    private readonly identity: PartIdentity,
    /** Where the download goes on from (identity.start for a new one). */
    readonly resumeFrom: SplitProgress,
  ) {
    this.fd = openSync(partPath(file), resumeFrom.nextOffset > identity.start ? 'r+' : 'w');
    this.hashedTo = identity.start;
  }

  /** A new part file for `identity` (an existing one is replaced), its control file written at once. */
  static create(file: string, identity: PartIdentity): PartFile {
    const part = new PartFile(file, identity, { nextOffset: identity.start });
    part.writeControl({ nextOffset: identity.start });
    return part;
  }

  /**
   * The part file of an interrupted download of the same URL and range, cut back to the bytes
   * its control file vouches for, and its hash brought up to there (one read of those bytes).
   */
  static resume(file: string, identity: PartIdentity, control: ControlRecord): PartFile {
    if (control.url !== identity.url)
      throw new PartFileError(`${controlPath(file)} belongs to another URL (${control.url})`);
    if (control.start !== identity.start || control.end !== identity.end)
      throw new PartFileError(`${controlPath(file)} belongs to another range of ${control.url}`);
    if (!existsSync(partPath(file))) throw new PartFileError(`${partPath(file)} is missing`);
    const part = new PartFile(file, identity, {
      nextOffset: control.nextOffset,
      ...(control.completeLength !== undefined ? { completeLength: control.completeLength } : {}),
    });
    const verified = control.nextOffset - identity.start;
    if (fstatSync(part.fd).size < verified) {
      part.close();
      throw new PartFileError(`${partPath(file)} is shorter than its control file says`);
    }
    ftruncateSync(part.fd, verified);
    part.hashPrefix(verified);
    return part;
  }

  async write(offset: number, bytes: Uint8Array): Promise<void> {
    if (offset !== this.hashedTo) throw new PartFileError(`write at ${offset}, expected ${this.hashedTo}`);
    let written = 0;
    while (written < bytes.length)
      written += writeSync(this.fd, bytes, written, bytes.length - written, offset - this.identity.start + written);
    this.hash.update(bytes);
    this.hashedTo += bytes.length;
    return Promise.resolve();
  }

  async commit(progress: SplitProgress): Promise<void> {
    // The bytes reach the disk before the record that vouches for them.
    fdatasyncSync(this.fd);
    this.writeControl(progress);
    return Promise.resolve();
  }

  /** Bytes written and flushed so far, resumed prefix included. */
  get verifiedBytes(): number {
    return this.hashedTo - this.identity.start;
  }

  /** SHA-256 (hex) of everything written, resumed prefix included. */
  digest(): string {
    return this.hash.copy().digest('hex');
  }

  /** The download is complete: the part file takes its name and the control file goes. */
  finish(): void {
    this.close();
    renameSync(partPath(this.file), this.file);
    rmSync(controlPath(this.file), { force: true });
  }

  /** The download failed for good (a wrong checksum): nothing of it stays. */
  discard(): void {
    this.close();
    rmSync(partPath(this.file), { force: true });
    rmSync(controlPath(this.file), { force: true });
  }

  /** Leaves both files for a later `--continue`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }

  private writeControl(progress: SplitProgress): void {
    const record: ControlRecord = {
      format: CONTROL_FORMAT,
      url: this.identity.url,
      start: this.identity.start,
      ...(this.identity.end !== undefined ? { end: this.identity.end } : {}),
      nextOffset: progress.nextOffset,
      ...(progress.completeLength !== undefined ? { completeLength: progress.completeLength } : {}),
    };
    const path = controlPath(this.file);
    writeFileSync(`${path}.tmp`, JSON.stringify(record) + '\n');
    renameSync(`${path}.tmp`, path);
  }

  private hashPrefix(length: number): void {
    const buffer = Buffer.allocUnsafe(1 << 20);
    for (let at = 0; at < length;) {
      const n = readSync(this.fd, buffer, 0, Math.min(buffer.length, length - at), at);
      if (n === 0) throw new PartFileError(`${partPath(this.file)} ended at ${at} of ${length} bytes`);
      this.hash.update(buffer.subarray(0, n));
      at += n;
    }
    this.hashedTo = this.identity.start + length;
  }
}
