/**
 * A private redis-server for tests and benchmarks: its own loopback port and temp directory, no
 * persistence, killed with its children's cleanup. `restart()` stops it and starts it again on the
 * same port (what origo instances must survive). scripts/setup.sh installs redis-server.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports';
import { waitFor } from './wait';

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  /** Stops the server (SIGKILL: no shutdown save, as a crash) and starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** Stops the server; its port stays reserved for restart(). */
  kill(): Promise<void>;
  /** Starts it again after kill(). */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  stop(): Promise<void>;
}

const REDIS_SERVER = process.env.MUTP_REDIS_SERVER ?? 'redis-server';

function redisInstalled(): boolean {
  return spawnSync(REDIS_SERVER, ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Answers once the server replies PONG to a PING (RESP inline command). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.connect(port, '127.0.0.1', () => socket.write('PING\r\n'));
  });
}

export async function startRedis(): Promise<RedisServer> {
  if (!redisInstalled()) {
    throw new Error(`${REDIS_SERVER} not found: install the Debian package redis-server (scripts/setup.sh does)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'mutp-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  let output = '';

  const start = async () => {
    output = '';
    const started = spawn(
      REDIS_SERVER,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = started;
    started.stdout!.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-4000)));
    started.stderr!.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-4000)));
    await waitFor(
      `redis-server on port ${port}`,
      async () => {
        if (started.exitCode !== null) throw new Error(`redis-server exited with ${started.exitCode}`);
        return (await ping(port)) ? true : undefined;
      },
      10_000,
      50,
      () => output,
    );
  };
  const kill = async () => {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGKILL');
    await exited;
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    start,
    async restart() {
      await kill();
      await start();
    },
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
