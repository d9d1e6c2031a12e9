/**
 * MutpClient with several origo instances, over real sockets on loopback: real origos in-process
 * (sharing one token key, as instances of one deployment do; no Redis, so each knows only its own
 * proxies), real proxies (HTTP baseline and WebRTC), and a scripted origo where a test needs one
 * to fail at an exact step. A dead or lost instance is left for the next one; the client keeps
 * its id; a get() that loses origo before its proxies are connected finishes on the next one.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Codec, Mode } from '@mutp/shared';
import { ClientError, ClientHost, MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { WebSocketServer } from 'ws';
import { closeAll, SECRET, startOrigo, TestOrigo } from '@mutp/testing/origo';
import { makeObject, objectOrigin, TestServer } from '@mutp/testing/origin';
import { createTestProxy, Proxy } from '@mutp/testing/proxy';
import { until, within } from '@mutp/testing/wait';
import { createNodeHost } from '../src/node-host';

const WAIT_MS = 20_000;
const object = makeObject(120_000, 15);

let dir: string;
let tokenKey: string;
let origin: TestServer;
let codecs: Record<Mode, Codec>;
const proxies: Proxy[] = [];
const clients: MutpClient[] = [];
const scripted: ScriptedOrigo[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mutp-client-failover-'));
  tokenKey = join(dir, 'token-key.pem');
  writeFileSync(tokenKey, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }));
  origin = await objectOrigin({ '/seg.ts': object });
  codecs = await loadNodeCodecs();
});

afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  for (const proxy of proxies.splice(0)) await proxy.close();
  for (const origo of scripted.splice(0)) await origo.close();
  await closeAll();
});

afterAll(async () => {
  await origin?.close();
  rmSync(dir, { recursive: true, force: true });
  releaseNodeRtc();
});

/** A real origo sharing the token key, with a real proxy registered on it. */
async function origoWithProxy(name: string): Promise<{ origo: TestOrigo; clientUrl: string; proxy: Proxy }> {
  const origo = await startOrigo({ allowLocalProxies: true, tokenKeyFile: tokenKey, heartbeatIntervalMs: 500 });
  const proxy = await createTestProxy(
    { origoUrl: `ws://127.0.0.1:${origo.port}/v1/proxy`, secret: SECRET, name, uploadLimitKBps: 4096 },
    { codecs },
  );
  proxies.push(proxy);
  await proxy.start();
  await until(() => proxy.stats().origo?.state === 'registered', WAIT_MS, `${name} to register`);
  return { origo, clientUrl: `ws://127.0.0.1:${origo.port}/v1/client`, proxy };
}

/** A Node host whose first random number (the client's starting instance) is `first`. */
function hostStartingAt(first: number): ClientHost {
  const host = createNodeHost({ bindAddress: '127.0.0.1' });
  const random = host.random;
  let calls = 0;
  return { ...host, random: () => (calls++ === 0 ? first : random()) };
}

function client(host: ClientHost, origoUrls: string[], origoTimeoutMs = 10_000): MutpClient {
  const c = new MutpClient(host, { origoUrls, codecs, connectTimeoutMs: 10_000, origoTimeoutMs });
  clients.push(c);
  return c;
}

/** A loopback ws:// URL nothing listens on (bound, then released). */
async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `ws://127.0.0.1:${port}/v1/client`;
}

/** Client ids the origo welcomed (from its logs), in order. */
function welcomed(origo: TestOrigo): { clientId: string; resumed: boolean }[] {
  return origo.logs
    .filter((l) => l.msg === 'client connected')
    .map((l) => ({ clientId: l.clientId as string, resumed: l.resumed as boolean }));
}

interface ScriptedOrigo {
  url: string;
  /** Message types received from clients, in order. */
  heard: string[];
  close(): Promise<void>;
}

/**
 * An origo that welcomes a client and then fails it at one step: drops the session when asked for
 * proxies, or (after offering a proxy that exists nowhere) at the client's first WebRTC signal;
 * or never answers the request for proxies ('silent').
 */
async function scriptedOrigo(dropAt: 'request-proxies' | 'signal' | 'silent'): Promise<ScriptedOrigo> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const heard: string[] = [];
  wss.on('connection', (ws) => {
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { type: string; requestId?: string };
      heard.push(m.type);
      if (m.type === dropAt) {
        ws.terminate();
      } else if (m.type === 'hello') {
        const welcome = { type: 'welcome', clientId: 'scripted-client', token: 'not.a-real.token', expiresAt: 0 };
        ws.send(JSON.stringify(welcome));
      } else if (m.type === 'request-proxies' && dropAt !== 'silent') {
        const ghost = { proxyId: 'ghost', name: 'ghost', httpUrl: 'http://127.0.0.1:9', capacityBps: 1_000_000 };
        ws.send(JSON.stringify({ type: 'proxies', requestId: m.requestId, proxies: [ghost] }));
      }
    });
  });
  const result: ScriptedOrigo = {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/v1/client`,
    heard,
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of wss.clients) ws.terminate();
        wss.close(() => resolve());
      }),
  };
  scripted.push(result);
  return result;
}

const get = (c: MutpClient, mode: 'http' | 'rlnc', signal?: AbortSignal) =>
  within(c.get(`${origin.url}/seg.ts`, { mode, proxies: 1, signal }), WAIT_MS, `a ${mode} download`);

function expectObject(bytes: Uint8Array): void {
  expect(bytes.length).toBe(object.length);
  expect(Buffer.from(bytes).equals(Buffer.from(object))).toBe(true);
}

test('[dead, live]: the proxy list comes from the live instance', async () => {
  const live = await origoWithProxy('edge-live');
  const c = client(hostStartingAt(0), [await deadUrl(), live.clientUrl]);
  const result = await get(c, 'http');
  expectObject(result.object);
  expect(result.sources.map((s) => s.name)).toEqual(['edge-live']);
  expect(c.origoUrl).toBe(live.clientUrl);
  expect(welcomed(live.origo)).toHaveLength(1);
});

test('a lost session moves the client to the next instance, under the same client id', async () => {
  const a = await origoWithProxy('edge-a');
  const b = await origoWithProxy('edge-b');
  const c = client(hostStartingAt(0), [a.clientUrl, b.clientUrl]);
  const first = await get(c, 'rlnc');
  expectObject(first.object);
  expect(first.sources.map((s) => s.name)).toEqual(['edge-a']);
  const [onA] = welcomed(a.origo);

  // Instance A goes (its proxy with it: it knew no other origo).
  await a.proxy.close();
  await a.origo.origo.close();
  const second = await get(c, 'rlnc');
  expectObject(second.object);
  expect(second.sources.map((s) => s.name)).toEqual(['edge-b']);
  expect(c.origoUrl).toBe(b.clientUrl);
  // The token signed by A (same key) kept the client's id on B.
  expect(welcomed(b.origo)).toEqual([{ clientId: onA.clientId, resumed: true }]);
});

test('a get() whose session drops while it waits for proxies finishes on the next instance', async () => {
  const dropping = await scriptedOrigo('request-proxies');
  const b = await origoWithProxy('edge-b');
  const c = client(hostStartingAt(0), [dropping.url, b.clientUrl]);
  const result = await get(c, 'http');
  expectObject(result.object);
  expect(result.sources.map((s) => s.name)).toEqual(['edge-b']);
  expect(dropping.heard).toEqual(['hello', 'request-proxies']);
  expect(c.origoUrl).toBe(b.clientUrl);
});

test('a get() whose session drops while it connects to proxies finishes on the next instance', async () => {
  const dropping = await scriptedOrigo('signal');
  const b = await origoWithProxy('edge-b');
  const c = client(hostStartingAt(0), [dropping.url, b.clientUrl]);
  const result = await get(c, 'rlnc');
  expectObject(result.object);
  expect(result.sources.map((s) => s.name)).toEqual(['edge-b']);
  expect(dropping.heard.slice(0, 3)).toEqual(['hello', 'request-proxies', 'signal']);
});

test('an instance that stops answering is left after origoTimeoutMs for the next one', async () => {
  const silent = await scriptedOrigo('silent');
  const b = await origoWithProxy('edge-b');
  const c = client(hostStartingAt(0), [silent.url, b.clientUrl], 1000);
  const result = await get(c, 'http');
  expectObject(result.object);
  expect(result.sources.map((s) => s.name)).toEqual(['edge-b']);
  expect(silent.heard).toEqual(['hello', 'request-proxies']);
  expect(c.origoUrl).toBe(b.clientUrl);
});

test('every instance down: origo-unreachable naming each; an abort while trying is honoured', async () => {
  const c = client(hostStartingAt(1), [await deadUrl(), await deadUrl()]);
  const error = await get(c, 'http').then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  expect((error as ClientError).code).toBe('origo-unreachable');
  expect((error as ClientError).message).toMatch(/no origo instance answered: .*; /);

  // An instance that accepts the socket and never welcomes: the caller's abort ends the wait.
  const silent = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise<void>((resolve) => silent.once('listening', () => resolve()));
  scripted.push({
    url: '',
    heard: [],
    close: () =>
      new Promise<void>((resolve) => {
        for (const ws of silent.clients) ws.terminate();
        silent.close(() => resolve());
      }),
  });
  const stuck = client(hostStartingAt(0), [`ws://127.0.0.1:${(silent.address() as AddressInfo).port}/v1/client`]);
  const abort = new AbortController();
  const pending = get(stuck, 'http', abort.signal).then(
    () => undefined,
    (e: unknown) => e,
  );
  await until(() => silent.clients.size === 1, WAIT_MS, 'the client to open its socket');
  abort.abort();
  const cancelled = await pending;
  expect(cancelled).toBeInstanceOf(ClientError);
  expect((cancelled as ClientError).code).toBe('cancelled');
});
