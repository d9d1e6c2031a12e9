/** The object cache: byte bound and LRU order, one origin fetch for concurrent requests, no cached failures. */
import { createHash } from 'node:crypto';
import { encoderBytesOf, Layout, MemoryBudget, rlncCodec } from '@mutp/shared/internal';
import { ServeError } from '../src/errors';
import { cachePolicy } from '../src/cache-policy';
import type { FetchResult } from '@mutp/origin-fetch';
import { ObjectCache } from '../src/object-cache';

/** A fetcher whose answers the test releases by hand. */
function manualFetcher() {
  const calls: string[] = [];
  const waiting = new Map<string, { resolve: (r: FetchResult) => void; reject: (e: Error) => void }[]>();
  return {
    calls,
    fetch(url: string): Promise<FetchResult> {
      calls.push(url);
      return new Promise((resolve, reject) => {
        const list = waiting.get(url) ?? [];
        list.push({ resolve, reject });
        waiting.set(url, list);
      });
    },
    answer(url: string, bytes: Uint8Array, contentType = 'video/mp4') {
      for (const w of waiting.get(url) ?? []) w.resolve({ bytes, contentType });
      waiting.delete(url);
    },
    fail(url: string, error: Error) {
      for (const w of waiting.get(url) ?? []) w.reject(error);
      waiting.delete(url);
    },
  };
}

const bytes = (n: number, fill = 1) => new Uint8Array(n).fill(fill);

test('stores objects with their SHA-256 and content type; hits do not fetch again', async () => {
  const f = manualFetcher();
  const cache = new ObjectCache({ maxBytes: 1000, fetch: (u) => f.fetch(u) });
  const pending = cache.get('http://o/a');
  f.answer('http://o/a', bytes(100, 7), 'video/webm');
  const a = await pending;
  expect(a.contentType).toBe('video/webm');
  expect(Buffer.from(a.digest).toString('hex')).toBe(createHash('sha256').update(bytes(100, 7)).digest('hex'));
  expect(await cache.get('http://o/a')).toBe(a);
  expect(f.calls).toEqual(['http://o/a']);
  expect(cache.stats()).toMatchObject({ hits: 1, misses: 1, entries: 1, bytes: 100 });
});

test('byte bound with least-recently-used eviction', async () => {
  const f = { fetch: async (url: string) => ({ bytes: bytes(Number(new URL(url).pathname.slice(1))) }) };
  const cache = new ObjectCache({ maxBytes: 1000, fetch: f.fetch });
  await cache.get('http://o/400');
  await cache.get('http://o/300');
  await cache.get('http://o/400'); // 400 is now the most recently used
  await cache.get('http://o/500'); // 1200 > 1000: the least recently used (300) goes
  expect(cache.has('http://o/300')).toBe(false);
  expect(cache.has('http://o/400')).toBe(true);
  expect(cache.has('http://o/500')).toBe(true);
  expect(cache.stats().bytes).toBe(900);
  // Larger than the whole cache: served, not stored, nothing else evicted.
  const huge = await cache.get('http://o/2000');
  expect(huge.bytes.length).toBe(2000);
  expect(cache.has('http://o/2000')).toBe(false);
  expect(cache.stats().bytes).toBe(900);
});

test("a cached object's encoder outlives its last transfer until the object is evicted", async () => {
  const f = { fetch: async (url: string) => ({ bytes: bytes(Number(new URL(url).pathname.slice(1))) }) };
  const budget = new MemoryBudget(1 << 20);
  const cache = new ObjectCache({ maxBytes: 1000, fetch: f.fetch, budget });
  const a = await cache.get('http://o/600');
  const layout = new Layout('rlnc', 600, 60, 5);
  a.encoders.lease(rlncCodec, layout).free();
  // Parked for the next transfer of the object: one encoder, still charged.
  expect(a.encoders.size).toBe(1);
  expect(budget.used).toBe(encoderBytesOf(rlncCodec, 600));
  await cache.get('http://o/700'); // 1300 > 1000: 600 is evicted
  expect(cache.has('http://o/600')).toBe(false);
  expect(a.encoders.size).toBe(0);
  expect(budget.used).toBe(0);
  // An object the cache does not keep frees its encoder at once.
  const huge = await cache.get('http://o/2000');
  huge.encoders.lease(rlncCodec, new Layout('rlnc', 2000, 100, 5)).free();
  expect(huge.encoders.size).toBe(0);
  expect(budget.used).toBe(0);
});

test('concurrent requests for one URL share one origin fetch', async () => {
  const f = manualFetcher();
  const lookups: string[] = [];
  const cache = new ObjectCache({ maxBytes: 1000, fetch: (u) => f.fetch(u), onLookup: (o) => lookups.push(o) });
  const all = [cache.get('http://o/x'), cache.get('http://o/x'), cache.get('http://o/x')];
  expect(cache.stats().inFlight).toBe(1);
  f.answer('http://o/x', bytes(10));
  const [a, b, c] = await Promise.all(all);
  expect(a).toBe(b);
  expect(b).toBe(c);
  expect(f.calls).toEqual(['http://o/x']);
  expect(lookups).toEqual(['miss', 'joined', 'joined']);
  expect(cache.stats().inFlight).toBe(0);
});

test('failures are not cached: every waiter gets the error, the next request fetches again', async () => {
  const f = manualFetcher();
  const cache = new ObjectCache({ maxBytes: 1000, fetch: (u) => f.fetch(u) });
  const first = [cache.get('http://o/y'), cache.get('http://o/y')];
  f.fail('http://o/y', new ServeError('origin-error', 'origin answered 503'));
  for (const p of first) await expect(p).rejects.toThrow('origin answered 503');
  expect(cache.stats()).toMatchObject({ failures: 1, entries: 0, inFlight: 0 });
  const again = cache.get('http://o/y');
  expect(f.calls).toEqual(['http://o/y', 'http://o/y']);
  f.answer('http://o/y', bytes(5));
  expect((await again).bytes.length).toBe(5);
});

test('a cache of 0 bytes stores nothing but still shares fetches', async () => {
  const f = manualFetcher();
  const cache = new ObjectCache({ maxBytes: 0, fetch: (u) => f.fetch(u) });
  const both = [cache.get('http://o/z'), cache.get('http://o/z')];
  f.answer('http://o/z', bytes(3));
  await Promise.all(both);
  expect(f.calls.length).toBe(1);
  expect(cache.has('http://o/z')).toBe(false);
});

describe('Cache-Control', () => {
  test.each([
    [undefined, { store: true }],
    ['no-store', { store: false }],
    ['private, max-age=600', { store: false }],
    ['public, no-cache', { store: false }],
    ['max-age=0', { store: false }],
    ['public, max-age=60', { store: true, ttlMs: 60_000 }],
    ['max-age=60, s-maxage=5', { store: true, ttlMs: 5000 }],
    ['max-age="30"', { store: true, ttlMs: 30_000 }],
    ['max-age=-1, immutable', { store: true }],
    ['MAX-AGE=10', { store: true, ttlMs: 10_000 }],
  ])('%j gives %j', (header, policy) => {
    expect(cachePolicy(header)).toEqual(policy);
  });

  test.each([
    // Expires against Date, when Cache-Control says nothing of freshness.
    [
      { expires: 'Fri, 27 Nov 2026 10:01:00 GMT', date: 'Fri, 27 Nov 2026 10:00:00 GMT' },
      { store: true, ttlMs: 60_000 },
    ],
    [{ expires: 'Fri, 27 Nov 2026 09:00:00 GMT', date: 'Fri, 27 Nov 2026 10:00:00 GMT' }, { store: false }],
    [{ expires: '0' }, { store: false }],
    [
      { cacheControl: 'max-age=5', expires: '0' },
      { store: true, ttlMs: 5000 },
    ],
    // Last-Modified: a tenth of the age, within [1 min, 1 day].
    [
      { lastModified: 'Fri, 27 Nov 2026 00:00:00 GMT', date: 'Fri, 27 Nov 2026 10:00:00 GMT' },
      { store: true, ttlMs: 3_600_000 },
    ],
    [
      { lastModified: 'Fri, 27 Nov 2026 09:59:50 GMT', date: 'Fri, 27 Nov 2026 10:00:00 GMT' },
      { store: true, ttlMs: 60_000 },
    ],
    [
      { lastModified: 'Mon, 01 Jan 2024 00:00:00 GMT', date: 'Fri, 27 Nov 2026 10:00:00 GMT' },
      { store: true, ttlMs: 86_400_000 },
    ],
    [{ lastModified: 'not a date' }, { store: true }],
  ])('freshness from %j is %j (issue 31: a changed object is not held for ever)', (headers, policy) => {
    expect(cachePolicy(headers, Date.parse('Fri, 27 Nov 2026 10:00:00 GMT'))).toEqual(policy);
  });

  test('an object the origin marks no-store is served to its waiters and not kept', async () => {
    const cache = new ObjectCache({
      maxBytes: 1000,
      fetch: async () => ({ bytes: bytes(10), cacheControl: 'no-store' }),
    });
    const first = await cache.get('http://o/live');
    expect(first.bytes.length).toBe(10);
    expect(first.cached).toBe(false);
    expect(cache.has('http://o/live')).toBe(false);
    expect(cache.stats()).toMatchObject({ uncacheable: 1, entries: 0 });
  });

  test('max-age bounds how long an object stays', async () => {
    let now = 1000; // lru-cache treats a start time of 0 as none
    const cache = new ObjectCache({
      maxBytes: 1000,
      fetch: async () => ({ bytes: bytes(10), cacheControl: 'max-age=1' }),
      now: () => now,
    });
    await cache.get('http://o/short');
    expect(cache.has('http://o/short')).toBe(true);
    now = 2500;
    expect(cache.has('http://o/short')).toBe(false);
  });

  test('without Cache-Control, Expires and Last-Modified bound it too', async () => {
    let now = 1000;
    const date = 'Fri, 27 Nov 2026 10:00:00 GMT';
    const cache = new ObjectCache({
      maxBytes: 1000,
      fetch: async (url) =>
        url.endsWith('expires')
          ? { bytes: bytes(10), date, expires: 'Fri, 27 Nov 2026 10:00:02 GMT' }
          : { bytes: bytes(10), date, lastModified: 'Fri, 27 Nov 2026 09:00:00 GMT' },
      now: () => now,
    });
    await cache.get('http://o/expires');
    await cache.get('http://o/modified');
    now = 2500;
    expect([cache.has('http://o/expires'), cache.has('http://o/modified')]).toEqual([true, true]);
    now = 3500;
    expect(cache.has('http://o/expires')).toBe(false);
    // A tenth of an hour: 6 minutes.
    now = 1000 + 359_000;
    expect(cache.has('http://o/modified')).toBe(true);
    now = 1000 + 361_000;
    expect(cache.has('http://o/modified')).toBe(false);
  });
});

describe('a version origo found stale in a conflict (dropVersion)', () => {
  const v1 = bytes(1000, 1);
  const v2 = bytes(1000, 2);
  function versionedOrigin() {
    let current = { bytes: v1, etag: '"v1"' };
    const calls: string[] = [];
    return {
      calls,
      change: () => (current = { bytes: v2, etag: '"v2"' }),
      fetch: async (url: string) => {
        calls.push(url);
        return { ...current, contentType: 'video/mp4' };
      },
    };
  }

  test('drops the version a stated range was sliced from; the next request fetches the current one', async () => {
    const origin = versionedOrigin();
    const cache = new ObjectCache({ maxBytes: 10_000, fetch: origin.fetch });
    await cache.get('http://o/seg');
    const range = { start: 100, length: 200 };
    const slice = await cache.get('http://o/seg', undefined, range);
    expect(origin.calls).toHaveLength(1); // served from the whole object
    origin.change();
    expect(cache.dropVersion('http://o/seg', range, slice.digest)).toBe(1);
    expect(cache.has('http://o/seg')).toBe(false);
    const again = await cache.get('http://o/seg', undefined, range);
    expect(origin.calls).toHaveLength(2);
    expect(Buffer.from(again.bytes).equals(Buffer.from(v2.subarray(100, 300)))).toBe(true);
    expect(cache.stats().conflictDropped).toBe(1);
  });

  test('a version fetched since (another digest) and other URLs are left alone', async () => {
    const origin = versionedOrigin();
    const cache = new ObjectCache({ maxBytes: 10_000, fetch: origin.fetch });
    const old = await cache.get('http://o/seg');
    await cache.get('http://o/other');
    expect(cache.dropVersion('http://o/seg', undefined, new Uint8Array(32))).toBe(0);
    expect(cache.dropVersion('http://o/nothing', undefined, old.digest)).toBe(0);
    expect(cache.has('http://o/seg')).toBe(true);
    expect(cache.dropVersion('http://o/seg', undefined, old.digest)).toBe(1);
    expect(cache.has('http://o/other')).toBe(true);
    expect(cache.stats().conflictDropped).toBe(1);
  });
});
