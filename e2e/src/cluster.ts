/**
 * A local MUTP deployment of real processes: origo and N proxies (each its own Node process,
 * started with tsx), on loopback, or placed in the testbed's network namespaces (`placement`).
 * Used by the demo, the end-to-end tests and bench:e2e.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { waitFor } from '@mutp/testing/wait';
import { OrigoSession, systemClock, WebSocketLike } from '@mutp/shared/client';

const ROOT = join(__dirname, '..', '..');

/**
 * Runs a TypeScript entry point as one Node process (tsx as a loader, not its CLI, which would
 * put a wrapper process in between: a SIGKILL must reach the service itself).
 */
export function spawnService(script: string, args: string[], env: NodeJS.ProcessEnv, netns?: string): ChildProcess {
  const node = [process.execPath, '--import', 'tsx', join(ROOT, script), ...args];
  // `ip netns exec` execs the command: the child is still the service itself.
  const [command, ...rest] = netns ? ['ip', 'netns', 'exec', netns, ...node] : node;
  return spawn(command, rest, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export interface ProxySpec {
  name: string;
  /** Upload limit in KB/s (1 KB = 1024 B); 0 = none. */
  uploadKBps: number;
  extraArgs?: string[];
}

/**
 * The paper's mixed fleet of four: two proxies at 896 KB/s and two at 1792 KB/s, named
 * `<prefix>896-a`, `<prefix>896-b`, `<prefix>1792-a`, `<prefix>1792-b`.
 */
export function mixedFleetOfFour(prefix: string): ProxySpec[] {
  return [896, 1792].flatMap((uploadKBps) =>
    ['a', 'b'].map((x) => ({ name: `${prefix}${uploadKBps}-${x}`, uploadKBps })),
  );
}

export interface RunningProxy extends ProxySpec {
  process: ChildProcess;
  log: string[];
  /** Starts the proxy process again with the same arguments (after kill). */
  relaunch(): ChildProcess;
}

export interface Cluster {
  origoUrl: string;
  /** origo's client endpoint. */
  clientUrl: string;
  /** Every origo instance's HTTP base and client endpoint (one entry unless `origoInstances`). */
  origoUrls: string[];
  clientUrls: string[];
  adminToken: string;
  /** The proxies' /metrics and /healthz bearer token (proxy-metrics.ts monitoring() adds it to a fetch). */
  metricsToken: string;
  /**
   * Each proxy's key at origo (origo --proxy-keys), by proxy id: the proxies' names, and the
   * `extraProxyIds` a test registers proxies of its own under (e.g. a hostile one).
   */
  proxyKeys: Record<string, string>;
  proxies: RunningProxy[];
  origoLog: string[];
  /** Stops one proxy (SIGKILL: as a crash, for fault tests). */
  kill(name: string): void;
  /**
   * Kills a proxy (SIGKILL) and starts it again under the same id; resolves once origo lists its
   * new registration. Its cache and connections are gone, as after a crash and restart.
   */
  restartProxy(name: string): Promise<void>;
  /** Restarts origo on the same port (proxies must re-register by themselves). */
  restartOrigo(): Promise<void>;
  /** Stops origo (SIGTERM) and leaves it down; restartOrigo() brings it back on the same port. */
  stopOrigo(): Promise<void>;
  /** Admin listing of the registered proxies (as instance `instance` sees the cluster). */
  listProxies(instance?: number): Promise<{ proxyId: string; name: string; instanceId: string }[]>;
  /** Kills origo instance `instance` (SIGKILL: a crash; the others and Redis stay). */
  killOrigo(instance: number): void;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  proxies: ProxySpec[];
  /** Lets proxies fetch from loopback origins (the local test origin), and origo judge conflicts about them. */
  allowPrivateOrigins?: boolean;
  logLevel?: string;
  /** Per-process output goes here too (the demo shows nothing, tests keep it for failures). */
  onLog?: (source: string, line: string) => void;
  readyTimeoutMs?: number;
  /** Proxy ids that get a key without a proxy process (the test registers them itself). */
  extraProxyIds?: string[];
  /**
   * Where each service runs: a network namespace and its address (the testbed's hosts); default
   * all on loopback in this process's namespace. `proxies` is by index into `proxies` above.
   */
  placement?: { origo: PlacedHost; proxies: PlacedHost[] };
  /**
   * Several origo instances sharing state through this Redis (origo --redis); proxies are given
   * every instance's URL. Loopback only.
   */
  origoInstances?: { count: number; redisUrl: string };
  /** More origo arguments, after the cluster's own (e.g. a test's socket budgets). */
  origoArgs?: string[];
  /** Every proxy also runs its QUIC endpoint (clients prefer it to WebRTC). */
  quic?: boolean;
  /**
   * Origin shielding: the proxy of this name is the parent (it serves the others on a shield
   * port), every other proxy its child (--shield-parent); all share a fresh fleet shield key.
   */
  shield?: { parent: string };
}

export interface PlacedHost {
  netns: string;
  address: string;
}

/** origo's port inside its own namespace, where nothing else listens. */
const PLACED_ORIGO_PORT = 8700;
const PLACED_PROXY_HTTP_PORT = 8800;
const PLACED_PROXY_QUIC_PORT = 4433;
const PLACED_SHIELD_PORT = 8801;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function launch(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  log: string[],
  name: string,
  o: ClusterOptions,
  netns?: string,
) {
  const child = spawnService(script, args, env, netns);
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      if (log.length > 2000) log.shift();
      log.push(line);
      o.onLog?.(name, line);
    }
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  return child;
}

function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill(signal);
  });
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const placement = o.placement;
  const instances = o.origoInstances?.count ?? 1;
  if (placement && instances > 1) throw new Error('several origo instances run on loopback only');
  const ports = placement
    ? [PLACED_ORIGO_PORT]
    : await Promise.all(Array.from({ length: instances }, () => freePort()));
  const origoHost = placement?.origo.address ?? '127.0.0.1';
  // Per-proxy keys, as in production: each proxy registers under its name with its own key.
  const proxyKeys = Object.fromEntries(
    [...o.proxies.map((p) => p.name), ...(o.extraProxyIds ?? [])].map((id) => [id, randomBytes(24).toString('base64')]),
  );
  const keysDir = mkdtempSync(join(tmpdir(), 'mutp-cluster-'));
  const keysFile = join(keysDir, 'proxy-keys.json');
  writeFileSync(keysFile, JSON.stringify(proxyKeys), { mode: 0o600 });
  // Instances of one deployment sign client tokens with one key.
  const tokenKeyFile = join(keysDir, 'token-key.pem');
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(tokenKeyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
  const adminToken = randomBytes(16).toString('hex');
  const metricsToken = randomBytes(16).toString('hex');
  const origoBases = ports.map((port) => `http://${origoHost}:${port}`);
  const origoLog: string[] = [];
  const logLevel = o.logLevel ?? 'warn';
  const readyTimeoutMs = o.readyTimeoutMs ?? 30_000;
  const startOrigo = (i: number) =>
    launch(
      'origo/src/main.ts',
      // Proxies on loopback (a dev cluster), each with its own key.
      [
        '--port',
        String(ports[i]),
        ...(placement ? ['--host', origoHost] : []),
        '--db',
        ':memory:',
        '--log-level',
        logLevel,
        '--allow-local-proxies',
        // Conflicts about this cluster's loopback origin are judged too (origo fetches it).
        ...(o.allowPrivateOrigins ? ['--allow-private-origins'] : []),
        '--proxy-keys',
        keysFile,
        '--token-key',
        tokenKeyFile,
        ...(o.origoInstances ? ['--redis', o.origoInstances.redisUrl, '--instance-id', `o${i}`] : []),
        // On loopback every client is one network (127.0.0.0/24): its offer budget would be that of
        // every test client together. Placed in namespaces, clients have their own networks.
        ...(placement ? [] : ['--offer-rate-per-network', '100000', '--offer-burst-per-network', '100000']),
        ...(o.origoArgs ?? []),
      ],
      { MUTP_ADMIN_TOKEN: adminToken },
      origoLog,
      instances > 1 ? `origo o${i}` : 'origo',
      o,
      placement?.origo.netns,
    );
  const origos = ports.map((_, i) => startOrigo(i));
  const admin = async (i = 0) => {
    const r = await fetch(`${origoBases[i]}/v1/admin/proxies`, { headers: { authorization: `Bearer ${adminToken}` } });
    if (!r.ok) return undefined;
    const body = (await r.json()) as { proxies: { proxyId: string; name: string; instanceId: string }[] };
    return body.proxies;
  };
  const tail = (log: string[]) => log.slice(-20).join('\n');
  const proxies: RunningProxy[] = [];
  const cluster: Cluster = {
    origoUrl: origoBases[0],
    clientUrl: `ws://${origoHost}:${ports[0]}/v1/client`,
    origoUrls: origoBases,
    clientUrls: ports.map((port) => `ws://${origoHost}:${port}/v1/client`),
    adminToken,
    metricsToken,
    proxyKeys,
    proxies,
    origoLog,
    kill(name) {
      const p = proxies.find((x) => x.name === name);
      p?.process.kill('SIGKILL');
    },
    async restartProxy(name) {
      const p = proxies.find((x) => x.name === name);
      if (!p) throw new Error(`no proxy ${name}`);
      const since = Date.now();
      if (p.process.exitCode === null && p.process.signalCode === null) {
        const exited = new Promise((resolve) => p.process.once('exit', resolve));
        p.process.kill('SIGKILL');
        await exited;
      }
      p.process = p.relaunch();
      await waitFor(
        `${name} to register again`,
        async () => {
          const listed = (await admin()) as { name: string; registeredAt?: string }[] | undefined;
          const entry = listed?.find((x) => x.name === name);
          return entry?.registeredAt !== undefined && Date.parse(entry.registeredAt) >= since ? true : undefined;
        },
        30_000,
        100,
        () => tail(p.log),
      );
    },
    async restartOrigo() {
      await stopProcess(origos[0]);
      origos[0] = startOrigo(0);
      await waitFor(
        'origo',
        () => admin(0),
        readyTimeoutMs,
        100,
        () => tail(origoLog),
      );
    },
    async stopOrigo() {
      await stopProcess(origos[0]);
    },
    killOrigo(i) {
      origos[i].kill('SIGKILL');
    },
    listProxies: async (i = 0) => (await admin(i)) ?? [],
    async stop() {
      await Promise.all(proxies.map((p) => stopProcess(p.process)));
      await Promise.all(origos.map((origo) => stopProcess(origo)));
      rmSync(keysDir, { recursive: true, force: true });
    },
  };
  try {
    for (const i of origos.keys()) {
      await waitFor(
        `origo instance ${i}`,
        () => admin(i),
        readyTimeoutMs,
        100,
        () => tail(origoLog),
      );
    }
    const shieldArgs = await shieldArguments(o);
    for (const [i, spec] of o.proxies.entries()) {
      const log: string[] = [];
      const host = placement?.proxies[i];
      if (placement && !host) throw new Error(`placement has no host for proxy ${i} (${spec.name})`);
      const args = [
        '--origo',
        ports.map((port) => `ws://${origoHost}:${port}/v1/proxy`).join(','),
        // In a namespace: plain ws:// to origo's private address, HTTP on the proxy's own address.
        ...(host ? ['--insecure', '--http-host', host.address, '--http-port', String(PLACED_PROXY_HTTP_PORT)] : []),
        // On loopback every client is one network (127.0.0.0/24): the per-network shares would
        // make all test clients one client. Placed in namespaces, clients have their own networks.
        ...(host ? [] : ['--min-networks', '1']),
        '--name',
        spec.name,
        '--upload-limit',
        String(spec.uploadKBps),
        '--log-level',
        logLevel,
        ...(o.allowPrivateOrigins ? ['--allow-private-origins', '--origin-ports', '*'] : []),
        ...(o.quic ? ['--quic-port', host ? String(PLACED_PROXY_QUIC_PORT) : '0'] : []),
        ...(shieldArgs?.(spec.name) ?? []),
        ...(spec.extraArgs ?? []),
      ];
      const env = {
        MUTP_PROXY_ID: spec.name,
        MUTP_PROXY_SECRET: proxyKeys[spec.name],
        MUTP_PROXY_METRICS_TOKEN: metricsToken,
        ...(shieldArgs ? { MUTP_PROXY_SHIELD_KEY: shieldArgs.key } : {}),
      };
      const relaunch = () => launch('proxy/src/main.ts', args, env, log, spec.name, o, host?.netns);
      proxies.push({ ...spec, process: relaunch(), log, relaunch });
    }
    await waitFor(
      `${o.proxies.length} proxies`,
      async () => {
        const listed = await admin();
        return listed && listed.length >= o.proxies.length ? listed : undefined;
      },
      readyTimeoutMs,
      100,
      () => proxies.map((p) => `${p.name}:\n${tail(p.log)}`).join('\n'),
    );
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}

/**
 * The shield options per proxy name (the parent's port, the children's parent URL) and the
 * fleet's shield key; undefined without `o.shield`.
 */
async function shieldArguments(o: ClusterOptions) {
  if (!o.shield) return undefined;
  const index = o.proxies.findIndex((p) => p.name === o.shield!.parent);
  if (index < 0) throw new Error(`shield parent ${o.shield.parent} is not one of the proxies`);
  const host = o.placement?.proxies[index].address ?? '127.0.0.1';
  const port = o.placement ? PLACED_SHIELD_PORT : await freePort();
  const parent = o.shield.parent;
  const args = (name: string) =>
    name === parent ? ['--shield-port', String(port)] : ['--shield-parent', `http://${host}:${port}`];
  return Object.assign(args, { key: randomBytes(32).toString('base64url') });
}

/** A client token from origo (what the proxies' /v1/http requires), through a short client session. */
export async function clientToken(clientUrl: string): Promise<string> {
  // A local cluster's origo: plain ws://, on loopback or on the testbed's private address.
  const session = new OrigoSession(
    clientUrl,
    (url) => new WebSocket(url) as unknown as WebSocketLike,
    systemClock,
    undefined,
    undefined,
    true,
  );
  await session.connect();
  session.close();
  return session.token!;
}
