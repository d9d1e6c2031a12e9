/**
 * Takes download records off the message path: `offer()` only queues (bounded by rows and bytes)
 * and never touches the database; a timer writes the queue in one transaction per flush. When
 * the database fails (locked: SQLITE_BUSY after the short busy timeout, disk full, ...) the
 * writer marks it unhealthy and sheds records for a back-off period instead of retrying on
 * every message, so a stuck database costs the event loop at most one busy timeout per back-off
 * and heartbeats, signalling and greetings never wait for it. Shed records are counted.
 */
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { DownloadRecord } from '@mutp/shared';
import { PendingRecord, RecordStore, recordBytes } from './records';

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
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: RecordStore,
    private readonly options: RecordWriterOptions,
    private readonly deps: { log: Logger; stored: Counter; shed: Counter<'reason'>; now?: () => number },
  ) {
    this.timer = setInterval(() => this.flush(), options.flushIntervalMs);
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

  /** Writes what is queued now (also called on close). */
  flush(): void {
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    if (!this.healthy) {
      this.shed('db-unhealthy', batch.length);
      return;
    }
    try {
      this.store.insertBatch(batch);
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

  close(): void {
    clearInterval(this.timer);
    this.flush();
  }

  private shed(reason: ShedReason, count: number): false {
    this.deps.shed.inc({ reason }, count);
    return false;
  }

  private now(): number {
    return (this.deps.now ?? (() => performance.now()))();
  }
}
