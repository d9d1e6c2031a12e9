/**
 * The records database on its own thread (record-db.ts): writes and reads go through the worker,
 * a locked database keeps the event loop turning while the write waits for the lock, a database
 * that cannot be opened says why, and a write that fails reaches the writer, which sheds and backs
 * off.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pino from 'pino';
import { Counter, Registry } from 'prom-client';
import { DownloadRecord } from '@mutp/shared';
import { RecordDatabase } from '../src/records/record-db';
import { DEFAULT_WRITER, RecordWriter } from '../src/records/record-writer';

const record = (url: string): DownloadRecord => ({
  url,
  mode: 'rlnc',
  sources: 1,
  bytes: 1000,
  durationMs: 10,
  goodputBps: 800_000,
  normalizedGoodput: 0.9,
  status: 'complete',
  proxies: [{ proxyId: 'edge-1', received: 1, useful: 1, share: 1 }],
});

const open: RecordDatabase[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((db) => db.close()));
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function database(path: string, busyTimeoutMs = 50): RecordDatabase {
  const db = new RecordDatabase({ path, maxRows: 1000, maxBytes: 1 << 20, busyTimeoutMs });
  open.push(db);
  return db;
}

function tempFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'origo-records-'));
  dirs.push(dir);
  return join(dir, 'records.sqlite');
}

test('batches are written and read back through the database thread', async () => {
  const db = database(':memory:');
  await db.ready;
  await db.insertBatch([
    { clientId: 'c-1', record: record('https://a.test/1'), receivedAt: 1000 },
    { clientId: 'c-2', record: record('https://a.test/2'), receivedAt: 2000 },
  ]);
  const recent = await db.recent(10);
  expect(recent.map((r) => [r.clientId, r.url])).toEqual([
    ['c-2', 'https://a.test/2'],
    ['c-1', 'https://a.test/1'],
  ]);
  expect(await db.recent(10, 'http')).toEqual([]);
});

test('while a write waits for a locked database, the event loop keeps running', async () => {
  const file = tempFile();
  const db = database(file, 10_000);
  await db.ready;
  const locker = new Database(file, { timeout: 0 });
  try {
    locker.exec('BEGIN EXCLUSIVE');
    let outcome = 'pending';
    const write = db.insertBatch([{ clientId: 'c', record: record('https://a.test/x'), receivedAt: 1 }]).then(
      () => (outcome = 'stored'),
      (err: Error) => (outcome = `failed: ${err.message}`),
    );
    // With SQLite on the event loop, this timer could not fire before the write gave up.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(outcome).toBe('pending');
    locker.exec('ROLLBACK');
    await write;
    expect(outcome).toBe('stored');
    expect((await db.recent(1))[0].url).toBe('https://a.test/x');
  } finally {
    if (locker.inTransaction) locker.exec('ROLLBACK');
    locker.close();
  }
});

test('a database that cannot be opened says why', async () => {
  const db = database(join(tmpdir(), 'no-such-dir-for-origo', 'records.sqlite'));
  await expect(db.ready).rejects.toThrow(/directory does not exist|unable to open/);
  await expect(db.recent(1)).rejects.toThrow();
});

test('a failed write is shed and counted, and the writer backs off instead of retrying', async () => {
  const file = tempFile();
  const db = database(file, 0);
  await db.ready;
  const registry = new Registry();
  const stored = new Counter({ name: 'stored', help: 'stored', registers: [registry] });
  const shed = new Counter({ name: 'shed', help: 'shed', labelNames: ['reason'], registers: [registry] });
  let now = 0;
  const writer = new RecordWriter(db, DEFAULT_WRITER, { log: pino({ level: 'silent' }), stored, shed, now: () => now });
  const locker = new Database(file, { timeout: 0 });
  try {
    locker.exec('BEGIN EXCLUSIVE');
    expect(writer.offer('c', record('https://a.test/1'), 1)).toBe(true);
    await writer.flush();
    expect((await shed.get()).values).toEqual([expect.objectContaining({ labels: { reason: 'db-error' }, value: 1 })]);
    expect(writer.healthy).toBe(false);
    // During the back-off nothing is queued (and nothing reaches the database).
    expect(writer.offer('c', record('https://a.test/2'), 2)).toBe(false);
    locker.exec('ROLLBACK');
    now += DEFAULT_WRITER.backoffMs;
    expect(writer.healthy).toBe(true);
    expect(writer.offer('c', record('https://a.test/3'), 3)).toBe(true);
    await writer.close();
    expect((await stored.get()).values[0].value).toBe(1);
    expect((await db.recent(10)).map((r) => r.url)).toEqual(['https://a.test/3']);
  } finally {
    if (locker.inTransaction) locker.exec('ROLLBACK');
    locker.close();
    await writer.close();
  }
});
