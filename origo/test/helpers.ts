/**
 * Test peers speaking the real signalling protocol over real sockets on loopback, and an origo
 * started in-process on port 0. Every wait is bounded and fails with what it was waiting for.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { SIGNALLING_VERSION } from '@mutp/shared';
import { OrigoOptions } from '../src/config';
import { createOrigo, Origo } from '../src/server';

export const SECRET = 'test-proxy-secret';
export const ADMIN = 'test-admin-token';
const WAIT_MS = 5000;

type Json = Record<string, unknown> & { type?: string };

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** Everything a test opened, closed in afterEach by closeAll(). */
const opened: { close(): Promise<void> }[] = [];

export async function closeAll(): Promise<void> {
  const all = opened.splice(0).reverse();
  for (const item of all) await item.close();
}

/** Waits for a promise at most `ms`, failing with what was awaited. */
export async function within<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Registers something for closeAll (afterEach). */
export function track(item: { close(): Promise<void> }): void {
  opened.push(item);
}

export interface TestOrigo {
  origo: Origo;
  port: number;
  http: string;
  logs: LogLine[];
}

export async function startOrigo(overrides: Partial<OrigoOptions> = {}): Promise<TestOrigo> {
  const logs: LogLine[] = [];
  const origo = createOrigo({
    port: 0,
    proxySecret: SECRET,
    adminToken: ADMIN,
    db: ':memory:',
    logLevel: 'debug',
    logStream: { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) },
    // Test names (*.test) never reach the system's resolver: they do not resolve.
    lookup: async () => [],
    ...overrides,
  });
  opened.push({ close: () => origo.close() });
  const { port } = await origo.listen();
  return { origo, port, http: `http://127.0.0.1:${port}`, logs };
}

export class TestPeer {
  readonly received: Json[] = [];
  private waiters: (() => void)[] = [];
  closeEvent?: { code: number; reason: string };

  private constructor(
    readonly label: string,
    readonly socket: WebSocket,
  ) {
    socket.on('open', () => this.wake());
    socket.on('message', (data) => {
      this.received.push(JSON.parse(String(data)) as Json);
      this.wake();
    });
    socket.on('close', (code, reason) => {
      this.closeEvent = { code, reason: reason.toString() };
      this.wake();
    });
    socket.on('error', () => {}); // the close event carries the outcome
  }

  static async open(
    port: number,
    path: '/v1/proxy' | '/v1/client',
    label: string = path,
    /** Connect from this loopback address (127.0.0.x), to play distinct hosts. */
    localAddress?: string,
  ): Promise<TestPeer> {
    const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`, localAddress ? { localAddress } : {});
    const peer = new TestPeer(label, socket);
    opened.push({ close: () => peer.close() });
    await peer.until(() => socket.readyState === WebSocket.OPEN || peer.closeEvent !== undefined, 'the socket to open');
    if (peer.closeEvent) throw new Error(`${label}: closed before opening (${peer.closeEvent.code})`);
    return peer;
  }

  send(message: Json): void {
    this.socket.send(JSON.stringify(message));
  }

  sendRaw(frame: string | Buffer): void {
    this.socket.send(frame);
  }

  /** Removes and returns the first received message of this type (waiting for it if need be). */
  async next(type: string, match: (m: Json) => boolean = () => true): Promise<Json> {
    let found: Json | undefined;
    await this.until(() => {
      const i = this.received.findIndex((m) => m.type === type && match(m));
      if (i < 0) return false;
      found = this.received.splice(i, 1)[0];
      return true;
    }, `a '${type}' message`);
    return found!;
  }

  /** Waits for origo to close the socket. */
  async closed(): Promise<{ code: number; reason: string }> {
    await this.until(() => this.closeEvent !== undefined, 'the socket to close');
    return this.closeEvent!;
  }

  async close(): Promise<void> {
    if (this.closeEvent) return;
    this.socket.close();
    await this.until(() => this.closeEvent !== undefined, 'the socket to close').catch(() => this.socket.terminate());
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  until(done: () => boolean, what: string, timeoutMs = WAIT_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(
          new Error(
            `${this.label}: timed out after ${timeoutMs} ms waiting for ${what}; unread: ${JSON.stringify(this.received)}` +
              (this.closeEvent ? `, closed ${this.closeEvent.code} ${this.closeEvent.reason}` : ''),
          ),
        );
      }, timeoutMs);
      const check = () => {
        if (done()) {
          clearTimeout(timer);
          resolve();
        } else {
          this.waiters.push(check);
        }
      };
      check();
    });
  }
}

export interface ProxyOptions {
  proxyId?: string;
  name?: string;
  capacityBps?: number;
  maxTransfers?: number;
  modes?: string[];
  secret?: string;
}

/** A well-formed Ed25519 public key for fake proxies (origo only passes it on). */
export const TEST_ASSERTION_KEY = 'A'.repeat(43);

export function registerMessage(o: ProxyOptions = {}): Json {
  const name = o.name ?? 'edge';
  return {
    type: 'register',
    version: SIGNALLING_VERSION,
    secret: o.secret ?? SECRET,
    ...(o.proxyId !== undefined ? { proxyId: o.proxyId } : {}),
    name,
    httpUrl: `http://${name}.test:8800/`,
    capacityBps: o.capacityBps ?? 1_000_000,
    maxTransfers: o.maxTransfers ?? 16,
    modes: o.modes ?? ['uncoded', 'rlnc', 'fountain'],
    assertionKey: TEST_ASSERTION_KEY,
  };
}

/** A registered fake proxy; `id` is the proxyId origo confirmed. */
export async function connectProxy(port: number, o: ProxyOptions = {}): Promise<TestPeer & { id: string }> {
  const peer = await TestPeer.open(port, '/v1/proxy', `proxy ${o.name ?? o.proxyId ?? ''}`);
  peer.send(registerMessage(o));
  const registered = await peer.next('registered');
  return Object.assign(peer, { id: registered.proxyId as string });
}

/** A fake client past hello/welcome; `id` is its clientId. */
export async function connectClient(
  port: number,
  label = 'client',
  localAddress?: string,
): Promise<TestPeer & { id: string }> {
  const peer = await TestPeer.open(port, '/v1/client', label, localAddress);
  peer.send({ type: 'hello', version: SIGNALLING_VERSION });
  const welcome = await peer.next('welcome');
  return Object.assign(peer, { id: welcome.clientId as string });
}

export function heartbeat(proxy: TestPeer, activeTransfers: number, uploadBps: number, capacityBps: number): void {
  proxy.send({ type: 'heartbeat', activeTransfers, uploadBps, capacityBps });
}

let requests = 0;
/** Asks origo for proxies and returns their ids in the order given. */
export async function requestProxies(
  client: TestPeer,
  count: number,
  extra: { mode?: string; exclude?: string[] } = {},
): Promise<string[]> {
  const requestId = `q${++requests}`;
  client.send({ type: 'request-proxies', requestId, count, ...extra });
  const answer = await client.next('proxies', (m) => m.requestId === requestId);
  return (answer.proxies as { proxyId: string }[]).map((p) => p.proxyId);
}

/**
 * A round trip through origo on a client's socket: once it returns, every frame the client sent
 * before has been handled (origo handles one socket's frames in order), and so has every message
 * origo sent to other sockets because of them been written before.
 */
export async function barrier(client: TestPeer): Promise<void> {
  await requestProxies(client, 1);
}

/** The same for a proxy: a signal for an unknown connection comes back as an error. */
export async function proxyBarrier(proxy: TestPeer): Promise<void> {
  const connectionId = `barrier-${++requests}`;
  proxy.send({ type: 'signal', connectionId, candidate: { candidate: '', mid: '0' } });
  await proxy.next('error', (m) => m.code === 'unknown-connection' && String(m.message).includes(connectionId));
}

export async function getJson(url: string, token?: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : undefined);
  const text = await response.text();
  return { status: response.status, body: text.length > 0 ? (JSON.parse(text) as unknown) : undefined };
}

export const OFFER = { type: 'offer', sdp: 'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\n' };
export const ANSWER = { type: 'answer', sdp: 'v=0\r\no=- 2 1 IN IP4 127.0.0.1\r\ns=-\r\n' };
export const CANDIDATE = { candidate: 'candidate:1 1 UDP 2122252543 127.0.0.1 50000 typ host', mid: '0' };

/** Writes a --proxy-keys file (removed by closeAll). */
export function keysFile(keys: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'origo-keys-'));
  const file = join(dir, 'proxy-keys.json');
  writeFileSync(file, JSON.stringify(keys));
  opened.push({ close: async () => rmSync(dir, { recursive: true, force: true }) });
  return file;
}

export const KEY9 = 'key-of-edge-9-0123456789';
