/**
 * A real origo started in-process on port 0, and fake clients speaking the real signalling
 * protocol to it over real sockets on loopback: for origo's own tests and for the proxy and client
 * tests that need a live broker. Everything opened here is closed by closeAll() (afterEach); every
 * wait is bounded and fails with what it was waiting for.
 */
import { createOrigo, type Origo, type OrigoOptions } from '@mutp/origo';
import { SIGNALLING_VERSION } from '@mutp/shared';
import WebSocket from 'ws';

/** The proxy secret and admin token every test origo accepts. */
export const SECRET = 'test-proxy-secret';
export const ADMIN = 'test-admin-token';
const WAIT_MS = 5000;

export type Json = Record<string, unknown> & { type?: string };

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

/** Everything a test opened, closed in afterEach by closeAll(). */
const opened: { close(): Promise<void> }[] = [];

/** Closes everything opened since the last call, newest first. */
export async function closeAll(): Promise<void> {
  const all = opened.splice(0).reverse();
  for (const item of all) await item.close();
}

/** Registers something for closeAll (afterEach). */
export function track(item: { close(): Promise<void> }): void {
  opened.push(item);
}

export interface TestOrigo {
  origo: Origo;
  port: number;
  http: string;
  /** Every log line origo wrote, parsed. */
  logs: LogLine[];
}

/** An origo on 127.0.0.1, port 0, in-memory records, logging at debug into `logs`. */
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
  track({ close: () => origo.close() });
  const { port } = await origo.listen();
  return { origo, port, http: `http://127.0.0.1:${port}`, logs };
}

/** One signalling socket to origo, keeping what it receives until a test takes it. */
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
    track({ close: () => peer.close() });
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

  /** Resolves once `done()` holds, checked on every socket event; fails naming `what` and what is unread. */
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

/** GET `url` (with a bearer token if given): the status and the body parsed as JSON, if any. */
export async function getJson(url: string, token?: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : undefined);
  const text = await response.text();
  return { status: response.status, body: text.length > 0 ? (JSON.parse(text) as unknown) : undefined };
}

/** Well-formed signalling payloads that origo relays without reading further. */
export const OFFER = { type: 'offer', sdp: 'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\n' };
export const ANSWER = { type: 'answer', sdp: 'v=0\r\no=- 2 1 IN IP4 127.0.0.1\r\ns=-\r\n' };
export const CANDIDATE = { candidate: 'candidate:1 1 UDP 2122252543 127.0.0.1 50000 typ host', mid: '0' };
