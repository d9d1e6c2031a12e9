/**
 * Download records in PostgreSQL (`--records postgres://…`), so that several origo instances can
 * share one store. The rows and the `recent()` results are those of the SQLite store (records.ts).
 * node-postgres only waits on sockets, so no worker thread is needed; every wait is bounded
 * (connect, statement and query timeouts) and only the record writer and `/v1/records` ever wait.
 *
 * PostgreSQL down never stops origo. Start-up waits for the migrations at most `startWaitMs`; when
 * they fail they are tried again before the next batch (the writer's back-off spaces the tries).
 * A batch that fails is rejected, and the writer sheds and counts it. Each batch is one INSERT
 * statement over arrays (unnest), never values spliced into SQL. Rows beyond `maxRows` and bytes
 * beyond `maxBytes` are pruned after inserts, at most every `pruneIntervalMs` for the row cap.
 */
import path from 'node:path';
import { Pool } from 'pg';
import type { Logger } from 'pino';
import { Gauge, Registry } from 'prom-client';
import { DownloadRecord } from '@mutp/shared';
import { loadMigrations, migrate, Migration } from './pg-migrations';
import type { RecordBackend } from './record-backend';
import { PendingRecord, RecordMode, recordBytes, StoredRecord } from './records';
import { redactUrl } from '../redact-url';

export interface RecordPgOptions {
  /** postgres:// or postgresql:// URL (password, sslmode… as libpq; PG* environment variables apply). */
  url: string;
  maxRows: number;
  maxBytes: number;
  /** Connections at most: one batch at a time plus admin reads need few. */
  poolSize?: number;
  /** Opening a connection (TCP, TLS, authentication) at most this long. */
  connectTimeoutMs?: number;
  /** A statement at most this long (server side), and the client waits a second more for its answer. */
  statementTimeoutMs?: number;
  /** How long the migrations may take (their lock wait included) before they are given up and retried. */
  migrationTimeoutMs?: number;
  /** How long start-up waits for the migrations before origo listens anyway. */
  startWaitMs?: number;
  /** The row cap is enforced at most this often (the byte cap after any insert that exceeds it). */
  pruneIntervalMs?: number;
  migrationsDir?: string;
}

export const PG_DEFAULTS = {
  poolSize: 4,
  connectTimeoutMs: 2000,
  statementTimeoutMs: 2000,
  migrationTimeoutMs: 15_000,
  startWaitMs: 5000,
  pruneIntervalMs: 5000,
  migrationsDir: path.join(__dirname, '..', '..', 'migrations', 'postgres'),
};

/** SQLSTATE of a missing table. */
const UNDEFINED_TABLE = '42P01';

/** Rows one pruning statement deletes at most (bounded statements); a prune runs a few of them. */
const PRUNE_CHUNK = 5000;
const PRUNE_CHUNKS = 10;

const INSERT = `
WITH inserted AS (
  INSERT INTO mutp_records (received_at, client_id, url, mode, scheduler, sources, bytes, duration_ms, goodput_bps,
    normalized_goodput, status, error, proxies, row_bytes)
  SELECT received_at, client_id, url, mode, scheduler, sources, bytes, duration_ms, goodput_bps,
    normalized_goodput, status, error, proxies, row_bytes
  FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::bigint[],
    $8::float8[], $9::float8[], $10::float8[], $11::text[], $12::text[], $13::jsonb[], $14::integer[])
    WITH ORDINALITY AS batch (received_at, client_id, url, mode, scheduler, sources, bytes, duration_ms, goodput_bps,
      normalized_goodput, status, error, proxies, row_bytes, position)
  ORDER BY position
  RETURNING row_bytes
)
UPDATE mutp_records_usage SET bytes = bytes + (SELECT coalesce(sum(row_bytes), 0) FROM inserted)
RETURNING bytes`;

/** Deletes rows more than $1 ids below the newest, oldest first, at most $2 of them. */
const PRUNE_ROWS = `
WITH doomed AS (
  SELECT id FROM mutp_records WHERE id <= (SELECT max(id) FROM mutp_records) - $1 ORDER BY id LIMIT $2
), pruned AS (
  DELETE FROM mutp_records WHERE id IN (SELECT id FROM doomed) RETURNING row_bytes
)
UPDATE mutp_records_usage SET bytes = bytes - (SELECT coalesce(sum(row_bytes), 0) FROM pruned)
RETURNING bytes, (SELECT count(*) FROM pruned) AS pruned`;

/** Deletes the oldest rows (at most $2) that together free at least $1 bytes. */
const PRUNE_BYTES = `
WITH oldest AS (
  SELECT id, row_bytes FROM mutp_records ORDER BY id LIMIT $2
), doomed AS (
  SELECT id FROM (SELECT id, sum(row_bytes) OVER (ORDER BY id) - row_bytes AS before FROM oldest) o WHERE before < $1
), pruned AS (
  DELETE FROM mutp_records WHERE id IN (SELECT id FROM doomed) RETURNING row_bytes
)
UPDATE mutp_records_usage SET bytes = bytes - (SELECT coalesce(sum(row_bytes), 0) FROM pruned)
RETURNING bytes, (SELECT count(*) FROM pruned) AS pruned`;

const COLUMNS =
  'id, received_at, client_id, url, mode, scheduler, sources, bytes, duration_ms, goodput_bps, normalized_goodput, status, error, proxies';
const RECENT = `SELECT ${COLUMNS} FROM mutp_records ORDER BY id DESC LIMIT $1`;
const RECENT_BY_MODE = `SELECT ${COLUMNS} FROM mutp_records WHERE mode = $2 ORDER BY id DESC LIMIT $1`;

interface Row {
  /** id and bytes are bigint: node-postgres returns those as strings. */
  id: string;
  received_at: Date;
  client_id: string;
  url: string;
  mode: RecordMode;
  scheduler: string | null;
  sources: number;
  bytes: string;
  duration_ms: number;
  goodput_bps: number;
  normalized_goodput: number;
  status: DownloadRecord['status'];
  error: string | null;
  proxies: DownloadRecord['proxies'];
}

export class PgRecordStore implements RecordBackend {
  /** Resolves once the migrations are applied, failed, or took longer than startWaitMs: never rejects. */
  readonly ready: Promise<void>;
  private readonly options: Required<RecordPgOptions>;
  private readonly pool: Pool;
  /** The migrations in progress or done; unset again when they fail, so the next batch tries again. */
  private schema?: Promise<void>;
  private migrations?: Migration[];
  private lastPrune = -Infinity;
  private closed = false;

  constructor(
    options: RecordPgOptions,
    private readonly log: Logger,
    registry?: Registry,
  ) {
    this.options = { ...PG_DEFAULTS, ...options };
    const o = this.options;
    this.pool = new Pool({
      connectionString: o.url,
      max: o.poolSize,
      connectionTimeoutMillis: o.connectTimeoutMs,
      statement_timeout: o.statementTimeoutMs,
      // A server that stops answering (hung, or the network gone) is noticed by the client too.
      query_timeout: o.statementTimeoutMs + 1000,
      // An origo that dies inside the migrations' transaction does not hold their lock for long.
      idle_in_transaction_session_timeout: o.migrationTimeoutMs,
      idleTimeoutMillis: 30_000,
      keepAlive: true,
      application_name: 'mutp-origo',
    });
    // Idle connections that break (server restarted, network cut) are reported here; the pool
    // drops them and opens new ones when asked. Never fatal.
    this.pool.on('error', (err) => this.log.warn({ err }, 'records database: an idle connection failed'));
    if (registry !== undefined) this.registerMetrics(registry);
    this.ready = this.start();
  }

  async insertBatch(batch: readonly PendingRecord[]): Promise<void> {
    if (this.closed) throw new Error('records database closed');
    if (batch.length === 0) return;
    await this.ensureSchema();
    const result = await this.pool.query<{ bytes: string }>(INSERT, batchColumns(batch)).catch((err: unknown) => {
      // The tables are gone (a database restored or replaced under us): migrate again before the next batch.
      if ((err as { code?: string }).code === UNDEFINED_TABLE) this.schema = undefined;
      throw err;
    });
    const storedBytes = Number(result.rows[0]?.bytes ?? 0);
    if (storedBytes > this.options.maxBytes || performance.now() - this.lastPrune >= this.options.pruneIntervalMs) {
      // The batch is stored: a failed prune is only logged, and tried again with a later batch.
      await this.prune(storedBytes).catch((err: unknown) => this.log.warn({ err }, 'records database: pruning failed'));
    }
  }

  async recent(limit: number, mode?: RecordMode): Promise<StoredRecord[]> {
    if (this.closed) throw new Error('records database closed');
    const result =
      mode === undefined
        ? await this.pool.query<Row>(RECENT, [limit])
        : await this.pool.query<Row>(RECENT_BY_MODE, [limit, mode]);
    return result.rows.map(fromRow);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  private async start(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<'waited'>((resolve) => {
      timer = setTimeout(() => resolve('waited'), this.options.startWaitMs);
    });
    const store = redactUrl(this.options.url);
    try {
      const outcome = await Promise.race([this.ensureSchema().then(() => 'migrated' as const), waited]);
      if (outcome === 'waited') {
        this.log.warn(
          { records: store, waitedMs: this.options.startWaitMs },
          'records database: migrations not done yet; starting anyway (the first batch waits for them)',
        );
      } else {
        this.log.info({ records: store }, 'records database ready');
      }
    } catch (err) {
      this.log.error(
        { err, records: store },
        'records database unavailable at start: origo runs, records are shed; migrations are tried again before the next batch',
      );
    } finally {
      clearTimeout(timer);
    }
  }

  private ensureSchema(): Promise<void> {
    if (this.schema === undefined) {
      const attempt: Promise<void> = this.migrate().catch((err: unknown) => {
        if (this.schema === attempt) this.schema = undefined;
        throw err;
      });
      this.schema = attempt;
    }
    return this.schema;
  }

  private async migrate(): Promise<void> {
    this.migrations ??= await loadMigrations(this.options.migrationsDir);
    const { applied, unknown } = await migrate(this.pool, this.migrations, this.options.migrationTimeoutMs);
    if (applied.length > 0) this.log.info({ versions: applied }, 'records database: migrations applied');
    if (unknown.length > 0) {
      this.log.warn(
        { versions: unknown },
        'records database: schema has migrations this origo does not know (newer origo?)',
      );
    }
  }

  /** Enforces the row cap, then the byte cap (down to 90 % of it, so byte prunes stay rare). */
  private async prune(storedBytes: number): Promise<void> {
    this.lastPrune = performance.now();
    let bytes = storedBytes;
    for (let i = 0; i < PRUNE_CHUNKS; i++) {
      const { rows } = await this.pool.query<{ bytes: string; pruned: string }>(PRUNE_ROWS, [
        this.options.maxRows,
        PRUNE_CHUNK,
      ]);
      bytes = Number(rows[0]?.bytes ?? bytes);
      if (Number(rows[0]?.pruned ?? 0) < PRUNE_CHUNK) break;
    }
    if (bytes <= this.options.maxBytes) return;
    const target = this.options.maxBytes * 0.9;
    for (let i = 0; i < PRUNE_CHUNKS && bytes > target; i++) {
      const { rows } = await this.pool.query<{ bytes: string; pruned: string }>(PRUNE_BYTES, [
        Math.ceil(bytes - target),
        PRUNE_CHUNK,
      ]);
      bytes = Number(rows[0]?.bytes ?? bytes);
      if (Number(rows[0]?.pruned ?? 0) === 0) break;
    }
  }

  private registerMetrics(registry: Registry): void {
    const pool = this.pool;
    new Gauge({
      name: 'mutp_origo_records_db_connections',
      help: 'Connections to the PostgreSQL records database, by state (total, idle, waiting: requests queued for one)',
      labelNames: ['state'] as const,
      registers: [registry],
      collect() {
        this.set({ state: 'total' }, pool.totalCount);
        this.set({ state: 'idle' }, pool.idleCount);
        this.set({ state: 'waiting' }, pool.waitingCount);
      },
    });
  }
}

/** The batch as one array per column, in the order of INSERT's parameters. */
function batchColumns(batch: readonly PendingRecord[]): unknown[][] {
  const columns: unknown[][] = Array.from({ length: 14 }, () => []);
  for (const { clientId, record, receivedAt } of batch) {
    const values = [
      new Date(receivedAt).toISOString(),
      clientId,
      record.url,
      record.mode,
      record.scheduler ?? null,
      record.sources,
      record.bytes,
      record.durationMs,
      record.goodputBps,
      record.normalizedGoodput,
      record.status,
      record.error ?? null,
      JSON.stringify(record.proxies),
      recordBytes(record),
    ];
    values.forEach((value, i) => columns[i].push(value));
  }
  return columns;
}

function fromRow(row: Row): StoredRecord {
  const record: StoredRecord = {
    id: Number(row.id),
    receivedAt: row.received_at.toISOString(),
    clientId: row.client_id,
    url: row.url,
    mode: row.mode,
    sources: row.sources,
    bytes: Number(row.bytes),
    durationMs: row.duration_ms,
    goodputBps: row.goodput_bps,
    normalizedGoodput: row.normalized_goodput,
    status: row.status,
    proxies: row.proxies,
  };
  if (row.scheduler !== null) record.scheduler = row.scheduler;
  if (row.error !== null) record.error = row.error;
  return record;
}
