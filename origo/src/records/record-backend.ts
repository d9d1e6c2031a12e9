/**
 * Where download records are kept: the embedded SQLite file (record-db.ts, on a worker thread;
 * the default) or PostgreSQL (record-pg.ts, `--records postgres://…`, shared by several origo
 * instances). RecordWriter feeds either in batches and `/v1/records` reads either; the rows and
 * the results are the same. backend-factory.ts chooses one.
 */
import type { RecordSink } from './record-writer';
import type { PendingRecord, RecordMode, StoredRecord } from './records';

export interface RecordBackend extends RecordSink {
  /**
   * Resolves when the store can be used. SQLite: rejects with its reason when the file cannot be
   * opened (origo does not start). PostgreSQL: never rejects (origo starts without it, bounded).
   */
  readonly ready: Promise<void>;
  /** Stores a batch in one statement or transaction: all or nothing. */
  insertBatch(batch: readonly PendingRecord[]): Promise<void>;
  /** The most recent records first, optionally of one mode; rejects when the store is unavailable. */
  recent(limit: number, mode?: RecordMode): Promise<StoredRecord[]>;
  close(): Promise<void>;
}
