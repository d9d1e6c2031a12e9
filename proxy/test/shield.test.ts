/**
 * Origin shielding with real parts on loopback: a ranged HTTP origin that counts the body bytes
 * it sends, parent proxies' caches behind the real shield endpoint, and child caches whose misses
 * go through the shield fetch (the real origin fetch and SSRF guard underneath). What the origin
 * pays for cold objects, a lying parent caught by the samples and by Repr-Digest, a stale, a dead
 * and a refused parent all falling back to the origin, ranges, and the endpoint's authentication
 * and budgets.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBelow, seededRandom, type ByteRange } from '@mutp/shared';
import { fetchOrigin, type OriginPolicy } from '@mutp/origin-fetch';
import { buildCommand, parseConfig } from '../src/config';
import { ProxyMetrics } from '../src/metrics';
import { ObjectCache } from '../src/object-cache';
import type { FetchControl, ObjectFetcher } from '../src/origin-fetches';
import { ObjectProvider, ObjectSource } from '../src/object-source';
import { signShieldRequest, verifyShieldRequest } from '../src/shield-auth';
import { chainProblem } from '../src/shield-chain';
import { ShieldEndpoint } from '../src/shield-endpoint';
import { shieldFetcher, ShieldFetchOptions } from '../src/shield-fetch';
import { sampleRanges } from '../src/shield-verify';
import { waitFor } from '@mutp/testing/wait';
import { LOOPBACK_ONLY, makeObject, silentLogger, startServer, TestServer, until } from './helpers';

const KEY = 'k'.repeat(40);
const MAX_OBJECT_BYTES = 4 << 20;
const policy: OriginPolicy = { allowedOrigins: '*', allowPrivateOrigins: false, allowedClasses: LOOPBACK_ONLY };

/**
 * A local origin with Range support (bytes=a-b only) that counts the body bytes it sends; while
 * `holding`, answers queue until release(). With `midway` it sends the first half of the next
 * body and then holds the rest until release() ('hold'), or drops the connection ('cut').
 */
function countingOrigin() {
  const files = new Map<string, { bytes: Uint8Array; etag: string }>();
  const queued: (() => void)[] = [];
  const o = {
    bodyBytes: 0,
    holding: false,
    midway: undefined as 'hold' | 'cut' | undefined,
    server: undefined as unknown as TestServer,
    add(path: string, bytes: Uint8Array, etag: string): string {
      files.set(path, { bytes, etag });
      return `${o.server.url}${path}`;
    },
    hold: () => void (o.holding = true),
    release() {
      o.holding = false;
      for (const answer of queued.splice(0)) answer();
    },
  };
  const respond = (req: IncomingMessage, res: ServerResponse) => {
    const file = files.get(req.url ?? '');
    if (!file) return void res.writeHead(404).end();
    const size = file.bytes.length;
    const asked = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    const [first, last] = asked ? [Number(asked[1]), Math.min(Number(asked[2]), size - 1)] : [0, size - 1];
    if (first >= size) return void res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
    const body = file.bytes.subarray(first, last + 1);
    res.writeHead(asked ? 206 : 200, {
      etag: file.etag,
      'content-type': 'video/mp4',
      'cache-control': 'max-age=60',
      'content-length': body.length,
      ...(asked ? { 'content-range': `bytes ${first}-${last}/${size}` } : {}),
    });
    const half = Math.floor(body.length / 2);
    const midway = o.midway;
    o.midway = undefined;
    if (midway) {
      o.bodyBytes += half;
      res.write(body.subarray(0, half));
      if (midway === 'cut') return void setTimeout(() => res.destroy(), 20);
      return void queued.push(() => {
        o.bodyBytes += body.length - half;
        res.end(body.subarray(half));
      });
    }
    o.bodyBytes += body.length;
    res.end(body);
  };
  const start = async () => {
    o.server = await startServer((req, res) => (o.holding ? queued.push(() => respond(req, res)) : respond(req, res)));
  };
  return Object.assign(o, { start });
}

const origin = countingOrigin();
const servers: Server[] = [];
beforeAll(() => origin.start());
afterAll(async () => {
  await origin.server.close();
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

const originFetch: ObjectFetcher = (url, control) =>
  fetchOrigin(url, {
    ...policy,
    maxBytes: MAX_OBJECT_BYTES,
    headersTimeoutMs: 5000,
    totalTimeoutMs: 10_000,
    signal: control.signal,
    reserve: control.reserve,
    onBody: control.onBody,
    range: control.range,
  });

/** A proxy's cache; a parent's passes its fetches on as they arrive, as shield-setup.ts sets it up. */
function newSource(streams = true): ObjectSource {
  const source = new ObjectSource(policy, new ObjectCache({ maxBytes: 16 << 20, fetch: originFetch }));
  if (streams) source.streamFetches();
  return source;
}

/** A parent: `objects` (its cache, or a liar around it) behind the shield endpoint on loopback. */
async function startParent(
  objects: ObjectProvider = newSource(),
  over: Partial<ConstructorParameters<typeof ShieldEndpoint>[0]> = {},
) {
  const metrics = new ProxyMetrics();
  const endpoint = new ShieldEndpoint({
    key: KEY,
    self: 'parent-1',
    objects,
    logger: silentLogger(),
    metrics,
    maxConcurrent: 64,
    maxPerChild: 16,
    bytesPerChildPerMinute: 1 << 30,
    ...over,
  });
  const server = endpoint.server();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, metrics, endpoint };
}

/** The shield around a child's origin fetch: its parent at `parentUrl`, samples seeded. */
function shieldedBy(parentUrl: string, metrics: ProxyMetrics, over: Partial<ShieldFetchOptions> = {}) {
  const random = seededRandom(7);
  return (fetchFromOrigin: ObjectFetcher) =>
    shieldFetcher(fetchFromOrigin, {
      parentUrl,
      key: KEY,
      child: 'child-1',
      maxBytes: MAX_OBJECT_BYTES,
      timeoutMs: 5000,
      sampleFraction: 0.02,
      samples: 4,
      metrics,
      logger: silentLogger(),
      random: (max) => randomBelow(random, max),
      ...over,
    });
}

/** A child cache shielded by the parent at `parentUrl`; `childOrigin` is its origin fetch. */
function newChild(parentUrl: string, over: Partial<ShieldFetchOptions> = {}, childOrigin = originFetch) {
  const metrics = new ProxyMetrics();
  const cache = new ObjectCache({ maxBytes: 16 << 20, fetch: childOrigin });
  cache.shieldWith(shieldedBy(parentUrl, metrics, over));
  return { objects: new ObjectSource(policy, cache), cache, metrics };
}

async function outcomes(metrics: ProxyMetrics): Promise<Record<string, number>> {
  const values = (await metrics.shieldFetches.get()).values;
  return Object.fromEntries(values.map((v) => [String(v.labels.outcome), v.value]));
}

const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

/** Origin body bytes a block of work cost. */
async function originBytes(work: () => Promise<void>): Promise<number> {
  const before = origin.bodyBytes;
  await work();
  return origin.bodyBytes - before;
}

/** A parent that changes the bytes it serves (`tamper` edits a copy). */
function liar(honest: ObjectProvider, tamper: (bytes: Uint8Array) => void): ObjectProvider {
  return {
    async get(url, signal, range, network) {
      const object = await honest.get(url, signal, range, network);
      const bytes = new Uint8Array(object.bytes);
      tamper(bytes);
      return { ...object, bytes, hold: () => () => undefined };
    },
  };
}

let files = 0;
const newFile = (size: number) => {
  const bytes = makeObject(size, ++files);
  return { bytes, url: origin.add(`/s${files}`, bytes, `"v${files}"`) };
};

describe('a cold object through a shield parent', () => {
  test('three children and the parent cost the origin the object once plus their samples', async () => {
    const parent = newSource();
    const { url: parentUrl, metrics: parentMetrics } = await startParent(parent);
    const children = [newChild(parentUrl), newChild(parentUrl), newChild(parentUrl)];
    const { bytes, url } = newFile(1 << 20);
    origin.hold();
    let got: Uint8Array[] = [];
    const cost = await originBytes(async () => {
      const all = Promise.all([parent.get(url), ...children.map((c) => c.objects.get(url))]);
      // Everyone is waiting for the one fetch under way before the origin answers anything.
      await new Promise((resolve) => setTimeout(resolve, 50));
      origin.release();
      got = (await all).map((o) => o.bytes);
    });
    for (const b of got) expect(same(b, bytes)).toBe(true);
    // Samples: 2 % each, 4 ranges and the one-byte probe.
    expect(cost).toBeLessThanOrEqual(bytes.length * 1.1);
    expect(cost).toBeGreaterThanOrEqual(bytes.length);
    for (const c of children) {
      expect(await outcomes(c.metrics)).toEqual({ verified: 1 });
      expect(c.cache.stats().parentBytes).toBe(bytes.length);
      expect(c.cache.stats().originBytes).toBe(0);
    }
    expect((await parentMetrics.shieldServed.get()).values.find((v) => v.labels.outcome === 'served')?.value).toBe(3);
    // The child's entry carries the origin's word: its cache policy and type.
    const again = await children[0].objects.get(url);
    expect(again.contentType).toBe('video/mp4');
    expect(children[0].cache.stats().hits).toBe(1);
  });

  test('a range goes through the parent too, served and checked where it sits', async () => {
    const { url: parentUrl } = await startParent();
    const child = newChild(parentUrl);
    const { bytes, url } = newFile(300_000);
    const range: ByteRange = { start: 100_000, length: 50_000 };
    const object = await child.objects.get(url, undefined, range);
    expect(same(object.bytes, bytes.subarray(100_000, 150_000))).toBe(true);
    expect(object.range).toEqual({ start: 100_000, completeLength: 300_000 });
    expect(await outcomes(child.metrics)).toEqual({ verified: 1 });
  });
});

async function counted(counter: ProxyMetrics['shieldBytes'], source: string): Promise<number> {
  return (await counter.get()).values.find((v) => v.labels.source === source)?.value ?? 0;
}

describe('a parent streams its fetch under way to children, who still check the whole copy', () => {
  test('a child gets the first half while the origin still holds the second, then the verified object', async () => {
    const parent = newSource();
    const { url: parentUrl, metrics: parentMetrics } = await startParent(parent);
    const child = newChild(parentUrl);
    const { bytes, url } = newFile(1 << 20);
    origin.midway = 'hold';
    const parentOwn = parent.get(url);
    const childGot = child.objects.get(url);
    // The origin has sent half of the parent's fetch and holds the rest: the child has that half.
    await waitFor(
      "the child to receive the first half from the parent while the parent's fetch is under way",
      async () => ((await counted(child.metrics.shieldBytes, 'parent')) >= bytes.length / 2 ? true : undefined),
      10_000,
      5,
    );
    expect(await counted(parentMetrics.shieldBytes, 'served-to-children')).toBeLessThan(bytes.length);
    // Nothing is served as the parent's before the whole copy is checked.
    expect(await outcomes(child.metrics)).toEqual({});
    origin.release();
    const [own, got] = await Promise.all([parentOwn, childGot]);
    expect(same(own.bytes, bytes)).toBe(true);
    expect(same(got.bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ verified: 1 });
    expect(await counted(parentMetrics.shieldBytes, 'served-to-children')).toBe(bytes.length);
    expect(child.cache.stats().parentBytes).toBe(bytes.length);
  });

  test("the parent's fetch failing mid-stream cuts the child's answer off: the child asks the origin", async () => {
    const parent = newSource();
    const { url: parentUrl, metrics: parentMetrics } = await startParent(parent);
    const child = newChild(parentUrl);
    const { bytes, url } = newFile(400_000);
    origin.midway = 'cut';
    const parentOwn = parent.get(url).then(
      () => 'served',
      (e: Error) => e.message,
    );
    const got = await child.objects.get(url);
    expect(same(got.bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-failed': 1 });
    expect(await parentOwn).toMatch(/closed the connection|connection failed/);
    const served = (await parentMetrics.shieldServed.get()).values;
    expect(served.map((v) => [v.labels.outcome, v.value])).toEqual([['stream-failed', 1]]);
  });

  test('a child that does not ask for a stream gets the whole answer, as before', async () => {
    const parent = newSource();
    const { url: parentUrl } = await startParent(parent);
    const { bytes, url } = newFile(100_000);
    origin.midway = 'hold';
    const parentOwn = parent.get(url);
    const target = new URL('/v1/shield', parentUrl);
    target.searchParams.set('url', url);
    const asked = fetch(target, { headers: { authorization: signShieldRequest(KEY, 'old-child', { url }) } });
    await new Promise((resolve) => setTimeout(resolve, 50));
    origin.release();
    const res = await asked;
    expect(res.headers.get('content-length')).toBe(String(bytes.length));
    expect(res.headers.get('x-mutp-validator')).toMatch(/^etag /);
    expect(same(new Uint8Array(await res.arrayBuffer()), bytes)).toBe(true);
    await parentOwn;
  });

  test('a streaming parent that changes bytes is caught like any other', async () => {
    const { bytes, url } = newFile(300_000);
    const etag = `etag "v${files}"`;
    // Chunked, the fields as trailers, every 500th byte changed.
    const lying = await startServer((_req, res) => {
      const changed = Buffer.from(bytes);
      for (let i = 3; i < changed.length; i += 500) changed[i] ^= 0x5a;
      res.writeHead(200, { trailer: 'x-mutp-sha256, x-mutp-validator' });
      res.write(changed.subarray(0, 1000));
      res.write(changed.subarray(1000));
      res.addTrailers({
        'x-mutp-sha256': createHash('sha256').update(changed).digest('hex'),
        'x-mutp-validator': etag,
      });
      res.end();
    });
    try {
      const child = newChild(lying.url);
      expect(same((await child.objects.get(url)).bytes, bytes)).toBe(true);
      expect(await outcomes(child.metrics)).toEqual({ 'parent-lied': 1 });
      expect(await counted(child.metrics.shieldBytes, 'parent')).toBe(bytes.length);
    } finally {
      await lying.close();
    }
  });
});

describe('parents set up in a loop', () => {
  /** A proxy that is a parent (named `self`) and, once `parentOf` is called, a child. */
  async function tier(self: string) {
    const source = newSource();
    const { url, metrics } = await startParent(source, { self });
    return {
      source,
      url,
      metrics,
      childOf: (parentUrl: string) => source.shieldWith(shieldedBy(parentUrl, metrics, { child: self })),
    };
  }

  test("A's parent B whose parent is A: B is refused by A and goes to the origin, A takes B's copy", async () => {
    const [a, b] = [await tier('edge-a'), await tier('edge-b')];
    a.childOf(b.url);
    b.childOf(a.url);
    const { bytes, url } = newFile(200_000);
    let got: Uint8Array | undefined;
    const cost = await originBytes(async () => void (got = (await a.source.get(url)).bytes));
    expect(same(got!, bytes)).toBe(true);
    expect(await outcomes(a.metrics)).toEqual({ verified: 1 });
    expect(await outcomes(b.metrics)).toEqual({ 'parent-loop': 1 });
    const refused = (await a.metrics.shieldServed.get()).values.find((v) => v.labels.outcome === 'loop');
    expect(refused?.value).toBe(1);
    expect(cost).toBeLessThanOrEqual(bytes.length * 1.1);
  });

  test('a chain longer than the bound is refused; the MAC binds the chain', () => {
    expect(chainProblem('p', ['a', 'b'])).toBeUndefined();
    expect(chainProblem('b', ['a', 'b'])).toMatch(/loop: a > b > b/);
    expect(chainProblem('p', ['a', 'b', 'c', 'd'])).toBeUndefined();
    expect(chainProblem('p', ['a', 'b', 'c', 'd', 'e'])).toMatch(/at most 4/);
    const request = { url: 'https://media.example/a.m4s', via: ['edge-a', 'edge-b'] };
    const header = signShieldRequest(KEY, 'edge-c', request, 1_000_000);
    expect(verifyShieldRequest(KEY, header, request, 1_000_000)).toEqual({
      ok: true,
      child: 'edge-c',
      via: ['edge-a', 'edge-b'],
    });
    // The chain is under the MAC: nobody without the fleet key shortens or drops it.
    expect(verifyShieldRequest(KEY, header.replace('via=edge-a/edge-b', 'via=edge-b'), request, 1_000_000)).toEqual({
      ok: false,
      reason: 'bad-mac',
    });
    expect(verifyShieldRequest(KEY, header.replace('via=edge-a/edge-b, ', ''), request, 1_000_000).ok).toBe(false);
  });
});

describe('a parent that fails or lies never fails a transfer', () => {
  test('a parent changing bytes is caught by the samples: the origin serves, the parent is named', async () => {
    // Every 1000th byte changed: a few % sampled at random cannot miss them all.
    const lying = liar(newSource(), (b) => {
      for (let i = 1; i < b.length; i += 1000) b[i] ^= 0xff;
    });
    const { url: parentUrl } = await startParent(lying);
    const child = newChild(parentUrl);
    const { bytes, url } = newFile(500_000);
    const object = await child.objects.get(url);
    expect(same(object.bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-lied': 1 });
    expect(child.cache.stats().originBytes).toBe(bytes.length);
  });

  test('one changed byte is caught by the Repr-Digest the origin states, wherever it sits', async () => {
    const lying = liar(newSource(), (b) => void (b[b.length - 7] ^= 1));
    const { url: parentUrl } = await startParent(lying);
    const { bytes, url } = newFile(200_000);
    const digest = `sha-256=:${createHash('sha256').update(bytes).digest('base64')}:`;
    // Stands in for an origin fetch that passes Repr-Digest on (@mutp/origin-fetch does not yet).
    const withDigest: ObjectFetcher = (u, c: FetchControl) =>
      originFetch(u, c).then((r) => ({ ...r, reprDigest: digest }));
    // No samples at all: only the digest can catch it.
    const child = newChild(parentUrl, { samples: 1, sampleFraction: 1e-9 }, withDigest);
    const object = await child.objects.get(url);
    expect(same(object.bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-lied': 1 });
    // And an honest parent passes the same digest check.
    const honest = newChild((await startParent()).url, { samples: 1, sampleFraction: 1e-9 }, withDigest);
    expect(same((await honest.objects.get(url)).bytes, bytes)).toBe(true);
    expect(await outcomes(honest.metrics)).toEqual({ verified: 1 });
  });

  test('a parent holding another version is passed over (stale), the origin version served', async () => {
    const parent = newSource();
    const { url: parentUrl } = await startParent(parent);
    const { url } = newFile(100_000);
    await parent.get(url);
    const path = new URL(url).pathname;
    const fresh = makeObject(100_000, 999);
    origin.add(path, fresh, '"changed"');
    const child = newChild(parentUrl);
    expect(same((await child.objects.get(url)).bytes, fresh)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-stale': 1 });
  });

  test('a dead parent: the child fetches from the origin', async () => {
    const { url: parentUrl } = await startParent();
    // Nothing listens there any more.
    const gone = servers.pop()!;
    gone.closeAllConnections();
    await new Promise((resolve) => gone.close(resolve));
    const child = newChild(parentUrl);
    const { bytes, url } = newFile(100_000);
    expect(same((await child.objects.get(url)).bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-failed': 1 });
  });

  test('a parent slower than the timeout: the child gives up on it and asks the origin', async () => {
    // Answers nothing until the child hangs up (which withdraws its request).
    let withdrawn = 0;
    const slow: ObjectProvider = {
      get: (_url, signal) =>
        new Promise((_, reject) =>
          signal?.addEventListener('abort', () => reject(new Error(`withdrawn ${++withdrawn}`))),
        ),
    };
    const child = newChild((await startParent(slow)).url, { timeoutMs: 100 });
    const { bytes, url } = newFile(50_000);
    expect(same((await child.objects.get(url)).bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-failed': 1 });
    await until(() => withdrawn === 1, 5000, 'the parent saw the child withdraw');
  });

  test('a child without the fleet key is refused by the parent, and fetches from the origin', async () => {
    const { url: parentUrl, metrics } = await startParent();
    const child = newChild(parentUrl, { key: 'x'.repeat(40) });
    const { bytes, url } = newFile(20_000);
    expect(same((await child.objects.get(url)).bytes, bytes)).toBe(true);
    expect(await outcomes(child.metrics)).toEqual({ 'parent-failed': 1 });
    const served = (await metrics.shieldServed.get()).values;
    expect(served.map((v) => [v.labels.outcome, v.value])).toEqual([['unauthorized-bad-mac', 1]]);
  });
});

describe('the parent endpoint', () => {
  const ask = (parentUrl: string, url: string, key = KEY, child = 'c1') => {
    const target = new URL('/v1/shield', parentUrl);
    target.searchParams.set('url', url);
    return fetch(target, { headers: { authorization: signShieldRequest(key, child, { url }) } });
  };

  test("enforces the parent's URL policy: no relay to a host it would not fetch", async () => {
    const strict = new ObjectSource(
      { ...policy, allowedOrigins: ['https://media.example'] },
      new ObjectCache({ maxBytes: 1 << 20, fetch: originFetch }),
    );
    const { url: parentUrl } = await startParent(strict);
    const { url } = newFile(1000);
    const before = origin.bodyBytes;
    const res = await ask(parentUrl, url);
    expect(res.status).toBe(403);
    await res.arrayBuffer();
    expect(origin.bodyBytes).toBe(before);
  });

  test('per child: requests under way and bytes per minute are capped; other children go on', async () => {
    const { url: parentUrl } = await startParent(newSource(), { maxPerChild: 1, bytesPerChildPerMinute: 30_000 });
    const a = newFile(20_000);
    origin.hold();
    const first = ask(parentUrl, a.url, KEY, 'c1');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = await ask(parentUrl, a.url, KEY, 'c1');
    expect(second.status).toBe(503);
    await second.arrayBuffer();
    origin.release();
    const ok = await first;
    expect(ok.status).toBe(200);
    expect(same(new Uint8Array(await ok.arrayBuffer()), a.bytes)).toBe(true);
    // 20 000 of its 30 000 bytes used: one more object, then the minute's budget is spent.
    const b = newFile(20_000);
    expect((await ask(parentUrl, b.url, KEY, 'c1').then(async (r) => [r.status, await r.arrayBuffer()]))[0]).toBe(200);
    const over = await ask(parentUrl, b.url, KEY, 'c1');
    expect(over.status).toBe(429);
    await over.arrayBuffer();
    const other = await ask(parentUrl, b.url, KEY, 'c2');
    expect(other.status).toBe(200);
    await other.arrayBuffer();
  });

  test('authentication: a MAC binds the child, the object and the expiry', () => {
    const request = { url: 'https://media.example/a.m4s', range: { start: 0, length: 10 } };
    const now = 1_000_000;
    const header = signShieldRequest(KEY, 'edge-1', request, now);
    expect(verifyShieldRequest(KEY, header, request, now)).toEqual({ ok: true, child: 'edge-1', via: [] });
    expect(verifyShieldRequest(KEY, header, { ...request, url: 'https://media.example/b.m4s' }, now)).toEqual({
      ok: false,
      reason: 'bad-mac',
    });
    expect(verifyShieldRequest(KEY, header, { url: request.url }, now).ok).toBe(false);
    expect(verifyShieldRequest(KEY, header.replace('edge-1', 'edge-2'), request, now).ok).toBe(false);
    expect(verifyShieldRequest('z'.repeat(40), header, request, now).ok).toBe(false);
    expect(verifyShieldRequest(KEY, header, request, now + 120_000)).toEqual({ ok: false, reason: 'expired' });
    expect(verifyShieldRequest(KEY, undefined, request, now)).toEqual({ ok: false, reason: 'missing' });
    expect(verifyShieldRequest(KEY, 'Bearer x', request, now)).toEqual({ ok: false, reason: 'malformed' });
  });
});

test('samples: inside the extent, about the fraction asked, at least a byte each', () => {
  const random = seededRandom(3);
  const pick = (max: number) => randomBelow(random, max);
  for (const [start, length] of [
    [0, 1],
    [5, 10],
    [1000, 2 << 20],
  ]) {
    const ranges = sampleRanges({ start, length }, 0.02, 4, pick);
    expect(ranges.length).toBe(Math.min(4, length));
    const total = ranges.reduce((s, r) => s + r.length, 0);
    expect(total).toBeLessThanOrEqual(Math.max(ranges.length, length * 0.02));
    for (const r of ranges) {
      expect(r.length).toBeGreaterThanOrEqual(1);
      expect(r.start).toBeGreaterThanOrEqual(start);
      expect(r.start + r.length).toBeLessThanOrEqual(start + length);
    }
  }
});

describe('configuration', () => {
  const parse = (...args: string[]) =>
    parseConfig(
      ['node', 'main', '--secret', 'x', ...args],
      buildCommand()
        .exitOverride()
        .configureOutput({ writeErr: () => undefined }),
    );

  test('off unless a parent or a port is given; either needs a long enough key', () => {
    expect(parse().shield).toBeUndefined();
    expect(() => parse('--shield-parent', 'http://10.0.0.5:8801')).toThrow(/--shield-key/);
    expect(() => parse('--shield-port', '8801', '--shield-key', 'short')).toThrow(/at least 32/);
    expect(() => parse('--shield-parent', 'ftp://10.0.0.5', '--shield-key', KEY)).toThrow();
    expect(parse('--shield-parent', 'http://10.0.0.5:8801/', '--shield-key', KEY).shield).toEqual({
      key: KEY,
      parentUrl: 'http://10.0.0.5:8801',
      timeoutMs: 10_000,
      sampleFraction: 0.02,
      samples: 2,
      maxPerChild: 32,
      maxConcurrent: 128,
      childBytesPerMinute: 8 * 1024 ** 3,
    });
    expect(parse('--shield-port', '0', '--shield-key', KEY).shield).toMatchObject({ port: 0, key: KEY });
  });
});
