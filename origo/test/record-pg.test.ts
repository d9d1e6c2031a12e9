/**
 * Download records in PostgreSQL (record-pg.ts, `--records`), against a private PostgreSQL cluster
 * on loopback (@mutp/testing/postgres), one fresh database per test: the same rows and results as
 * SQLite, migrations applied once when two stores start together, the row and byte caps, and an
 * origo that keeps serving while PostgreSQL is down or hung (records shed and counted,
 * /v1/records 503), then stores again once it is back. Also the flag itself.
 */
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Client } from 'pg';
import pino from 'pino';
import { DownloadRecord } from '@mutp/shared';
import { PostgresServer, startPostgres } from '@mutp/testing/postgres';
import { RecordDatabase } from '../src/records/record-db';
import { PgRecordStore, RecordPgOptions } from '../src/records/record-pg';
import { PendingRecord, recordBytes } from '../src/records/records';
import {
  ADMIN,
  barrier,
  closeAll,
  connectClient,
  connectProxy,
  getJson,
  heartbeat,
  LogLine,
  proxyBarrier,
  requestProxies,
  startOrigo,
  track,
  within,
} from './helpers';

let pg: PostgresServer;
beforeAll(async () => {
  pg = await startPostgres();
}, 60_000);
afterAll(async () => {
  await pg?.stop();
});
afterEach(closeAll);

function record(url: string, extra: Partial<DownloadRecord> = {}): DownloadRecord {
  return {
    url,
    mode: 'rlnc',
    sources: 1,
    bytes: 1_000_000,
    durationMs: 500,
    goodputBps: 2_000_000,
    normalizedGoodput: 0.95,
    status: 'complete',
    proxies: [{ proxyId: 'edge-1', received: 10, useful: 10, share: 1 }],
    ...extra,
  };
}

function capture(): { log: pino.Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { log, lines };
}

function pgStore(options: Partial<RecordPgOptions> & { url: string }, log = capture().log): PgRecordStore {
  const store = new PgRecordStore({ maxRows: 1000, maxBytes: 1 << 20, ...options }, log);
  track({ close: () => store.close() });
  return store;
}

/** One query on its own connection (what an operator's psql would see). */
async function sql<R>(url: string, text: string): Promise<R[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows as R[];
  } finally {
    await client.end();
  }
}

/** Records sent by a client origo offered edge-1 to are accepted at any rate these tests need. */
const FAST_RECORDS = {
  recordRatePerSecond: 1000,
  recordBurst: 1000,
  recordRatePerAddress: 1000,
  recordBurstPerAddress: 1000,
};

/** `db: undefined` undoes the helpers' in-memory SQLite default. */
async function origoOnPostgres(recordsUrl: string, extra: object = {}) {
  return startOrigo({ db: undefined, recordsUrl, ...FAST_RECORDS, ...extra });
}

function shed(metrics: string, reason: string): number {
  const match = new RegExp(`mutp_origo_records_shed_total\\{reason="${reason}"\\} (\\d+)`).exec(metrics);
  return match ? Number(match[1]) : 0;
}

describe('the PostgreSQL store', () => {
  test('stores and reads back exactly what the SQLite store does', async () => {
    const store = pgStore({ url: await pg.createDatabase() });
    const sqlite = new RecordDatabase({ path: ':memory:', maxRows: 1000, maxBytes: 1 << 20, busyTimeoutMs: 50 });
    track({ close: () => sqlite.close() });
    await Promise.all([store.ready, sqlite.ready]);
    const batch: PendingRecord[] = [
      { clientId: 'c-1', receivedAt: 1_700_000_000_123, record: record('https://a.test/1') },
      {
        clientId: 'c-2',
        receivedAt: 1_700_000_001_456,
        record: record('https://a.test/2?q="quoted",{braces}\\', {
          mode: 'fountain',
          scheduler: 'deadline',
          sources: 3,
          bytes: 2 ** 31,
          durationMs: 12.5,
          goodputBps: 1e-3,
          normalizedGoodput: 1 / 3,
          status: 'failed',
          error: "origin answered 503, l'erreur",
          proxies: [
            { proxyId: 'edge-1', received: 5, useful: 4, share: 1 / 3 },
            { proxyId: 'edge-2', received: 7, useful: 7, share: 2 / 3 },
          ],
        }),
      },
      {
        clientId: 'c-1',
        receivedAt: 1_700_000_002_000,
        record: record('https://a.test/3', { mode: 'http', proxies: [] }),
      },
    ];
    await store.insertBatch(batch);
    await sqlite.insertBatch(batch);
    const fromPg = await store.recent(10);
    expect(fromPg.map((r) => r.url)).toEqual([
      'https://a.test/3',
      'https://a.test/2?q="quoted",{braces}\\',
      'https://a.test/1',
    ]);
    expect(fromPg).toEqual(await sqlite.recent(10));
    expect(await store.recent(10, 'fountain')).toEqual(await sqlite.recent(10, 'fountain'));
    expect(await store.recent(1)).toEqual(await sqlite.recent(1));
    expect(await store.recent(10, 'uncoded')).toEqual([]);
  });

  test('two stores migrating at once apply each migration once; a later one finds nothing to do', async () => {
    const url = await pg.createDatabase();
    const logs = [capture(), capture(), capture()];
    const first = pgStore({ url }, logs[0].log);
    const second = pgStore({ url }, logs[1].log);
    await Promise.all([first.ready, second.ready]);
    const third = pgStore({ url }, logs[2].log);
    await third.ready;
    const applied = logs.map(({ lines }) => lines.filter((l) => l.msg === 'records database: migrations applied'));
    expect(applied.flat()).toHaveLength(1);
    expect(applied[2]).toEqual([]);
    for (const { lines } of logs) {
      expect(lines.filter((l) => l.level >= 40)).toEqual([]);
      expect(lines.some((l) => l.msg === 'records database ready')).toBe(true);
    }
    expect(await sql(url, 'SELECT version, name FROM mutp_schema_migrations')).toEqual([
      { version: 1, name: 'records' },
    ]);
    // All three write to the one table.
    for (const [i, store] of [first, second, third].entries()) {
      await store.insertBatch([{ clientId: `c-${i}`, receivedAt: 1000 + i, record: record(`https://a.test/${i}`) }]);
    }
    expect((await third.recent(10)).map((r) => r.clientId)).toEqual(['c-2', 'c-1', 'c-0']);
  });

  test('keeps the newest maxRows rows, and prunes the oldest beyond maxBytes down to 90 %', async () => {
    const byRows = pgStore({ url: await pg.createDatabase(), maxRows: 5, pruneIntervalMs: 0 });
    await byRows.ready;
    const pending = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => ({
        clientId: 'c',
        receivedAt: from + i,
        record: record(`https://a.test/${from + i}`),
      }));
    await byRows.insertBatch(pending(1, 4));
    await byRows.insertBatch(pending(5, 4));
    expect((await byRows.recent(100)).map((r) => r.url)).toEqual([8, 7, 6, 5, 4].map((i) => `https://a.test/${i}`));

    const url = await pg.createDatabase();
    const rowBytes = recordBytes(record('https://a.test/10')); // every URL below has this length
    const byBytes = pgStore({ url, maxBytes: Math.floor(10.5 * rowBytes) });
    await byBytes.ready;
    await byBytes.insertBatch(pending(10, 20));
    // 20 rows exceed 10.5 rows' worth; pruning stops at or below 9.45 rows' worth: 9 rows.
    expect((await byBytes.recent(100)).map((r) => r.url)).toEqual(
      Array.from({ length: 9 }, (_, i) => `https://a.test/${29 - i}`),
    );
    const [usage] = await sql<{ counted: string; actual: string }>(
      url,
      'SELECT (SELECT bytes FROM mutp_records_usage) AS counted, (SELECT sum(row_bytes) FROM mutp_records) AS actual',
    );
    expect(Number(usage.counted)).toBe(9 * rowBytes);
    expect(usage.actual).toBe(usage.counted);
  });

  test('tables dropped under a running store (database restored or replaced): the next batch migrates again', async () => {
    const url = await pg.createDatabase();
    const store = pgStore({ url });
    await store.ready;
    await store.insertBatch([{ clientId: 'c', receivedAt: 1, record: record('https://a.test/old') }]);
    await sql(url, 'DROP TABLE mutp_records, mutp_records_usage, mutp_schema_migrations');
    const batch = [{ clientId: 'c', receivedAt: 2, record: record('https://a.test/new') }];
    await expect(store.insertBatch(batch)).rejects.toThrow('does not exist');
    await store.insertBatch(batch);
    expect((await store.recent(10)).map((r) => r.url)).toEqual(['https://a.test/new']);
  });
});

describe('origo on PostgreSQL', () => {
  test('records round-trip; PostgreSQL down: origo serves, sheds and counts, answers 503; back: stores again', async () => {
    const { port, http, origo, logs } = await origoOnPostgres(await pg.createDatabase(), {
      heartbeatIntervalMs: 200,
      heartbeatTimeoutMs: 600,
    });
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    // The proxy keeps its heartbeats up all along: missing them would cost it its registration.
    const beating = setInterval(() => heartbeat(proxy, 0, 0, 1_000_000), 100);
    try {
      const client = await connectClient(port);
      await requestProxies(client, 1);
      client.send({ type: 'record', record: record('https://media.test/before') });
      await barrier(client);
      await origo.flushRecords();
      const listed = await getJson(`${http}/v1/records?limit=10`, ADMIN);
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({
        records: [
          {
            ...record('https://media.test/before'),
            id: 1,
            clientId: client.id,
            receivedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
          },
        ],
      });

      await pg.kill();
      for (let i = 0; i < 3; i++) client.send({ type: 'record', record: record('https://media.test/during') });
      await barrier(client);
      await origo.flushRecords();
      const metrics = await origo.metrics.registry.metrics();
      expect(shed(metrics, 'db-error')).toBeGreaterThanOrEqual(3);
      expect(metrics).toMatch(/mutp_origo_records_db_connections\{state="total"\} \d/);
      const down = await within(getJson(`${http}/v1/records`, ADMIN), '/v1/records with PostgreSQL down');
      expect(down.status).toBe(503);
      expect(down.body).toMatchObject({ error: 'database-unavailable' });
      // Signalling goes on: heartbeats are handled, a new client is welcomed, proxies are offered.
      await proxyBarrier(proxy);
      const another = await connectClient(port, 'another client');
      expect(await requestProxies(another, 1)).toEqual(['edge-1']);

      await pg.start();
      // The writer backs off after a failure (1 s, doubling): offer records until one is stored.
      const deadline = Date.now() + 15_000;
      let stored: { url: string }[] = [];
      while (!stored.some((r) => r.url === 'https://media.test/after')) {
        if (Date.now() > deadline) {
          throw new Error(
            `no record stored within 15 s of PostgreSQL coming back; logs: ${JSON.stringify(logs.slice(-20))}`,
          );
        }
        client.send({ type: 'record', record: record('https://media.test/after') });
        await barrier(client);
        await origo.flushRecords();
        const now = await getJson(`${http}/v1/records?limit=100`, ADMIN);
        if (now.status === 200) stored = (now.body as { records: { url: string }[] }).records;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(stored.some((r) => r.url === 'https://media.test/during')).toBe(false);
      expect(stored.at(-1)?.url).toBe('https://media.test/before');
      expect(proxy.closeEvent).toBeUndefined();
      expect(origo.counts().proxies).toBe(1);
    } finally {
      clearInterval(beating);
    }
  }, 30_000);

  test('PostgreSQL down at start: origo starts at once, and migrates before the first batch once it is back', async () => {
    const url = await pg.createDatabase();
    await pg.kill();
    let restarted = false;
    try {
      const { port, origo, logs, http } = await within(origoOnPostgres(url), 'origo to start without PostgreSQL');
      expect(logs.some((l) => l.msg.startsWith('records database unavailable at start') && l.level === 50)).toBe(true);
      await pg.start();
      restarted = true;
      await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
      const client = await connectClient(port);
      await requestProxies(client, 1);
      client.send({ type: 'record', record: record('https://media.test/first') });
      await barrier(client);
      await origo.flushRecords();
      const listed = await getJson(`${http}/v1/records`, ADMIN);
      expect((listed.body as { records: { url: string }[] }).records.map((r) => r.url)).toEqual([
        'https://media.test/first',
      ]);
      expect(logs.some((l) => l.msg === 'records database: migrations applied')).toBe(true);
    } finally {
      if (!restarted) await pg.start();
    }
  }, 30_000);

  test('a hung PostgreSQL costs /v1/records a bounded wait and a 503; heartbeats and hellos go on', async () => {
    const { port, origo, http } = await origoOnPostgres(await pg.createDatabase());
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    await requestProxies(client, 1);
    client.send({ type: 'record', record: record('https://media.test/before') });
    await barrier(client);
    await origo.flushRecords(); // the pool now holds an open connection that will hang
    pg.pause();
    try {
      const listing = getJson(`${http}/v1/records`, ADMIN);
      client.send({ type: 'record', record: record('https://media.test/hung') });
      await barrier(client);
      const writing = origo.flushRecords();
      // While both wait for PostgreSQL, the event loop serves everyone else.
      heartbeat(proxy, 0, 0, 1_000_000);
      await proxyBarrier(proxy);
      await connectClient(port, 'another client');
      const answer = await within(listing, '/v1/records on a hung PostgreSQL', 10_000);
      expect(answer.status).toBe(503);
      await within(writing, 'the writer to give up on a hung PostgreSQL', 10_000);
      expect(shed(await origo.metrics.registry.metrics(), 'db-error')).toBe(1);
    } finally {
      pg.resume();
    }
  }, 30_000);
});

describe('the --records flag', () => {
  const MAIN = join(__dirname, '../src/main.ts');
  const ROOT = join(__dirname, '../..');
  // Neither store's variable from the caller's environment: the flags under test decide.
  const env: NodeJS.ProcessEnv = { ...process.env, MUTP_PROXY_SECRET: 'test-proxy-secret' };
  delete env.MUTP_ORIGO_DB;
  delete env.MUTP_ORIGO_RECORDS;

  test('--records with --db, or not a PostgreSQL URL, is a bad-flags error (exit 2)', () => {
    const run = (args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', MAIN, '--port', '0', ...args], {
        encoding: 'utf8',
        cwd: ROOT,
        env,
        timeout: 30_000,
      });
    const both = run(['--records', 'postgres://u@127.0.0.1:1/db', '--db', 'x.sqlite']);
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('not both');
    const other = run(['--records', 'mysql://u@127.0.0.1/db']);
    expect(other.status).toBe(2);
    expect(other.stderr).toContain('--records must be a postgres:// or postgresql:// URL');
  }, 60_000);

  test('MUTP_ORIGO_RECORDS: origo logs the store without its password, and exits 0 on SIGTERM', async () => {
    const url = (await pg.createDatabase()).replace('postgres@', 'postgres:s3cret-pw@');
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--port', '0'], {
      cwd: ROOT,
      env: { ...env, MUTP_ORIGO_RECORDS: url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track({
      close: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      },
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    while (!output.includes('"origo listening"')) {
      if (child.exitCode !== null) throw new Error(`origo exited before listening: ${output}`);
      if (Date.now() > deadline) throw new Error(`origo did not log 'origo listening' within 30 s: ${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const line = output.split('\n').find((l) => l.includes('"origo listening"'))!;
    expect((JSON.parse(line) as { records: string }).records).toBe(url.replace('s3cret-pw', '***'));
    child.kill('SIGTERM');
    expect(await within(exited, 'origo to exit after SIGTERM', 15_000)).toBe(0);
    expect(output).not.toContain('s3cret-pw');
  }, 60_000);
});
