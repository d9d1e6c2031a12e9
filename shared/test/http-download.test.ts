/**
 * Integrity of the Parallel HTTP mode against polluting proxies: real HTTP servers on loopback
 * play honest and hostile proxies; the polluter answers first, as a rogue proxy would.
 */
import { createHash } from 'node:crypto';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProxyInfo } from '../src';
import { ClientError, FetchLike, runHttpDownload, systemClock } from '../src/client';

const OBJECT = Buffer.alloc(200_000, 0).map((_, i) => (i * 31 + 7) & 0xff);
const FAKE = Buffer.alloc(200_000, 0).map((_, i) => (i * 17 + 3) & 0xff);
const hexOf = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const sha256 = (b: Uint8Array) => new Uint8Array(createHash('sha256').update(b).digest());

interface Behaviour {
  body: Uint8Array;
  /** The digest the proxy states (default: of its body). */
  digest?: string;
  delayMs: number;
}

const servers: Server[] = [];

async function proxy(name: string, b: Behaviour): Promise<ProxyInfo> {
  const server = createServer((_req, res) => {
    setTimeout(() => {
      res.writeHead(200, {
        'content-type': 'video/mp2t',
        'content-length': b.body.length,
        'x-mutp-sha256': b.digest ?? hexOf(b.body),
      });
      res.end(b.body);
    }, b.delayMs);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { proxyId: `p-${name}`, name, httpUrl: `http://127.0.0.1:${port}`, capacityBps: 1 };
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

const fetchLike = globalThis.fetch as unknown as FetchLike;
const get = (proxies: ProxyInfo[], quorum?: number) =>
  runHttpDownload(proxies, 'https://cdn.example/seg.ts', fetchLike, systemClock, {
    maxBytes: 1 << 20,
    sha256,
    quorum,
  });

test('a fast proxy serving another object with its own digest is a conflict no majority settles (issue 31)', async () => {
  const proxies = [
    await proxy('rogue', { body: FAKE, delayMs: 0 }),
    await proxy('honest-1', { body: OBJECT, delayMs: 60 }),
    await proxy('honest-2', { body: OBJECT, delayMs: 80 }),
  ];
  const error = await get(proxies).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ClientError);
  expect((error as ClientError).message).toMatch(/the proxies disagree on the object's digest/);
});

test('two agreeing rogues do not outvote an honest proxy: its statement fails the download', async () => {
  const proxies = [
    await proxy('rogue-1', { body: FAKE, delayMs: 40 }),
    await proxy('rogue-2', { body: FAKE, delayMs: 40 }),
    await proxy('honest', { body: OBJECT, delayMs: 0 }),
  ];
  const error = await get(proxies).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ClientError);
  expect((error as ClientError).message).toMatch(/disagree/);
});

test('a proxy stating the right digest over wrong bytes is caught by its own body', async () => {
  const proxies = [
    await proxy('liar', { body: FAKE, digest: hexOf(OBJECT), delayMs: 0 }),
    await proxy('honest', { body: OBJECT, delayMs: 60 }),
  ];
  const r = await get(proxies);
  expect(hexOf(r.object)).toBe(hexOf(OBJECT));
  expect(r.polluters).toEqual([
    { proxyId: 'p-liar', name: 'liar', reason: 'body does not match the digest it stated' },
  ]);
});

test('two proxies that disagree give no quorum: the download fails rather than guess', async () => {
  const proxies = [await proxy('a', { body: FAKE, delayMs: 0 }), await proxy('b', { body: OBJECT, delayMs: 20 })];
  const error = await get(proxies).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(ClientError);
  expect((error as ClientError).code).toBe('http-failed');
  expect((error as ClientError).message).toMatch(/the proxies disagree on the object's digest/);
});

test('one proxy alone is trusted (quorum of one), as documented', async () => {
  const r = await get([await proxy('only', { body: OBJECT, delayMs: 0 })]);
  expect(hexOf(r.object)).toBe(hexOf(OBJECT));
  expect(r.polluters).toEqual([]);
});
