/**
 * Several origo instances sharing state through a real redis-server (cluster/redis.ts): a proxy
 * registered on one is offered by the other, signalling crosses instances both ways, a killed
 * instance's proxies move and its stale entries expire, Redis restarted empty is refilled without
 * waiting for heartbeats, a revocation on one instance holds on all, a proven-false ban holds on
 * instances started after the verdict, a client keeps its id when it fails over, and
 * cross-instance relay with Redis down fails with a clear error.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { SIGNALLING_VERSION } from '@mutp/shared';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { waitFor } from '@mutp/testing/wait';
import { OrigoOptions } from '../src/config';
import {
  ADMIN,
  ANSWER,
  closeAll,
  connectClient,
  getJson,
  heartbeat,
  keysFile,
  OFFER,
  registerMessage,
  requestProxies,
  startOrigo,
  TestOrigo,
  TestPeer,
} from './helpers';
import { conflictAbout, Key, newKey, startOrigin } from './signed-statements';

const KEYS = { 'edge-1': 'key-of-edge-1-0123456789', 'edge-2': 'key-of-edge-2-0123456789' };

let redis: RedisServer;
let tokenKey: string;
let dir: string;
let prefixes = 0;

beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'origo-cluster-'));
  tokenKey = join(dir, 'token.pem');
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(tokenKey, privateKey.export({ format: 'pem', type: 'pkcs8' }));
});
afterEach(() => closeAll());
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Two instances on one Redis under a key prefix of their own (tests do not see each other's state). */
async function startPair(overrides: Partial<OrigoOptions> = {}): Promise<[TestOrigo, TestOrigo, OrigoOptions]> {
  const options = clusterOptions(overrides);
  const a = await startOrigo({ ...options, instanceId: 'A' });
  const b = await startOrigo({ ...options, instanceId: 'B' });
  return [a, b, options];
}

/** Options of instances sharing one Redis under a key prefix of this test's own. */
function clusterOptions(overrides: Partial<OrigoOptions> = {}): OrigoOptions {
  return {
    redisUrl: redis.url,
    redisPrefix: `t${++prefixes}:`,
    tokenKeyFile: tokenKey,
    clusterRefreshMs: 100,
    // Test proxies do not beat: long enough that none times out while a test runs on a loaded machine.
    heartbeatIntervalMs: 5000,
    proxySecret: undefined,
    proxyKeysFile: keysFile(KEYS),
    ...overrides,
  };
}

async function registerProxy(
  port: number,
  proxyId: keyof typeof KEYS,
  assertionKey?: Key,
  declared: Record<string, unknown> = {},
): Promise<TestPeer> {
  const peer = await TestPeer.open(port, '/v1/proxy', proxyId);
  peer.send({ ...registration(proxyId, KEYS[proxyId], assertionKey), ...declared });
  await peer.next('registered');
  return peer;
}

function registration(proxyId: string, secret: string, assertionKey?: Key): Record<string, unknown> {
  return {
    ...registerMessage({ proxyId, name: proxyId, secret }),
    assertionKey: assertionKey?.text ?? assertionKeyOf(proxyId),
  };
}

/** The error origo answers a registration with (the peer is closed after it). */
async function refusal(port: number, proxyId: string, secret: string): Promise<Record<string, unknown>> {
  const peer = await TestPeer.open(port, '/v1/proxy', `${proxyId} again`);
  peer.send(registration(proxyId, secret));
  const error = await peer.next('error');
  await peer.closed();
  return error;
}

/** A well-formed Ed25519 public key per proxy id (origo only passes it on). */
function assertionKeyOf(proxyId: string): string {
  return Buffer.alloc(32, proxyId.length).toString('base64url');
}

/** Until `client` (on some instance) is offered exactly these proxies. */
async function offered(client: TestPeer, expected: string[], what: string): Promise<void> {
  await waitFor(what, async () => {
    const ids = await requestProxies(client, 8);
    return ids.sort().join() === [...expected].sort().join() ? true : undefined;
  });
}

async function listedInstances(origo: TestOrigo): Promise<Record<string, string>> {
  const { body } = await getJson(`${origo.http}/v1/admin/proxies`, ADMIN);
  const proxies = (body as { proxies: { proxyId: string; instanceId: string }[] }).proxies;
  return Object.fromEntries(proxies.map((p) => [p.proxyId, p.instanceId]));
}

test('a proxy on one instance is offered and signalled by a client on the other, both ways', async () => {
  const [a, b] = await startPair();
  const capabilities = ['ranges', 'attributes', 'a-feature-of-tomorrow'];
  const proxy = await registerProxy(a.port, 'edge-1', undefined, { region: 'eu-west', capabilities });
  const client = await connectClient(b.port);
  await offered(client, ['edge-1'], 'B to offer the proxy registered on A');
  expect(await listedInstances(b)).toEqual({ 'edge-1': 'A' });
  const { body } = await getJson(`${b.http}/v1/admin/proxies`, ADMIN);
  expect((body as { proxies: unknown[] }).proxies).toEqual([expect.objectContaining({ region: 'eu-west' })]);
  // Its assertion key and declared features cross instances with it: B's clients check its signed
  // METAs too, and send it only what it understands (a proxy one release behind stays one).
  client.send({ type: 'request-proxies', requestId: 'key', count: 1 });
  const { proxies } = await client.next('proxies', (m) => m.requestId === 'key');
  expect(proxies).toEqual([
    expect.objectContaining({ proxyId: 'edge-1', assertionKey: assertionKeyOf('edge-1'), capabilities }),
  ]);

  client.send({ type: 'signal', connectionId: 'x1', proxyId: 'edge-1', description: OFFER });
  const atProxy = await proxy.next('signal', (m) => m.connectionId === 'x1');
  expect(atProxy).toMatchObject({ clientId: client.id, description: OFFER });

  proxy.send({ type: 'signal', connectionId: 'x1', description: ANSWER });
  expect(await client.next('signal', (m) => m.connectionId === 'x1')).toMatchObject({ description: ANSWER });

  // The proxy closes the connection: the client on B hears it; a signal after that is refused at A.
  proxy.send({ type: 'connection-closed', connectionId: 'x1', reason: 'done' });
  await client.next('connection-closed', (m) => m.connectionId === 'x1');
  proxy.send({ type: 'signal', connectionId: 'x1', description: ANSWER });
  await proxy.next('error', (m) => m.code === 'unknown-connection');

  // The client leaving B closes its connections at the proxy on A.
  client.send({ type: 'signal', connectionId: 'x2', proxyId: 'edge-1', description: OFFER });
  await proxy.next('signal', (m) => m.connectionId === 'x2');
  await client.close();
  await proxy.next('connection-closed', (m) => m.connectionId === 'x2' && m.reason === 'client-gone');
});

test("a staging hint crosses instances to the proxy, and the proxy's answer comes back", async () => {
  const [a, b] = await startPair();
  const proxy = await registerProxy(a.port, 'edge-1');
  const client = await connectClient(b.port);
  await offered(client, ['edge-1'], 'B to offer the proxy registered on A');

  const url = 'https://media.example/seg-7.m4s';
  client.send({ type: 'stage', requestId: 'h1', url, proxyIds: ['edge-1'] });
  expect(await proxy.next('stage')).toEqual({
    type: 'stage',
    clientId: client.id,
    clientNetwork: '127.0.0.0/24',
    requestId: 'h1',
    url,
  });
  proxy.send({
    type: 'staged',
    clientId: client.id,
    requestId: 'h1',
    status: 'staged',
    originMs: 35,
    cached: false,
    bytes: 1000,
  });
  expect(await client.next('staged')).toEqual({
    type: 'staged',
    requestId: 'h1',
    proxyId: 'edge-1',
    status: 'staged',
    originMs: 35,
    cached: false,
    bytes: 1000,
  });
});

test('an instance that dies: its proxies re-register on the other at once, its stale entries expire', async () => {
  // Heartbeat timeout 3 s: how long the dead instance's entries outlive it.
  const [, b, options] = await startPair({ heartbeatIntervalMs: 1000 });
  // A third instance as a real process, killed with SIGKILL (no withdrawal, as a crash).
  const doomed = await spawnOrigo({ ...options, instanceId: 'C' });
  try {
    const proxy1 = await registerProxy(doomed.port, 'edge-1');
    const proxy2 = await registerProxy(doomed.port, 'edge-2');
    const client = await connectClient(b.port);
    await offered(client, ['edge-1', 'edge-2'], 'B to offer both proxies of C');

    doomed.child.kill('SIGKILL');
    await proxy1.closed();
    await proxy2.closed();
    // edge-1 fails over to B straight away (its key proves it owns the id); edge-2 never comes back.
    const moved = await registerProxy(b.port, 'edge-1');
    expect((await listedInstances(b))['edge-1']).toBe('B');
    // edge-1 beats (it would time out itself otherwise); edge-2's entry must expire on its own.
    await waitFor("C's dead proxy to expire from the shared registry", async () => {
      heartbeat(moved, 0, 0, 1_000_000);
      const ids = await requestProxies(client, 8);
      return ids.join() === 'edge-1' ? true : undefined;
    });
  } finally {
    doomed.child.kill('SIGKILL');
  }
});

test('redis restarted empty: the instances republish their proxies without waiting for heartbeats', async () => {
  const [a, b] = await startPair({ heartbeatIntervalMs: 60_000 });
  await registerProxy(a.port, 'edge-1');
  const client = await connectClient(b.port);
  await offered(client, ['edge-1'], 'B to offer the proxy of A');
  await redis.restart();
  // No heartbeat comes for a minute: only A's resync can bring the entry back.
  await waitFor('the proxy of A listed on B again after the restart', async () => {
    const listed = await listedInstances(b);
    return listed['edge-1'] === 'A' ? true : undefined;
  });
  await offered(client, ['edge-1'], 'B to offer it again');
});

test('a key revoked on one instance is refused on every instance, and withdrawn from their clients', async () => {
  const [a, b] = await startPair();
  const proxy = await registerProxy(a.port, 'edge-1');
  await registerProxy(a.port, 'edge-2');
  await waitFor('B to see both proxies', async () =>
    Object.keys(await listedInstances(b)).length === 2 ? true : undefined,
  );
  const client = await connectClient(a.port);
  expect((await requestProxies(client, 2)).sort()).toEqual(['edge-1', 'edge-2']);
  // Only B's key file changes and only B reloads: A drops the proxy and refuses it afterwards.
  const { 'edge-2': key2 } = KEYS;
  const bKeys = keysFile({ 'edge-2': key2 });
  (b.origo.config as { proxyKeysFile?: string }).proxyKeysFile = bKeys;
  b.origo.reloadProxyKeys();
  expect(await proxy.next('error')).toMatchObject({ code: 'unauthorized' });
  await proxy.closed();
  const again = await TestPeer.open(a.port, '/v1/proxy', 'edge-1 again');
  again.send(registerMessage({ proxyId: 'edge-1', name: 'edge-1', secret: KEYS['edge-1'] }));
  await waitFor('A to refuse the revoked key', async () =>
    again.received.some((m) => m.type === 'error' && m.code === 'unauthorized') ? true : undefined,
  );
  // A's client it was offered to heard it withdrawn.
  expect(await client.next('withdrawn')).toEqual({ type: 'withdrawn', proxyId: 'edge-1', reason: 'revoked' });
});

test('revocation is by key and append-only: an offline proxy cannot come back elsewhere, a stale file cannot un-revoke (issue 31)', async () => {
  const [a, b] = await startPair();
  // edge-1 is offline (registered nowhere) when B's operator removes its key and reloads.
  const bKeys = keysFile({ 'edge-2': KEYS['edge-2'] });
  (b.origo.config as { proxyKeysFile?: string }).proxyKeysFile = bKeys;
  b.origo.reloadProxyKeys();
  // Registers until refused: the revocation reaches the other instance through Redis, not at once.
  const refusedAt = (port: number, what: string) =>
    waitFor(what, async () => {
      const peer = await TestPeer.open(port, '/v1/proxy', 'edge-1');
      peer.send(registerMessage({ proxyId: 'edge-1', name: 'edge-1', secret: KEYS['edge-1'] }));
      await peer.until(() => peer.received.some((m) => m.type === 'registered' || m.type === 'error'), what);
      const refused = peer.received.some((m) => m.type === 'error' && m.code === 'unauthorized');
      await peer.close();
      return refused ? true : undefined;
    });
  // A still lists the key (its file is stale) but refuses it: the revocation went through Redis.
  await refusedAt(a.port, 'A to refuse the key revoked on B');
  // A reloads its stale file (which still has the key): that restores nothing.
  a.origo.reloadProxyKeys();
  await refusedAt(a.port, 'A to refuse it after reloading a stale file');
  // A new key for the same id is a new key: accepted wherever it is listed.
  const fresh = 'new-key-of-edge-1-0123456789';
  (b.origo.config as { proxyKeysFile?: string }).proxyKeysFile = keysFile({ ...KEYS, 'edge-1': fresh });
  b.origo.reloadProxyKeys();
  const back = await TestPeer.open(b.port, '/v1/proxy', 'edge-1 with a new key');
  back.send(registerMessage({ proxyId: 'edge-1', name: 'edge-1', secret: fresh }));
  await back.next('registered');
});

test('a proxy proven false on one instance is banned by id and key on instances started after the verdict, after a restart of them all, and after Redis restarted empty (issue 31)', async () => {
  const originUrl = await startOrigin();
  // The rogue's key is also listed under another id: the ban names the key as well as the id.
  const proxyKeysFile = keysFile({ ...KEYS, 'edge-2b': KEYS['edge-2'] });
  const options = clusterOptions({ allowPrivateOrigins: true, proxyKeysFile });
  const a = await startOrigo({ ...options, instanceId: 'A' });
  const keys = { honest: newKey(), rogue: newKey() };
  await registerProxy(a.port, 'edge-1', keys.honest);
  const rogue = await registerProxy(a.port, 'edge-2', keys.rogue);
  const victim = await connectClient(a.port);
  expect((await requestProxies(victim, 2)).sort()).toEqual(['edge-1', 'edge-2']);
  victim.send(
    conflictAbout(originUrl, { proxyId: 'edge-1', key: keys.honest }, { proxyId: 'edge-2', key: keys.rogue }),
  );
  expect(await victim.next('withdrawn')).toEqual({ type: 'withdrawn', proxyId: 'edge-2', reason: 'proven-false' });
  // A ends the rogue's registration at once (it would be refused if it came now).
  expect(await rogue.next('error')).toMatchObject({ code: 'unauthorized' });
  await rogue.closed();

  // B joins after the verdict (no broadcast reached it): it lists and offers the honest proxy only.
  const b = await startOrigo({ ...options, instanceId: 'B' });
  await waitFor('B to list the proxy of A', async () =>
    Object.keys(await listedInstances(b)).length === 1 ? true : undefined,
  );
  const client = await connectClient(b.port);
  for (let i = 0; i < 5; i++) expect(await requestProxies(client, 2)).toEqual(['edge-1']);
  // Moving to B under its id, or under another id its key opens, is refused.
  expect(await refusal(b.port, 'edge-2', KEYS['edge-2'])).toMatchObject({ code: 'unauthorized' });
  expect(await refusal(b.port, 'edge-2b', KEYS['edge-2'])).toMatchObject({ code: 'unauthorized' });

  // Every instance stops, so no memory holds the ban; a new one starts on the same Redis.
  await a.origo.close();
  await b.origo.close();
  const c = await startOrigo({ ...options, instanceId: 'C' });
  expect(await refusal(c.port, 'edge-2', KEYS['edge-2'])).toMatchObject({
    code: 'unauthorized',
    message: expect.stringContaining('proven false'),
  });
  await registerProxy(c.port, 'edge-1', keys.honest);

  // Redis restarted empty: C writes back the bans it knows, and an instance started later refuses too.
  const store = new Redis(redis.url);
  try {
    await redis.restart();
    const key = `${options.redisPrefix}proven-false`;
    await waitFor('C to write its bans back', async () => ((await store.zcard(key)) === 2 ? true : undefined));
  } finally {
    store.disconnect();
  }
  const d = await startOrigo({ ...options, instanceId: 'D' });
  expect(await refusal(d.port, 'edge-2b', KEYS['edge-2'])).toMatchObject({ code: 'unauthorized' });
});

test('a proxy draining on one instance is withdrawn from the clients the other offered it to', async () => {
  const [a, b] = await startPair();
  const proxy = await registerProxy(a.port, 'edge-1');
  const client = await connectClient(b.port);
  await offered(client, ['edge-1'], 'B to offer the proxy registered on A');
  proxy.send({ type: 'heartbeat', activeTransfers: 0, uploadBps: 0, capacityBps: 1_000_000, draining: true });
  expect(await client.next('withdrawn')).toEqual({ type: 'withdrawn', proxyId: 'edge-1', reason: 'draining' });
});

test('a client failing over keeps its id and its older session is replaced', async () => {
  const [a, b] = await startPair();
  const first = await TestPeer.open(a.port, '/v1/client', 'client on A');
  first.send({ type: 'hello', version: SIGNALLING_VERSION });
  const welcome = await first.next('welcome');
  const second = await TestPeer.open(b.port, '/v1/client', 'client on B');
  second.send({ type: 'hello', version: SIGNALLING_VERSION, token: welcome.token });
  expect(await second.next('welcome')).toMatchObject({ clientId: welcome.clientId });
  expect(await first.next('error')).toMatchObject({ code: 'replaced' });
  await first.closed();
});

test('redis down: a signal to a proxy on another instance is refused with a reason, local ones still work', async () => {
  const [a, b] = await startPair();
  await registerProxy(a.port, 'edge-1');
  const local = await registerProxy(b.port, 'edge-2');
  const client = await connectClient(b.port);
  await offered(client, ['edge-1', 'edge-2'], 'B to offer both proxies');
  await redis.kill();
  try {
    await waitFor('B to notice redis is gone', async () => {
      client.send({ type: 'signal', connectionId: `probe-${Date.now()}`, proxyId: 'edge-1', description: OFFER });
      await new Promise((r) => setTimeout(r, 100));
      return client.received.some((m) => m.type === 'error' && m.code === 'relay-unavailable') ? true : undefined;
    });
    client.send({ type: 'signal', connectionId: 'local', proxyId: 'edge-2', description: OFFER });
    await local.next('signal', (m) => m.connectionId === 'local');
  } finally {
    await redis.start();
  }
});

/** An origo process (so it can be SIGKILLed), with the pair's options as flags. */
async function spawnOrigo(o: OrigoOptions): Promise<{ child: ChildProcess; port: number }> {
  const args = [
    'origo/src/main.ts',
    '--port',
    '0',
    '--db',
    ':memory:',
    '--redis',
    o.redisUrl!,
    '--redis-prefix',
    o.redisPrefix!,
    '--token-key',
    o.tokenKeyFile!,
    '--proxy-keys',
    o.proxyKeysFile!,
    '--cluster-refresh-ms',
    String(o.clusterRefreshMs),
    '--heartbeat-interval-ms',
    String(o.heartbeatIntervalMs),
    '--instance-id',
    o.instanceId!,
  ];
  // node itself (not the tsx wrapper), so SIGKILL reaches the process holding the sockets.
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: join(__dirname, '../..'),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  const port = await waitFor(
    'the origo process to listen',
    async () => {
      if (child.exitCode !== null) throw new Error(`origo exited with ${child.exitCode}`);
      const line = output.split('\n').find((l) => l.includes('"origo listening"'));
      return line === undefined ? undefined : (JSON.parse(line) as { port: number }).port;
    },
    20_000,
    100,
    () => output.slice(-3000),
  );
  return { child, port };
}
