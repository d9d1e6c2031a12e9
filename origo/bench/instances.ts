/**
 * origo instances as real child processes (one pid each, so CPU and memory are measured per
 * instance): `node --import tsx origo/src/main.ts` on a free loopback port. Node runs main.ts
 * itself (the `tsx` CLI would run it in a grandchild, and /proc of the wrong pid would be read).
 */
import { ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@mutp/testing/ports';
import { waitFor } from '@mutp/testing/wait';

const REPO_ROOT = join(__dirname, '..', '..');
const MAIN = join(REPO_ROOT, 'origo', 'src', 'main.ts');
/** The insecure shared secret of the simulated proxies (loopback only, passed in the environment). */
export const BENCH_PROXY_SECRET = 'bench-origo-shared-secret';
/** Admin bearer token: the bench reads /v1/admin/proxies to see the shared registry complete. */
const BENCH_ADMIN_TOKEN = 'bench-origo-admin-token';

/** Writes the Ed25519 key every instance signs client tokens with (instances sharing Redis need one key). */
export function writeTokenKey(dir: string): string {
  const file = join(dir, 'token-key.pem');
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  return file;
}

export interface InstanceOptions {
  index: number;
  heartbeatIntervalMs: number;
  maxClients: number;
  maxProxies: number;
  tokenKeyFile: string;
  /** Set for several instances: they share the proxy registry and relay through it. */
  redisUrl?: string;
  /** Appended to the flags (they win over the bench's own: commander keeps the last). */
  extraArgs: string[];
  /** Flags for node itself, before the script (e.g. --cpu-prof). */
  nodeArgs: string[];
  /** Told of the process as soon as it is spawned (before it is ready), so it is never left running. */
  onSpawn(instance: OrigoInstance): void;
}

export interface OrigoInstance {
  readonly index: number;
  readonly pid: number;
  readonly port: number;
  readonly http: string;
  readonly ws: string;
  /** Warnings and errors origo logged, counted by message (a refusal, a drop, a timeout). */
  readonly warnings: Map<string, number>;
  /** The last lines origo printed, for failure messages. */
  output(): string;
  /** SIGTERM (graceful shutdown), SIGKILL if it has not exited within `graceMs`. */
  stop(graceMs?: number): Promise<number | null>;
}

export async function startInstance(o: InstanceOptions): Promise<OrigoInstance> {
  const port = await freePort();
  const args = [
    ...o.nodeArgs,
    '--import',
    'tsx',
    MAIN,
    '--port',
    String(port),
    '--host',
    '127.0.0.1',
    '--allow-local-proxies',
    '--db',
    ':memory:',
    '--log-level',
    'warn',
    '--heartbeat-interval-ms',
    String(o.heartbeatIntervalMs),
    '--max-clients',
    String(o.maxClients),
    '--max-proxies',
    String(o.maxProxies),
    '--token-key',
    o.tokenKeyFile,
    ...(o.redisUrl !== undefined ? ['--redis', o.redisUrl, '--instance-id', `bench-${o.index}`] : []),
    // The simulated clients share a few loopback /24s (addresses.ts): the per-network offer budget
    // would measure itself, not the relay (extraArgs may set it back).
    '--offer-rate-per-network',
    '1000000',
    '--offer-burst-per-network',
    '1000000',
    ...o.extraArgs,
  ];
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, MUTP_PROXY_SECRET: BENCH_PROXY_SECRET, MUTP_ADMIN_TOKEN: BENCH_ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const warnings = new Map<string, number>();
  let tail: string[] = [];
  let partial = '';
  const take = (chunk: Buffer) => {
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.length === 0) continue;
      tail.push(line.length > 500 ? `${line.slice(0, 500)}…` : line);
      if (tail.length > 40) tail = tail.slice(-20);
      // At --log-level warn every JSON line is a warning or worse: count it by its message.
      const msg = /"msg":"((?:[^"\\]|\\.)*)"/.exec(line)?.[1] ?? line.slice(0, 120);
      warnings.set(msg, (warnings.get(msg) ?? 0) + 1);
    }
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const output = () => [...tail, partial].join('\n');
  const http = `http://127.0.0.1:${port}`;
  const instance: OrigoInstance = {
    index: o.index,
    pid: child.pid!,
    port,
    http,
    ws: `ws://127.0.0.1:${port}`,
    warnings,
    output,
    stop: (graceMs = 10_000) => stopChild(child, exited, graceMs),
  };
  o.onSpawn(instance);
  try {
    await waitFor(
      `origo instance ${o.index} (pid ${child.pid}) to answer /healthz on port ${port}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`origo exited with code ${child.exitCode}`);
        const response = await fetch(`${http}/healthz`);
        return response.ok ? true : undefined;
      },
      20_000,
      100,
      output,
    );
  } catch (err) {
    await instance.stop(2000);
    throw err;
  }
  return instance;
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>, graceMs: number) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), graceMs)));
  const outcome = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (outcome !== 'late') return outcome;
  child.kill('SIGKILL');
  return exited;
}

/** How many proxies the instance knows (its own and, sharing Redis, the other instances'). */
export async function proxiesKnown(instance: OrigoInstance): Promise<number> {
  const response = await fetch(`${instance.http}/v1/admin/proxies`, {
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
  });
  if (!response.ok) throw new Error(`/v1/admin/proxies answered ${response.status}`);
  return ((await response.json()) as { proxies: unknown[] }).proxies.length;
}

/** The origo counters that tell a refusal or drop from origo's side, summed over labels. */
export async function origoDropCounters(instance: OrigoInstance): Promise<Record<string, number>> {
  const text = await (await fetch(`${instance.http}/metrics`)).text();
  const wanted = [
    'mutp_origo_sockets_dropped_total',
    'mutp_origo_registrations_refused_total',
    'mutp_origo_heartbeat_timeouts_total',
    'mutp_origo_invalid_messages_total',
  ];
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const match = /^(mutp_origo_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$/.exec(line);
    if (!match || !wanted.includes(match[1])) continue;
    const value = Number(match[3]);
    if (value === 0) continue;
    const key = `${match[1].replace(/^mutp_origo_|_total$/g, '')}${match[2] ?? ''}`;
    out[key] = (out[key] ?? 0) + value;
  }
  return out;
}
