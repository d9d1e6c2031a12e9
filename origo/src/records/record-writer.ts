/**
 * Takes download records off the message path: `offer()` only queues (bounded by rows and bytes)
 * and never touches the database; a timer hands the queue to the database thread (record-db.ts),
 * one batch and one transaction at a time. When the database fails (locked: SQLITE_BUSY after the
 * busy timeout, disk full, the thread gone) the writer marks it unhealthy and sheds records for a
 * back-off period instead of retrying on every message. Shed records are counted. While a batch is
 * being written the queue keeps filling up to its bound, so a slow disk costs records, never
 * memory or the event loop.
 */
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { DownloadRecord } from '@mutp/shared';
import { PendingRecord, recordBytes } from './records';

/** Where batches go: the database thread (RecordDatabase). */
export interface RecordSink {
  insertBatch(batch: readonly PendingRecord[]): Promise<void>;
}

export type ShedReason = 'queue-full' | 'db-unhealthy' | 'db-error';

export interface RecordWriterOptions {
  maxQueuedRecords: number;
  maxQueuedBytes: number;
  flushIntervalMs: number;
  /** First back-off after a failed write; doubles per failure up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
}

export const DEFAULT_WRITER: RecordWriterOptions = {
  maxQueuedRecords: 1000,
  maxQueuedBytes: 1024 * 1024,
  flushIntervalMs: 250,
  backoffMs: 1000,
  maxBackoffMs: 30_000,
};

export class RecordWriter {
  private queue: PendingRecord[] = [];
  private queuedBytes = 0;
  private unhealthyUntil = 0;
  private failures = 0;
  /** The batch being written, if any: one at a time. */
  private writing?: Promise<void>;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly sink: RecordSink,
    private readonly options: RecordWriterOptions,
    private readonly deps: { log: Logger; stored: Counter; shed: Counter<'reason'>; now?: () => number },
  ) {
    this.timer = setInterval(() => {
      if (!this.writing) void this.flush();
    }, options.flushIntervalMs);
    this.timer.unref();
  }

  get healthy(): boolean {
    return this.now() >= this.unhealthyUntil;
  }

  /** Queues a record; false (and counted as shed) when the queue is full or the database is unhealthy. */
  offer(clientId: string, record: DownloadRecord, receivedAt: number): boolean {
    if (!this.healthy) return this.shed('db-unhealthy', 1);
    const bytes = recordBytes(record);
    if (this.queue.length >= this.options.maxQueuedRecords || this.queuedBytes + bytes > this.options.maxQueuedBytes) {
      return this.shed('queue-full', 1);
    }
    this.queue.push({ clientId, record, receivedAt });
    this.queuedBytes += bytes;
    return true;
  }

  /** Writes what is queued now, after the batch in progress (tests, close); never rejects. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    // Assigned before the first await, so a concurrent flush waits for this one.
    await (this.writing = this.writeQueued().finally(() => (this.writing = undefined)));
  }

  private async writeQueued(): Promise<void> {
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    if (!this.healthy) {
      this.shed('db-unhealthy', batch.length);
      return;
    }
    try {
      await this.sink.insertBatch(batch);
      this.deps.stored.inc(batch.length);
      this.failures = 0;
    } catch (err) {
      const backoff = Math.min(this.options.maxBackoffMs, this.options.backoffMs * 2 ** Math.min(this.failures, 16));
      this.failures++;
      this.unhealthyUntil = this.now() + backoff;
      this.shed('db-error', batch.length);
      this.deps.log.error(
        { err, records: batch.length, backoffMs: backoff },
        'writing records failed: shedding records',
      );
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private shed(reason: ShedReason, count: number): false {
    this.deps.shed.inc({ reason }, count);
    return false;
  }

  private now(): number {
    return (this.deps.now ?? (() => performance.now()))();
  }
}
