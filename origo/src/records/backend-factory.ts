/**
 * Opens the records store the configuration asks for. Apart from the interface (record-backend.ts),
 * which the stores implement: the chooser imports the stores, never the other way round.
 */
import type { Logger } from 'pino';
import type { OrigoConfig } from '../config';
import type { Metrics } from '../metrics';
import { redactUrl } from '../redact-url';
import type { RecordBackend } from './record-backend';
import { RecordDatabase } from './record-db';
import { PgRecordStore } from './record-pg';

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
