/**
 * MutpClient (as the downloader makes it: with a back-off policy and per-request limits) against
 * a real misbehaving origo on loopback: a TCP server that accepts and never answers (hung), and a
 * port with nothing listening (refused). Counts the TCP connections the hung server accepted:
 * one attempt per back-off period, shared by concurrent requests; a cancelled get() answers at
 * once and origo is still marked down when the attempt it started times out.
 */
import { freePort } from '@mutp/testing/ports';
import { SilentServer, startSilentServer } from '@mutp/testing/silent-server';
import { uncodedCodec } from '@mutp/shared';
import { ClientError, ClientHost, MutpClient, systemClock, WebSocketLike } from '@mutp/shared/client';
import WebSocket from 'ws';

const WAIT_MS = 5000;
const URL_ = 'http://127.0.0.1:1/seg.m4s';

let hung: SilentServer;
let hungUrl: string;
const clients: MutpClient[] = [];

beforeAll(async () => {
  hung = await startSilentServer();
  hungUrl = `ws://127.0.0.1:${hung.port}/v1/client`;
});

afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

afterAll(async () => {
  await hung?.close();
});

/** A port nothing listens on (free a moment ago). */
async function refusedUrl(): Promise<string> {
  return `ws://127.0.0.1:${await freePort()}/v1/client`;
}

function host(): ClientHost {
  const unused = () => {
    throw new Error('not used: origo is never reached');
  };
  return {
    clock: systemClock,
    random: () => (Math.random() * 2 ** 32) >>> 0,
    webSocket: (url) => new WebSocket(url) as unknown as WebSocketLike,
    rtc: { createPeer: unused },
    fetch: unused,
  };
}

function client(url: string, backoff = { firstMs: 400, maxMs: 60_000 }): MutpClient {
  const c = new MutpClient(host(), {
    origoUrl: url,
    codecs: { uncoded: uncodedCodec, rlnc: uncodedCodec, fountain: uncodedCodec },
    origoBackoff: backoff,
  });
  clients.push(c);
  return c;
}

async function failure(p: Promise<unknown>): Promise<ClientError> {
  const e = await p.then(
    () => new Error('expected a failure'),
    (x: unknown) => x,
  );
  if (!(e instanceof ClientError)) throw e;
  return e;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const end = Date.now() + WAIT_MS;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`timed out after ${WAIT_MS} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('hung origo: one attempt shared by concurrent requests, handshake timeout named, then origo-down', async () => {
  const c = client(hungUrl);
  const before = hung.accepted;
  const opts = { mode: 'rlnc' as const, proxies: 2, origoTimeoutMs: 300 };
  const errors = await Promise.all([1, 2, 3].map(() => failure(c.get(URL_, opts))));
  expect(hung.accepted - before).toBe(1);
  for (const e of errors) {
    expect(e.code).toBe('origo-unreachable');
    expect(e.message).toMatch(/handshake timed out \(no WebSocket connection within 300 ms\)/);
  }
  expect(c.origoDown()).toMatchObject({ periodMs: 400, failures: 1 });
  // In the back-off period: answered at once, no new connection.
  const down = await failure(c.get(URL_, opts));
  expect(down.code).toBe('origo-down');
  expect(down.message).toMatch(/^origo-down: origo-down \(back-off 0.4 s, .* left\): .*handshake timed out/);
  expect(hung.accepted - before).toBe(1);
  // After it: one new attempt, and the next period is twice as long.
  await until(() => c.origoDown() === undefined, 'the back-off period to end');
  expect((await failure(c.get(URL_, opts))).code).toBe('origo-unreachable');
  expect(hung.accepted - before).toBe(2);
  expect(c.origoDown()).toMatchObject({ periodMs: 800, failures: 2 });
});

test('a cancelled get() rejects at once; the attempt it started still marks origo down', async () => {
  const c = client(hungUrl);
  const before = hung.accepted;
  const abort = new AbortController();
  const pending = failure(c.get(URL_, { mode: 'rlnc', proxies: 2, origoTimeoutMs: 300, signal: abort.signal }));
  await until(() => hung.accepted - before === 1, 'the hung server to accept the connection');
  abort.abort();
  const e = await pending;
  expect(e.code).toBe('cancelled');
  // Answered while the attempt was still under way (not yet marked down, one connection).
  expect(c.origoDown()).toBeUndefined();
  expect(hung.accepted - before).toBe(1);
  await until(() => c.origoDown() !== undefined, 'origo to be marked down');
  expect(c.origoDown()?.cause).toMatch(/handshake timed out/);
  // An already aborted signal starts nothing.
  const before2 = hung.accepted;
  await until(() => c.origoDown() === undefined, 'the back-off period to end');
  const e2 = await failure(c.get(URL_, { mode: 'rlnc', proxies: 2, signal: AbortSignal.abort() }));
  expect(e2.code).toBe('cancelled');
  await new Promise((r) => setTimeout(r, 50));
  expect(hung.accepted).toBe(before2);
});

test('refused origo: named at once, then origo-down', async () => {
  const c = client(await refusedUrl());
  const e = await failure(c.get(URL_, { mode: 'http', proxies: 2, origoTimeoutMs: 2000 }));
  expect(e.code).toBe('origo-unreachable');
  expect(e.message).toMatch(/connection refused or failed/);
  expect((await failure(c.get(URL_, { mode: 'http', proxies: 2 }))).code).toBe('origo-down');
});

test('without a back-off policy (the Node client) every request tries origo', async () => {
  const c = new MutpClient(host(), {
    origoUrl: await refusedUrl(),
    codecs: { uncoded: uncodedCodec, rlnc: uncodedCodec, fountain: uncodedCodec },
  });
  clients.push(c);
  expect((await failure(c.get(URL_, { mode: 'rlnc', proxies: 1 }))).code).toBe('origo-unreachable');
  expect((await failure(c.get(URL_, { mode: 'rlnc', proxies: 1 }))).code).toBe('origo-unreachable');
  expect(c.origoDown()).toBeUndefined();
});

test('prepare() opens origo ahead of the first request: a hung origo is down before any get()', async () => {
  const c = client(hungUrl);
  const before = hung.accepted;
  c.prepare(300);
  c.prepare(300); // while connecting: nothing more
  await until(() => hung.accepted - before === 1, 'the hung server to accept the connection');
  await until(() => c.origoDown() !== undefined, 'origo to be marked down');
  expect(c.origoDown()).toMatchObject({ periodMs: 400, failures: 1 });
  // The first request is answered at once, without a new connection; prepare() in back-off does nothing.
  expect((await failure(c.get(URL_, { mode: 'rlnc', proxies: 2 }))).code).toBe('origo-down');
  c.prepare(300);
  expect(hung.accepted - before).toBe(1);
});
