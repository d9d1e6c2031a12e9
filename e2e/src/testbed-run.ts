/**
 * Runs a benchmark inside the testbed. The process that is asked for a profile brings the
 * testbed up, runs itself again inside the client's namespace (a Node process cannot change its
 * own namespace) and takes the testbed down when that ends, however it ends. The inner run
 * finds the testbed's description by name and places origo, proxies and origin on its hosts.
 */
import { spawn } from 'node:child_process';
import { createConnection, createServer, Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { loadProfile, readDescription, TestbedDescription, up } from '@mutp/testbed';
import { spawnService } from './cluster';

const INNER_ENV = 'MUTP_TESTBED_NAME';

/**
 * In the outer process: up, run `script` with the same arguments in the client namespace, down;
 * resolves to undefined and the caller exits with the inner run's status (process.exitCode).
 * In the inner process: resolves to the testbed's description.
 */
export async function enterTestbed(
  script: string,
  profileName: string,
  capsKBps: number[] | undefined,
  seed: number,
): Promise<TestbedDescription | undefined> {
  const inner = process.env[INNER_ENV];
  if (inner) {
    const d = readDescription(inner);
    if (!d) throw new Error(`testbed ${inner} is not up`);
    return d;
  }
  const name = `b${process.pid % 100000}`;
  const profile = loadProfile(profileName);
  process.stderr.write(`testbed ${name}: bringing up profile ${profile.name}\n`);
  const tb = await up({ name, profile, capsKBps, seed, onLog: (l) => process.stderr.write(`linkem: ${l}\n`) });
  try {
    const node = [process.execPath, '--import', 'tsx', script, ...process.argv.slice(2)];
    const child = spawn('ip', ['netns', 'exec', tb.client.netns, ...node], {
      stdio: 'inherit',
      env: { ...process.env, [INNER_ENV]: name },
    });
    const forward = (signal: NodeJS.Signals) => child.kill(signal);
    process.on('SIGINT', forward).on('SIGTERM', forward);
    const code = await new Promise<number>((resolve) => child.once('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
    process.off('SIGINT', forward).off('SIGTERM', forward);
    process.exitCode = code;
  } finally {
    await tb.down();
  }
  return undefined;
}

export interface PlacedOrigin {
  url: string;
  close(): Promise<void>;
}

/** The test origin in the testbed's origin namespace. */
export async function startPlacedOrigin(host: { netns: string; address: string }): Promise<PlacedOrigin> {
  const child = spawnService('e2e/src/origin-main.ts', ['--host', host.address, '--port', '8900'], {}, host.netns);
  const errors: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => errors.push(l));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`origin not up in 30 s: ${errors.join(' | ')}`)), 30_000);
    child.once('exit', (c) => reject(new Error(`origin exited with ${c}: ${errors.join(' | ')}`)));
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { url: string }).url);
    });
  });
  child.removeAllListeners('exit');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * A TCP relay from loopback in this (the client's) namespace to `target`, for origo's signalling
 * WebSocket: the extension accepts plain ws:// only to this machine (elsewhere it wants wss://,
 * and the testbed's origo has no certificate). The relay's own connection still crosses the
 * client's access link; the media path (WebRTC to the proxies) does not involve it.
 */
export async function loopbackRelay(target: {
  host: string;
  port: number;
}): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = createConnection(target);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.on('error', () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
