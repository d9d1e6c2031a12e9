/** The `origo` command itself: flags, refusal without a secret, graceful shutdown on SIGTERM. */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { AddressInfo, connect, createServer } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { waitFor } from '@mutp/testing/wait';
import { closeAll, connectClient, connectProxy, within } from './helpers';

const MAIN = join(__dirname, '../src/main.ts');
const ROOT = join(__dirname, '../..'); // where `--import tsx` resolves
const node = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    encoding: 'utf8',
    cwd: ROOT,
    env: { ...process.env, MUTP_PROXY_SECRET: '', ...env },
    timeout: 30_000,
  });

let child: ChildProcess | undefined;
let dir: string | undefined;
afterEach(async () => {
  await closeAll();
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

test('--help lists every flag with its default and environment variable', () => {
  const result = node(['--help']);
  expect(result.status).toBe(0);
  for (const flag of [
    '--port <n>',
    '--host <address>',
    '--proxy-keys <file>',
    '--insecure-proxy-secret <secret>',
    '--token-key <file>',
    '--max-sockets-per-address <n>',
    '--db-busy-timeout-ms <ms>',
    '--admin-token <token>',
    '--db <path>',
    '--heartbeat-interval-ms <ms>',
    '--heartbeat-timeout-ms <ms>',
    '--log-level <level>',
    '--max-clients <n>',
    '--max-proxies <n>',
    '--max-connections-per-client <n>',
  ]) {
    expect(result.stdout).toContain(flag);
  }
  const help = result.stdout.replace(/\s+/g, ' ');
  expect(help).toContain('default: 8700, env: MUTP_ORIGO_PORT');
  expect(help).toContain('env: MUTP_PROXY_SECRET');
  expect(help).toContain('default: "origo.sqlite", env: MUTP_ORIGO_DB');
});

test('refuses to start without proxy credentials', () => {
  const result = node(['--port', '0', '--db', ':memory:']);
  expect(result.status).toBe(2);
  expect(result.stderr).toContain('proxy credentials are required');
});

test('usage errors exit 2: an unknown flag, a bad value, a missing value (commander alone would exit 1)', () => {
  for (const args of [['--prot', '8700'], ['--port', 'http'], ['--port', '70000'], ['--log-level', 'loud'], ['--db']]) {
    const result = node([...args, '--insecure-proxy-secret', 'x']);
    expect({ args, status: result.status }).toEqual({ args, status: 2 });
    expect(result.stderr).toMatch(/^error: /);
  }
});

test('--local-dev refuses a non-loopback --host with exit 2, by flag or environment (issue 32)', () => {
  for (const [args, env] of [
    [['--local-dev', '--host', '0.0.0.0'], {}],
    [['--host', '192.0.2.1'], { MUTP_ORIGO_LOCAL_DEV: '1' }],
  ] as const) {
    const result = node([...args, '--insecure-proxy-secret', 'x', '--db', ':memory:'], env);
    expect({ args, status: result.status }).toEqual({ args, status: 2 });
    expect(result.stderr).toMatch(/--local-dev listens on and advertises loopback addresses only, and --host gives/);
  }
});

test('cannot start exits 1: the port is taken', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  try {
    const port = (taken.address() as AddressInfo).port;
    const result = node(['--port', String(port), '--host', '127.0.0.1', '--db', ':memory:'], {
      MUTP_PROXY_SECRET: 'test-proxy-secret',
    });
    expect(result.status).toBe(1);
    expect(result.stdout + result.stderr).toContain('EADDRINUSE');
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});

test('cannot start exits 1: the database cannot be opened', () => {
  const result = node(['--port', '0', '--db', '/nonexistent-mutp-dir/records.sqlite'], {
    MUTP_PROXY_SECRET: 'test-proxy-secret',
  });
  expect(result.status).toBe(1);
  expect(result.stdout).toContain('Cannot open database because the directory does not exist');
});

test('a second signal during the shutdown exits 1 at once', async () => {
  child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--port', '0', '--db', ':memory:'], {
    cwd: ROOT,
    env: { ...process.env, MUTP_PROXY_SECRET: 'test-proxy-secret' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = child;
  let output = '';
  proc.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  proc.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  await waitFor(
    'origo to listen',
    async () => (output.includes('"origo listening"') ? true : undefined),
    30_000,
    50,
    () => output,
  );
  // A client socket that never answers, not even the close: the shutdown waits for it (up to
  // --shutdown-grace-ms, 2 s), so a second signal always finds the first one's under way.
  const listening = output.split('\n').find((line) => line.includes('"origo listening"'))!;
  const { port } = JSON.parse(listening) as { port: number };
  const silent = connect(port, '127.0.0.1');
  try {
    silent.write(
      'GET /v1/client HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    await within(new Promise((resolve) => silent.once('data', resolve)), 'the WebSocket upgrade of the silent client');
    // Both signals are held while it is stopped and arrive together.
    proc.kill('SIGSTOP');
    proc.kill('SIGTERM');
    proc.kill('SIGINT');
    proc.kill('SIGCONT');
    expect(await within(exited, 'origo to exit after two signals', 15_000)).toBe(1);
    expect(output).toContain('second signal: exiting now');
  } finally {
    silent.destroy();
  }
});

test('SIGTERM closes the sockets with 1001, keeps the records and exits 0', async () => {
  dir = mkdtempSync(join(tmpdir(), 'origo-'));
  const db = join(dir, 'records.sqlite');
  child = spawn(process.execPath, ['--import', 'tsx', MAIN, '--port', '0', '--db', db], {
    cwd: ROOT,
    env: { ...process.env, MUTP_PROXY_SECRET: 'test-proxy-secret', MUTP_ADMIN_TOKEN: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const proc = child;
  const lines: string[] = [];
  let stdout = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`origo did not log 'origo listening' within 30 s: ${stdout}`)),
      30_000,
    );
    proc.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      for (const line of stdout.split('\n').slice(lines.length, -1)) {
        lines.push(line);
        const entry = parseLine(line);
        if (entry?.msg === 'origo listening') {
          clearTimeout(timer);
          resolve(entry.port!);
        }
      }
    });
    proc.on('exit', (code) => reject(new Error(`origo exited (${code}) before listening: ${stdout}`)));
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));

  const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
  const client = await connectClient(port);
  // Records may only name proxies origo offered this client.
  client.send({ type: 'request-proxies', requestId: 'offer', count: 1 });
  await client.next('proxies');
  client.send({
    type: 'record',
    record: {
      url: 'https://media.test/seg.ts',
      mode: 'fountain',
      sources: 1,
      bytes: 1000,
      durationMs: 10,
      goodputBps: 100_000,
      normalizedGoodput: 1,
      status: 'complete',
      proxies: [{ proxyId: 'edge-1', received: 1, useful: 1, share: 1 }],
    },
  });
  // The record is queued before the next message of the same socket is answered; SIGTERM flushes it.
  client.send({ type: 'request-proxies', requestId: 'r', count: 1 });
  await client.next('proxies');

  proc.kill('SIGTERM');
  expect((await client.closed()).code).toBe(1001);
  expect((await proxy.closed()).code).toBe(1001);
  expect(await within(exited, 'origo to exit after SIGTERM', 15_000)).toBe(0);

  const stored = new Database(db, { readonly: true });
  try {
    expect(stored.prepare('SELECT url, mode, proxies FROM records').all()).toEqual([
      {
        url: 'https://media.test/seg.ts',
        mode: 'fountain',
        proxies: JSON.stringify([{ proxyId: 'edge-1', received: 1, useful: 1, share: 1 }]),
      },
    ]);
  } finally {
    stored.close();
  }
});

function parseLine(line: string): { msg?: string; port?: number } | undefined {
  try {
    return JSON.parse(line) as { msg?: string; port?: number };
  } catch {
    return undefined;
  }
}
