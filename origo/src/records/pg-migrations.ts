/**
 * Schema migrations of origo's PostgreSQL tables: the SQL files `NNN_name.sql` of a directory
 * (origo/migrations/postgres), applied in order of NNN, each once, recorded in
 * `mutp_schema_migrations`. Several origo instances may start at once against one database: all
 * of it runs in one transaction that first takes a transaction-scoped advisory lock, so one
 * instance migrates and the others then find nothing left to do. A failure rolls everything
 * back (and releases the lock); the caller tries again later.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Pool, PoolClient, QueryConfig, QueryResultRow } from 'pg';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Key of the advisory lock migrations hold (any constant shared by every origo: 'mutp' in ASCII). */
const MIGRATION_LOCK = 0x6d757470;

const FILE_NAME = /^(\d{3})_([a-z0-9_]+)\.sql$/;

/** Reads the migrations of `dir` in version order; throws on a misnamed file or a repeated version. */
export async function loadMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = FILE_NAME.exec(file);
    if (match === null) throw new Error(`migration file ${file} is not named NNN_name.sql`);
    const version = Number(match[1]);
    if (migrations.some((m) => m.version === version)) throw new Error(`two migrations have version ${match[1]}`);
    migrations.push({ version, name: match[2], sql: await readFile(path.join(dir, file), 'utf8') });
  }
  return migrations;
}

export interface MigrationOutcome {
  /** Versions this call applied (empty when the schema was up to date). */
  applied: number[];
  /** Versions the database has that this origo does not know (a newer origo migrated it). */
  unknown: number[];
}

/**
 * Applies the migrations the database lacks, in one transaction under the advisory lock. Every
 * statement, the wait for the lock included, is bounded by `timeoutMs`.
 */
export async function migrate(
  pool: Pool,
  migrations: readonly Migration[],
  timeoutMs: number,
): Promise<MigrationOutcome> {
  const client = await pool.connect();
  // A checked-out client that loses its connection between two queries emits 'error'; without a
  // listener that would crash origo. The next query fails anyway, so only remember it.
  let broken: Error | undefined;
  const onError = (err: Error) => (broken = err);
  client.on('error', onError);
  // node-postgres honours a per-query query_timeout (client side); its types do not list it.
  const query = <R extends QueryResultRow>(text: string, values?: unknown[]) =>
    client.query<R>({ text, values, query_timeout: timeoutMs + 1000 } as QueryConfig);
  try {
    await query('BEGIN');
    await query(`SELECT set_config('statement_timeout', $1, true)`, [String(timeoutMs)]);
    await query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await query(`CREATE TABLE IF NOT EXISTS mutp_schema_migrations (
      version    integer     PRIMARY KEY,
      name       text        NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const done = new Set(
      (await query<{ version: number }>('SELECT version FROM mutp_schema_migrations')).rows.map((r) => r.version),
    );
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      await query(m.sql);
      await query('INSERT INTO mutp_schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    await query('COMMIT');
    const known = new Set(migrations.map((m) => m.version));
    return { applied, unknown: [...done].filter((v) => !known.has(v)).sort((a, b) => a - b) };
  } catch (err) {
    broken ??= await rollback(client);
    throw err;
  } finally {
    client.release(broken);
    client.removeListener('error', onError);
  }
}

/** Rolls back; a connection that cannot even do that is returned as the error (the pool drops it). */
async function rollback(client: PoolClient): Promise<Error | undefined> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}
