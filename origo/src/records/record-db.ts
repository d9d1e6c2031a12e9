/**
 * The download records database, kept off origo's event loop. SQLite calls block: a locked
 * database for the busy timeout, a slow or full disk for as long as the write takes. So one worker
 * thread (record-worker.ts) owns the connection and this side only posts it batches and queries
 * and awaits the answers; heartbeats, signalling and greetings never wait for the disk. Requests
 * are answered in order. If the worker dies, every pending and later request fails (the writer
 * then sheds records, counted) until origo restarts.
 */
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { RecordBackend } from './record-backend';
import type { PendingRecord, RecordMode, StoredRecord } from './records';

export interface RecordDbOptions {
  /** SQLite file, or ':memory:' (the worker's own in-memory database). */
  path: string;
  maxRows: number;
  maxBytes: number;
  busyTimeoutMs: number;
}

type RecordDbOp =
  { op: 'insert'; batch: PendingRecord[] } | { op: 'recent'; limit: number; mode?: RecordMode } | { op: 'close' };

export type RecordDbRequest = RecordDbOp & { id: number };

/** id 0 answers the open. */
export type RecordDbReply = { id: number; ok: true; value?: unknown } | { id: number; ok: false; error: string };

interface Waiter {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

export class RecordDatabase implements RecordBackend {
  /** Resolves when the database is open; rejects with SQLite's reason when it cannot be. */
  readonly ready: Promise<void>;
  private readonly worker: Worker;
  private readonly waiters = new Map<number, Waiter>();
  private nextId = 1;
  private dead?: Error;

  constructor(options: RecordDbOptions) {
    // The worker is written like this file: compiled (npm run build), record-worker.js beside it;
    // from source (tsx, ts-jest), TypeScript, loaded through tsx's CommonJS hook registered first.
    this.worker = __filename.endsWith('.ts')
      ? new Worker(`require('tsx/cjs'); require(${JSON.stringify(path.join(__dirname, 'record-worker.ts'))});`, {
          eval: true,
          workerData: options,
        })
      : new Worker(path.join(__dirname, 'record-worker.js'), { workerData: options });
    this.ready = new Promise<void>((resolve, reject) => {
      this.waiters.set(0, { resolve: () => resolve(), reject });
    });
    // Nobody may be awaiting `ready` yet; a failed open is reported to whoever asks later.
    this.ready.catch(() => undefined);
    this.worker.on('message', (reply: RecordDbReply) => this.answer(reply));
    this.worker.on('error', (err) => this.fail(err));
    this.worker.on('exit', (code) => this.fail(new Error(`records database thread exited (code ${code})`)));
  }

  insertBatch(batch: readonly PendingRecord[]): Promise<void> {
    return this.request({ op: 'insert', batch: [...batch] }).then(() => undefined);
  }

  recent(limit: number, mode?: RecordMode): Promise<StoredRecord[]> {
    return this.request({ op: 'recent', limit, mode }) as Promise<StoredRecord[]>;
  }

  /** Closes the connection and ends the thread; resolves when both are done. */
  async close(): Promise<void> {
    if (this.dead) return;
    await this.request({ op: 'close' }).catch(() => undefined);
    await this.worker.terminate();
  }

  private request(op: RecordDbOp): Promise<unknown> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiters.set(id, { resolve, reject });
      this.worker.postMessage({ ...op, id } satisfies RecordDbRequest);
    });
  }

  private answer(reply: RecordDbReply): void {
    const waiter = this.waiters.get(reply.id);
    if (!waiter) return;
    this.waiters.delete(reply.id);
    if (reply.ok) waiter.resolve(reply.value);
    else waiter.reject(new Error(reply.error));
  }

  private fail(err: Error): void {
    this.dead ??= err;
    for (const waiter of this.waiters.values()) waiter.reject(this.dead);
    this.waiters.clear();
  }
}
