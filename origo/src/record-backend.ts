/**
 * Where download records are kept: the embedded SQLite file (record-db.ts, on a worker thread;
 * the default) or PostgreSQL (record-pg.ts, `--records postgres://…`, shared by several origo
 * instances). RecordWriter feeds either in batches and `/v1/records` reads either; the rows and
 * the results are the same.
 */
import type { Logger } from 'pino';
import type { OrigoConfig } from './config';
import type { Metrics } from './metrics';
import { RecordDatabase } from './record-db';
import { PgRecordStore } from './record-pg';
import { redactUrl } from './redact-url';
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

export type RecordBackendConfig = Pick<
  OrigoConfig,
  'db' | 'recordsUrl' | 'maxRecords' | 'maxRecordBytes' | 'dbBusyTimeoutMs'
>;

/** PostgreSQL when `recordsUrl` is set, else the SQLite file `db`. */
export function openRecordBackend(config: RecordBackendConfig, log: Logger, metrics: Metrics): RecordBackend {
  if (config.recordsUrl !== undefined) {
    return new PgRecordStore(
      { url: config.recordsUrl, maxRows: config.maxRecords, maxBytes: config.maxRecordBytes },
      log,
      metrics.registry,
    );
  }
  return new RecordDatabase({
    path: config.db,
    maxRows: config.maxRecords,
    maxBytes: config.maxRecordBytes,
    busyTimeoutMs: config.dbBusyTimeoutMs,
  });
}

/** What to log about the store: the SQLite path, or the PostgreSQL URL without its password. */
export function describeRecordBackend(config: RecordBackendConfig): { db: string } | { records: string } {
  return config.recordsUrl !== undefined ? { records: redactUrl(config.recordsUrl) } : { db: config.db };
}
