/**
 * Download records reported by clients, kept in SQLite (better-sqlite3). The table holds every
 * field of `downloadRecord`, the per-proxy shares as JSON, the reporting client and the time
 * origo received it. The oldest rows beyond `maxRows` or `maxBytes` are pruned. Writes come in
 * batches from RecordWriter (record-writer.ts), never one per message; the busy timeout is short
 * so a locked database costs the event loop at most that long per batch.
 */
import Database from 'better-sqlite3';
import { DownloadRecord } from '@mutp/shared';

export type RecordMode = DownloadRecord['mode'];

export interface StoredRecord extends DownloadRecord {
  id: number;
  clientId: string;
  /** ISO 8601, origo's clock. */
  receivedAt: string;
}

interface Row {
  id: number;
  received_at: number;
  client_id: string;
  url: string;
  mode: RecordMode;
  scheduler: string | null;
  sources: number;
  bytes: number;
  duration_ms: number;
  goodput_bps: number;
  normalized_goodput: number;
  status: DownloadRecord['status'];
  error: string | null;
  proxies: string;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS records (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  received_at        INTEGER NOT NULL,
  client_id          TEXT    NOT NULL,
  url                TEXT    NOT NULL,
  mode               TEXT    NOT NULL,
  scheduler          TEXT,
  sources            INTEGER NOT NULL,
  bytes              INTEGER NOT NULL,
  duration_ms        REAL    NOT NULL,
  goodput_bps        REAL    NOT NULL,
  normalized_goodput REAL    NOT NULL,
  status             TEXT    NOT NULL,
  error              TEXT,
  proxies            TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS records_mode_id ON records (mode, id);
`;

/** How many inserts between two prunes of rows beyond maxRows. */
const PRUNE_EVERY = 1000;
/** Bytes a row costs beyond its variable fields (numbers, index entry): an estimate for the byte cap. */
const ROW_OVERHEAD_BYTES = 96;
const VARIABLE_BYTES = 'length(url) + length(proxies) + coalesce(length(error), 0) + coalesce(length(scheduler), 0)';

/** One record waiting to be written. */
export interface PendingRecord {
  clientId: string;
  record: DownloadRecord;
  receivedAt: number;
}

/** The bytes a record counts for against the byte cap (same measure as the SQL in RecordStore). */
export function recordBytes(record: DownloadRecord): number {
  const proxies = JSON.stringify(record.proxies);
  return (
    ROW_OVERHEAD_BYTES +
    Buffer.byteLength(record.url) +
    Buffer.byteLength(proxies) +
    Buffer.byteLength(record.error ?? '') +
    Buffer.byteLength(record.scheduler ?? '')
  );
}

export class RecordStore {
  private readonly db: Database.Database;
  private readonly insertStmt: Database.Statement;
  private readonly recentStmt: Database.Statement<[number]>;
  private readonly recentByModeStmt: Database.Statement<[string, number]>;
  private readonly pruneStmt: Database.Statement<[number]>;
  private readonly bytesStmt: Database.Statement<[]>;
  private readonly pruneOldestStmt: Database.Statement<[number]>;
  private sincePrune = 0;
  /** Bytes of the stored rows (recordBytes), kept up to date by inserts and prunes. */
  private storedBytes: number;

  constructor(
    path: string,
    private readonly maxRows: number,
    private readonly maxBytes = Number.MAX_SAFE_INTEGER,
    busyTimeoutMs = 5000,
  ) {
    this.db = new Database(path, { timeout: busyTimeoutMs });
    if (path !== ':memory:') this.db.pragma('journal_mode = WAL');
    this.db.exec(SCHEMA);
    this.bytesStmt = this.db.prepare(
      `SELECT coalesce(sum(${VARIABLE_BYTES}), 0) + ${ROW_OVERHEAD_BYTES} * count(*) AS bytes FROM records`,
    );
    this.pruneOldestStmt = this.db.prepare(
      'DELETE FROM records WHERE id IN (SELECT id FROM records ORDER BY id LIMIT ?)',
    );
    this.storedBytes = this.countBytes();
    this.insertStmt = this.db.prepare(
      `INSERT INTO records (received_at, client_id, url, mode, scheduler, sources, bytes, duration_ms, goodput_bps,
         normalized_goodput, status, error, proxies)
       VALUES (@receivedAt, @clientId, @url, @mode, @scheduler, @sources, @bytes, @durationMs, @goodputBps,
         @normalizedGoodput, @status, @error, @proxies)`,
    );
    this.recentStmt = this.db.prepare('SELECT * FROM records ORDER BY id DESC LIMIT ?');
    this.recentByModeStmt = this.db.prepare('SELECT * FROM records WHERE mode = ? ORDER BY id DESC LIMIT ?');
    this.pruneStmt = this.db.prepare('DELETE FROM records WHERE id <= (SELECT MAX(id) FROM records) - ?');
  }

  insert(clientId: string, record: DownloadRecord, receivedAt: number): number {
    const result = this.insertStmt.run({
      receivedAt,
      clientId,
      url: record.url,
      mode: record.mode,
      scheduler: record.scheduler ?? null,
      sources: record.sources,
      bytes: record.bytes,
      durationMs: record.durationMs,
      goodputBps: record.goodputBps,
      normalizedGoodput: record.normalizedGoodput,
      status: record.status,
      error: record.error ?? null,
      proxies: JSON.stringify(record.proxies),
    });
    if (++this.sincePrune >= PRUNE_EVERY) {
      this.sincePrune = 0;
      this.pruneStmt.run(this.maxRows);
    }
    return Number(result.lastInsertRowid);
  }

  /** Writes a batch in one transaction (all or nothing), then prunes beyond the byte cap. */
  insertBatch(batch: readonly PendingRecord[]): void {
    this.db.transaction(() => {
      for (const r of batch) this.insert(r.clientId, r.record, r.receivedAt);
    })();
    for (const r of batch) this.storedBytes += recordBytes(r.record);
    if (this.storedBytes > this.maxBytes) this.pruneBytes();
  }

  get bytes(): number {
    return this.storedBytes;
  }

  /** Drops the oldest rows until the table is under 90 % of the byte cap (so prunes stay rare). */
  private pruneBytes(): void {
    const target = this.maxBytes * 0.9;
    while (this.storedBytes > target) {
      const rows = Math.max(1, Math.ceil(((this.storedBytes - target) / this.storedBytes) * this.countRows()));
      if (this.pruneOldestStmt.run(rows).changes === 0) break;
      this.storedBytes = this.countBytes();
    }
  }

  private countBytes(): number {
    return (this.bytesStmt.get() as { bytes: number }).bytes;
  }

  private countRows(): number {
    return (this.db.prepare('SELECT count(*) AS n FROM records').get() as { n: number }).n;
  }

  /** The most recent records first, optionally of one mode. */
  recent(limit: number, mode?: RecordMode): StoredRecord[] {
    const rows = (mode === undefined ? this.recentStmt.all(limit) : this.recentByModeStmt.all(mode, limit)) as Row[];
    return rows.map(fromRow);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

function fromRow(row: Row): StoredRecord {
  const record: StoredRecord = {
    id: row.id,
    receivedAt: new Date(row.received_at).toISOString(),
    clientId: row.client_id,
    url: row.url,
    mode: row.mode,
    sources: row.sources,
    bytes: row.bytes,
    durationMs: row.duration_ms,
    goodputBps: row.goodput_bps,
    normalizedGoodput: row.normalized_goodput,
    status: row.status,
    proxies: JSON.parse(row.proxies) as DownloadRecord['proxies'],
  };
  if (row.scheduler !== null) record.scheduler = row.scheduler;
  if (row.error !== null) record.error = row.error;
  return record;
}
