/**
 * Integrity of the Parallel HTTP mode against polluting proxies: real HTTP servers on loopback
 * play honest and hostile proxies; the polluter answers first, as a rogue proxy would. Proxies
 * with an assertion key sign their answers as the real proxy does (signHttpAnswer).
 */
import { createHash, generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProxyInfo } from '../src';
import { decode, decodeAssertionKey, MessageType, signHttpAnswer, verifyMeta } from '../src/internal';
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
  /** The proxy's assertion key: origo publishes it, and the proxy signs its answers with `signsWith`. */
  key?: Key;
  /** The key it signs with (default: its own; none: it sends no META, as a man in the middle would). */
  signsWith?: Key | 'none';
}

interface Key {
  privateKey: KeyObject;
  /** base64url, as origo publishes it. */
  text: string;
}

function newKey(): Key {
  const pair = generateKeyPairSync('ed25519');
  return { privateKey: pair.privateKey, text: pair.publicKey.export({ format: 'jwk' }).x as string };
}

const servers: Server[] = [];

async function proxy(name: string, b: Behaviour): Promise<ProxyInfo> {
  const proxyId = `p-${name}`;
  const server = createServer((req, res) => {
    const query = new URL(req.url ?? '/', 'http://proxy.invalid').searchParams;
    const signer = b.signsWith === 'none' ? undefined : (b.signsWith ?? b.key);
    // A ranged request (start and length) gets those bytes, stated as the real proxy states them.
    const range = query.has('start')
      ? { start: Number(query.get('start')), length: Number(query.get('length')) }
      : undefined;
    const body = range ? b.body.subarray(range.start, range.start + range.length) : b.body;
    const served = range && { start: range.start, completeLength: b.body.length };
    const digest = b.digest ?? hexOf(body);
    const meta =
      signer &&
      signHttpAnswer(
        {
          bytes: body,
          digest: Buffer.from(digest, 'hex'),
          attributes: { contentType: 'video/mp2t', ...(served ? { range: served } : {}) },
        },
        { url: query.get('url') ?? '', ...(range ? { range } : {}) },
        { proxyId, sign: (m) => new Uint8Array(sign(null, m, signer.privateKey)) },
        sha256,
      );
    setTimeout(() => {
      res.writeHead(200, {
        'content-type': 'video/mp2t',
        'content-length': body.length,
        'x-mutp-sha256': digest,
        ...(meta ? { 'x-mutp-meta': Buffer.from(meta).toString('base64') } : {}),
        ...(served
          ? { 'x-mutp-range-start': String(served.start), 'x-mutp-complete-length': String(served.completeLength) }
          : {}),
      });
      res.end(body);
    }, b.delayMs);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    proxyId,
    name,
    httpUrl: `http://127.0.0.1:${port}`,
    capacityBps: 1,
    ...(b.key ? { assertionKey: b.key.text } : {}),
  };
}

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

const fetchLike = globalThis.fetch as unknown as FetchLike;
const URL_ = 'https://cdn.example/seg.ts';
const get = (proxies: ProxyInfo[], quorum?: number, hooks: object = {}) =>
  runHttpDownload(proxies, URL_, fetchLike, systemClock, {
    maxBytes: 1 << 20,
    sha256,
    quorum,
    ...hooks,
  });

describe('signed answers (issue 31: evidence, not counting)', () => {
  test('a rogue that signs its altered object fails the download, and both sides signed statements go to origo', async () => {
    const keys = { rogue: newKey(), honest1: newKey(), honest2: newKey() };
    const proxies = [
      await proxy('rogue', { body: FAKE, delayMs: 0, key: keys.rogue }),
      await proxy('honest-1', { body: OBJECT, delayMs: 30, key: keys.honest1 }),
      await proxy('honest-2', { body: OBJECT, delayMs: 50, key: keys.honest2 }),
    ];
    const conflicts: { proxyId: string; meta: Uint8Array }[][] = [];
    const error = await get(proxies, undefined, { onConflict: (s: (typeof conflicts)[0]) => conflicts.push(s) }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).message).toMatch(/disagree/);
    // What origo gets: each statement verifies against the key that proxy registered, and they
    // state two digests, the rogue's being the fake object's (origo's verdict: proven false).
    expect(conflicts).toHaveLength(1);
    const digests = conflicts[0].map(({ proxyId, meta }) => {
      const decoded = decode(meta);
      if (!decoded.ok || decoded.value.type !== MessageType.Meta) throw new Error('not a META');
      const key = proxies.find((p) => p.proxyId === proxyId)!.assertionKey!;
      expect(verifyMeta(decoded.value, { url: URL_ }, proxyId, decodeAssertionKey(key)!)).toBe(true);
      return [proxyId, Buffer.from(decoded.value.digest).toString('hex')];
    });
    expect(digests).toContainEqual(['p-rogue', hexOf(FAKE)]);
    expect(digests.some(([id, d]) => id !== 'p-rogue' && d === hexOf(OBJECT))).toBe(true);
  });

  test.each([
    ['no META at all (a man in the middle)', 'none' as const],
    ['a META signed by another key', newKey()],
  ])('an answer with %s counts neither way: the signed pair completes with the true bytes', async (_, signsWith) => {
    const proxies = [
      await proxy('forged', { body: FAKE, delayMs: 0, key: newKey(), signsWith }),
      await proxy('honest-1', { body: OBJECT, delayMs: 30, key: newKey() }),
      await proxy('honest-2', { body: OBJECT, delayMs: 50, key: newKey() }),
    ];
    const conflicts: unknown[] = [];
    const r = await get(proxies, undefined, { onConflict: (s: unknown) => conflicts.push(s) });
    expect(hexOf(r.object)).toBe(hexOf(OBJECT));
    // Not proof of anything against it (an honest proxy that restarted has a new key): not reported.
    expect([r.polluters, conflicts]).toEqual([[], []]);
  });

  test('a signed proxy serving other bytes than it signed is excluded and reported; the others complete', async () => {
    const proxies = [
      await proxy('liar', { body: FAKE, digest: hexOf(OBJECT), delayMs: 0, key: newKey() }),
      await proxy('honest-1', { body: OBJECT, delayMs: 40, key: newKey() }),
      await proxy('honest-2', { body: OBJECT, delayMs: 60, key: newKey() }),
    ];
    const reported: unknown[] = [];
    const r = await get(proxies, undefined, { onPolluters: (p: unknown[]) => reported.push(...p) });
    expect(hexOf(r.object)).toBe(hexOf(OBJECT));
    expect(reported).toEqual([
      { proxyId: 'p-liar', name: 'liar', kind: 'data', reason: 'body does not match the digest it stated' },
    ]);
  });

  test('a range: the signed statements name it, and the result says where the bytes sit', async () => {
    const proxies = [
      await proxy('a', { body: OBJECT, delayMs: 0, key: newKey() }),
      await proxy('b', { body: OBJECT, delayMs: 20, key: newKey() }),
    ];
    const range = { start: 1000, length: 5000 };
    const r = await get(proxies, undefined, { range });
    expect(hexOf(r.object)).toBe(hexOf(OBJECT.subarray(1000, 6000)));
    expect(r.attributes).toEqual({ contentType: 'video/mp2t', range: { start: 1000, completeLength: OBJECT.length } });
  });

  test('a keyed proxy left alone without a signature gives no object: the caller falls back', async () => {
    const proxies = [
      await proxy('unsigned', { body: OBJECT, delayMs: 0, key: newKey(), signsWith: 'none' }),
      await proxy('honest', { body: OBJECT, delayMs: 20, key: newKey() }),
    ];
    const error = await get(proxies).catch((e: unknown) => e);
    expect((error as ClientError).message).toMatch(
      /not signed by the key origo published.*fewer than 2|fewer than 2.*not signed/,
    );
  });
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
