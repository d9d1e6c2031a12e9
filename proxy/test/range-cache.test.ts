/**
 * The object cache serving byte ranges, with the real origin fetch against a local HTTP origin
 * that implements Range (or ignores it, per file): containment in cached objects and ranges,
 * joining fetches under way, validators, the origin cost of a player reading range by range,
 * abandonment, the memory budget, and a seeded property test of byte-exact answers.
 */
import type { ServerResponse } from 'node:http';
import { ByteRange, MemoryBudget, seededRandom } from '@mutp/shared';
import { CachedObject, ObjectCache, ObjectCacheOptions, RANGE_ENTRY_OVERHEAD_BYTES, sha256 } from '../src/object-cache';
import { fetchOrigin } from '@mutp/origin-fetch';
import { expectKind, LOOPBACK_ONLY, makeObject, startServer, TestServer, until, within } from './helpers';

interface OriginFile {
  bytes: Uint8Array;
  etag: string;
  /** Answers 200 with the whole body whatever the Range. */
  ignoresRange?: boolean;
}

/** A local origin with Range support that counts what it sends and can hold its answers. */
class RangedOrigin {
  readonly files = new Map<string, OriginFile>();
  requests = 0;
  /** Body bytes written (whole bodies included). */
  bodyBytes = 0;
  /** Requests whose client went away before the answer was complete. */
  closedEarly = 0;
  /** Requests waiting at the gate. */
  waiting = 0;
  private gate: Promise<void> | undefined;
  private open: (() => void) | undefined;
  server!: TestServer;

  async start(): Promise<void> {
    this.server = await startServer((req, res) => void this.answer(req.url ?? '', req.headers.range, res));
  }

  url(path: string): string {
    return `${this.server.url}${path}`;
  }

  /** Answers wait until release(). */
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open?.();
    this.gate = undefined;
  }

  private async answer(path: string, rangeHeader: string | undefined, res: ServerResponse): Promise<void> {
    this.requests++;
    res.on('close', () => {
      if (!res.writableFinished) this.closedEarly++;
    });
    if (this.gate) {
      this.waiting++;
      await this.gate;
      this.waiting--;
    }
    if (res.destroyed) return;
    const file = this.files.get(path);
    if (!file) return void res.writeHead(404).end();
    const headers = { etag: file.etag, 'content-type': 'video/mp4' };
    const match = /^bytes=(\d+)-(\d+)$/.exec(rangeHeader ?? '');
    if (!match || file.ignoresRange) return this.send(res, 200, headers, file.bytes);
    const first = Number(match[1]);
    if (first >= file.bytes.length)
      return void res.writeHead(416, { 'content-range': `bytes */${file.bytes.length}` }).end();
    const last = Math.min(Number(match[2]), file.bytes.length - 1);
    this.send(
      res,
      206,
      { ...headers, 'content-range': `bytes ${first}-${last}/${file.bytes.length}` },
      file.bytes.subarray(first, last + 1),
    );
  }

  private send(res: ServerResponse, status: number, headers: Record<string, string>, body: Uint8Array): void {
    res.writeHead(status, { ...headers, 'content-length': body.length });
    this.bodyBytes += body.length;
    res.end(body);
  }
}

const origin = new RangedOrigin();
beforeAll(() => origin.start());
afterAll(() => origin.server.close());

const MAX_OBJECT_BYTES = 1 << 20;

function newCache(over: Partial<ObjectCacheOptions> = {}, maxObjectBytes = MAX_OBJECT_BYTES): ObjectCache {
  return new ObjectCache({
    maxBytes: 4 << 20,
    fetch: (url, control) =>
      fetchOrigin(url, {
        allowedOrigins: '*',
        allowPrivateOrigins: false,
        allowedClasses: LOOPBACK_ONLY,
        maxBytes: maxObjectBytes,
        headersTimeoutMs: 5000,
        totalTimeoutMs: 10_000,
        signal: control.signal,
        reserve: control.reserve,
        range: control.range,
      }),
    ...over,
  });
}

let fileCount = 0;
/** A new file at the origin (its own path, so tests do not share cache entries). */
function addFile(size: number, seed: number, extra: Partial<OriginFile> = {}): { url: string; file: OriginFile } {
  const path = `/f${++fileCount}`;
  const file = { bytes: makeObject(size, seed), etag: `"${seed}"`, ...extra };
  origin.files.set(path, file);
  return { url: origin.url(path), file };
}

/** The object is exactly `range` of `bytes` (short only at the end), placed and hashed right. */
function expectServed(object: CachedObject, bytes: Uint8Array, range: ByteRange): void {
  const expected = bytes.subarray(range.start, Math.min(bytes.length, range.start + range.length));
  expect(object.bytes.length).toBe(expected.length);
  expect(Buffer.from(object.bytes).equals(Buffer.from(expected))).toBe(true);
  expect(object.range).toEqual({ start: range.start, completeLength: bytes.length });
  expect(Buffer.from(object.digest).equals(Buffer.from(sha256(expected)))).toBe(true);
}

/** Origin requests and body bytes a block of work cost. */
async function originCost(work: () => Promise<void>): Promise<{ requests: number; bytes: number }> {
  const requests = origin.requests;
  const bytes = origin.bodyBytes;
  await work();
  return { requests: origin.requests - requests, bytes: origin.bodyBytes - bytes };
}

describe('containment', () => {
  test('a cached whole object serves every range of it, and knows where the resource ends', async () => {
    const { url, file } = addFile(100_000, 1);
    const cache = newCache();
    const whole = await cache.get(url);
    expect(whole.range).toBeUndefined();
    const cost = await originCost(async () => {
      for (const range of [
        { start: 0, length: 100 },
        { start: 12_345, length: 50_000 },
        { start: 99_000, length: 5000 }, // past the end: the part up to it
        { start: 0, length: 100_000 },
      ])
        expectServed(await cache.get(url, undefined, range), file.bytes, range);
      await expectKind(cache.get(url, undefined, { start: 100_000, length: 1 }), 'range-not-satisfiable');
    });
    expect(cost.requests).toBe(0);
    expect(cache.stats()).toMatchObject({ misses: 1, sliced: 4 });
  });

  test('a cached range serves the ranges inside it; one reaching out fetches', async () => {
    const { url, file } = addFile(100_000, 2);
    const cache = newCache();
    const big = { start: 10_000, length: 40_000 };
    expectServed(await cache.get(url, undefined, big), file.bytes, big);
    expect(cache.has(url, big)).toBe(true);
    const inside = await originCost(async () => {
      for (const range of [big, { start: 10_000, length: 1 }, { start: 30_000, length: 20_000 }])
        expectServed(await cache.get(url, undefined, range), file.bytes, range);
    });
    expect(inside.requests).toBe(0);
    const across = { start: 45_000, length: 10_000 };
    const outside = await originCost(async () =>
      expectServed(await cache.get(url, undefined, across), file.bytes, across),
    );
    expect(outside.requests).toBe(1);
    expect(outside.bytes).toBe(10_000);
  });

  test('the same range twice is the same object (shared digests and encoders)', async () => {
    const { url } = addFile(50_000, 3);
    const cache = newCache();
    await cache.get(url);
    const a = await cache.get(url, undefined, { start: 100, length: 1000 });
    const b = await cache.get(url, undefined, { start: 100, length: 1000 });
    expect(b).toBe(a);
  });
});

describe('fetches under way', () => {
  afterEach(() => origin.release());

  test('a range joins a larger ranged fetch, and a whole one', async () => {
    const { url, file } = addFile(200_000, 4);
    const cache = newCache();
    origin.hold();
    const big = cache.get(url, undefined, { start: 0, length: 100_000 });
    await until(() => origin.waiting === 1, 5000, 'the origin to receive the ranged request');
    const inside = cache.get(url, undefined, { start: 5000, length: 20_000 });
    const beyond = cache.get(url, undefined, { start: 90_000, length: 20_000 }); // not inside: its own fetch
    expect(cache.stats()).toMatchObject({ misses: 2, joined: 1, inFlight: 2 });
    origin.release();
    expectServed(await within(inside, 5000, 'joined range'), file.bytes, { start: 5000, length: 20_000 });
    expectServed(await big, file.bytes, { start: 0, length: 100_000 });
    expectServed(await beyond, file.bytes, { start: 90_000, length: 20_000 });

    const other = addFile(50_000, 5);
    origin.hold();
    const whole = cache.get(other.url);
    await until(() => origin.waiting === 1, 5000, 'the origin to receive the whole request');
    const ranges = [0, 10_000, 49_990].map((start) => cache.get(other.url, undefined, { start, length: 100 }));
    const past = cache.get(other.url, undefined, { start: 60_000, length: 100 });
    origin.release();
    await whole;
    for (const [i, start] of [0, 10_000, 49_990].entries())
      expectServed(await ranges[i], other.file.bytes, { start, length: 100 });
    await expectKind(past, 'range-not-satisfiable');
    expect(cache.stats()).toMatchObject({ misses: 3, joined: 5 });
  });

  test('a range that joined a whole fetch too large for the proxy fetches its own range', async () => {
    const { url, file } = addFile(300_000, 6);
    const cache = newCache({}, 100_000);
    origin.hold();
    const whole = cache.get(url);
    await until(() => origin.waiting === 1, 5000, 'the origin to receive the whole request');
    const range = { start: 200_000, length: 50_000 };
    const part = cache.get(url, undefined, range);
    origin.release();
    await expectKind(whole, 'too-large');
    expectServed(await within(part, 5000, 'the range after the whole failed'), file.bytes, range);
  });

  test('the fetch is aborted when its last waiter, joined or not, withdraws', async () => {
    const { url } = addFile(100_000, 7);
    const cache = newCache();
    origin.hold();
    const first = new AbortController();
    const second = new AbortController();
    const big = cache.get(url, first.signal, { start: 0, length: 80_000 });
    await until(() => origin.waiting === 1, 5000, 'the origin to receive the request');
    const small = cache.get(url, second.signal, { start: 1000, length: 1000 });
    const closedBefore = origin.closedEarly;
    first.abort();
    await expectKind(big, 'internal');
    expect(cache.stats()).toMatchObject({ abandoned: 0, inFlight: 1 });
    second.abort();
    await expectKind(small, 'internal');
    expect(cache.stats().abandoned).toBe(1);
    await until(() => origin.closedEarly === closedBefore + 1, 5000, 'the origin request to be aborted');
    await until(() => cache.stats().inFlight === 0, 5000, 'the fetch to end');
  });

  test('fetches under way are capped; a contained range joins instead of counting', async () => {
    const { url } = addFile(100_000, 8);
    const cache = newCache({ maxConcurrentFetches: 2 });
    origin.hold();
    const a = cache.get(url, undefined, { start: 0, length: 10_000 });
    const b = cache.get(url, undefined, { start: 20_000, length: 10_000 });
    await expectKind(cache.get(url, undefined, { start: 40_000, length: 10_000 }), 'overloaded');
    const joined = cache.get(url, undefined, { start: 100, length: 100 });
    origin.release();
    await Promise.all([a, b, joined]);
    expect(cache.stats()).toMatchObject({ misses: 2, joined: 1, fetchesRefused: 1 });
  });
});

describe('origin fetches per client network', () => {
  test('a network starts at most 1/minNetworks of the fetches; other networks and joins still get theirs (issue 31)', async () => {
    const cache = newCache({ maxConcurrentFetches: 8, minNetworks: 4 });
    origin.hold();
    const urls = Array.from({ length: 4 }, (_, i) => addFile(10_000, 20 + i).url);
    const attacker = '198.51.100.0/24';
    const mine = [
      cache.get(urls[0], undefined, undefined, attacker),
      cache.get(urls[1], undefined, undefined, attacker),
    ];
    // Its share of 8 / 4 = 2 is spent: a third fetch is refused, whichever client id asks.
    await expectKind(cache.get(urls[2], undefined, undefined, attacker), 'overloaded');
    // Joining a fetch under way costs the origin nothing: allowed.
    const joined = cache.get(urls[0], undefined, undefined, attacker);
    // Another network still starts fetches of its own.
    const victim = cache.get(urls[3], undefined, undefined, '203.0.113.0/24');
    origin.release();
    await Promise.all([...mine, joined, victim]);
    expect(cache.stats()).toMatchObject({ misses: 3, joined: 1, fetchesRefused: 1 });
    // Once its fetches ended, the network has its share back.
    await cache.get(urls[2], undefined, undefined, attacker);
  });
});

describe('validators', () => {
  test('a response of a new version drops the entries of the old one', async () => {
    const { url, file } = addFile(60_000, 9);
    const cache = newCache();
    const a = { start: 0, length: 10_000 };
    await cache.get(url, undefined, a);
    expect(cache.has(url, a)).toBe(true);
    // The origin's file changes.
    const path = new URL(url).pathname;
    const v2 = { bytes: makeObject(60_000, 99), etag: '"v2"' };
    origin.files.set(path, v2);
    const b = { start: 30_000, length: 10_000 };
    expectServed(await cache.get(url, undefined, b), v2.bytes, b);
    expect(cache.stats().staleDropped).toBe(1);
    expect(cache.has(url, a)).toBe(false);
    // Range a is fetched again, from the new version.
    const again = await originCost(async () => expectServed(await cache.get(url, undefined, a), v2.bytes, a));
    expect(again.requests).toBe(1);
    expect(Buffer.from(file.bytes.subarray(0, 100)).equals(Buffer.from(v2.bytes.subarray(0, 100)))).toBe(false);
  });
});

describe('origin cost of a player', () => {
  test('consecutive ranges, the same again, ranges inside a larger one: one origin byte per byte served at most', async () => {
    const { url, file } = addFile(1_000_000, 10);
    const cache = newCache();
    let served = 0;
    const read = async (range: ByteRange) => {
      const object = await cache.get(url, undefined, range);
      expectServed(object, file.bytes, range);
      served += object.bytes.length;
    };
    // A player reading the file in 64 KiB ranges (the last one short at the end).
    const sequence: ByteRange[] = [];
    for (let start = 0; start < file.bytes.length; start += 65_536) sequence.push({ start, length: 65_536 });
    const first = await originCost(async () => {
      for (const range of sequence) await read(range);
    });
    expect(first.bytes / served).toBe(1);
    expect(first.requests).toBe(sequence.length);
    // Seeking back and playing it again, then smaller reads inside the ranges already fetched
    // (one range each: a read across two cached ranges is fetched, see the README).
    const again = await originCost(async () => {
      for (const range of sequence) await read(range);
      for (const { start } of sequence.slice(0, -1)) await read({ start: start + 1000, length: 16_000 });
    });
    expect(again).toEqual({ requests: 0, bytes: 0 });
    expect((first.bytes + again.bytes) / served).toBeLessThan(0.5);
  });

  test('an origin that ignores Range is fetched once, then served from the whole object', async () => {
    const { url, file } = addFile(300_000, 11, { ignoresRange: true });
    const cache = newCache();
    let served = 0;
    const cost = await originCost(async () => {
      for (let start = 0; start < file.bytes.length; start += 50_000) {
        const object = await cache.get(url, undefined, { start, length: 50_000 });
        expectServed(object, file.bytes, { start, length: 50_000 });
        served += object.bytes.length;
      }
    });
    expect(cost).toEqual({ requests: 1, bytes: file.bytes.length });
    expect(cost.bytes / served).toBe(1);
    expect(cache.has(url)).toBe(true);
  });

  test('a flood of tiny ranges costs one origin fetch each and fills the cache after a bounded number', async () => {
    const { url } = addFile(100_000, 12);
    const maxBytes = 64 * 1024;
    const cache = newCache({ maxBytes });
    const cost = await originCost(async () => {
      for (let i = 0; i < 200; i++) await cache.get(url, undefined, { start: i * 7, length: 1 });
    });
    expect(cost.requests).toBe(200);
    expect(cache.stats().misses).toBe(200);
    expect(cache.stats().bytes).toBeLessThanOrEqual(maxBytes);
    expect(cache.stats().entries).toBeLessThanOrEqual(Math.floor(maxBytes / (RANGE_ENTRY_OVERHEAD_BYTES + 1)));
  });
});

describe('memory', () => {
  test('fetch buffers are charged to the budget and given back; a range over it is refused', async () => {
    const { url, file } = addFile(100_000, 13);
    const budget = new MemoryBudget(50_000);
    const cache = newCache({ budget });
    await expectKind(cache.get(url, undefined, { start: 0, length: 40_000 }), 'overloaded'); // chunks + joined copy
    expect(budget.used).toBe(0);
    const range = { start: 0, length: 20_000 };
    expectServed(await cache.get(url, undefined, range), file.bytes, range);
    expect(budget.used).toBe(0);
  });

  test('a slice in use keeps its evicted parent charged until released', async () => {
    const { url } = addFile(60_000, 14);
    const other = addFile(60_000, 15);
    const budget = new MemoryBudget(1 << 20);
    const cache = newCache({ maxBytes: 100_000, budget });
    await cache.get(url);
    const slice = await cache.get(url, undefined, { start: 0, length: 1000 });
    expect(slice.cached).toBe(true);
    const release = slice.hold();
    await cache.get(other.url); // evicts the first object
    expect(cache.has(url)).toBe(false);
    expect(cache.stats().heldAfterEviction).toBe(60_000);
    expect(budget.used).toBe(60_000);
    release();
    expect(cache.stats().heldAfterEviction).toBe(0);
    expect(budget.used).toBe(0);
  });
});

describe('property: random ranges in random order', () => {
  test.each(Array.from({ length: 24 }, (_, i) => i + 1))('seed %i: every answer is byte-exact', async (seed) => {
    const random = seededRandom(seed * 7919);
    const pick = (n: number) => random() % n;
    const size = 1 + pick(150_000);
    const { url, file } = addFile(size, seed + 1000, { ignoresRange: pick(6) === 0 });
    // No cache, a cache smaller than the file (evictions), or a roomy one.
    const cache = newCache({ maxBytes: [0, 40_000, 1 << 20][pick(3)] });
    // Splits of the file into ranges, overlapping, some reaching past the end, in random order.
    const ranges: (ByteRange | undefined)[] = [];
    for (let round = 0; round < 3; round++) {
      let start = pick(1000);
      while (start < size) {
        const length = 1 + pick(40_000);
        ranges.push({ start, length });
        start += Math.max(1, length - pick(2000));
      }
    }
    for (let i = 0; i < 3; i++) ranges.push({ start: size + pick(100), length: 1 + pick(100) }, undefined);
    for (let i = ranges.length - 1; i > 0; i--) {
      const j = pick(i + 1);
      [ranges[i], ranges[j]] = [ranges[j], ranges[i]];
    }
    // Asked in concurrent batches, so that joins happen too.
    for (let i = 0; i < ranges.length;) {
      const batch = ranges.slice(i, (i += 1 + pick(5)));
      await Promise.all(
        batch.map(async (range) => {
          if (!range) {
            const whole = await cache.get(url);
            expect(Buffer.from(whole.bytes).equals(Buffer.from(file.bytes))).toBe(true);
          } else if (range.start >= size) await expectKind(cache.get(url, undefined, range), 'range-not-satisfiable');
          else expectServed(await cache.get(url, undefined, range), file.bytes, range);
        }),
      );
    }
    expect(cache.stats().inFlight).toBe(0);
  });
});

describe('fetchers that do not honour the range', () => {
  test('a whole body for a ranged fetch is kept as the whole object and sliced', async () => {
    const body = makeObject(10_000, 31);
    const asked: (ByteRange | undefined)[] = [];
    const cache = new ObjectCache({
      maxBytes: 1 << 20,
      fetch: async (_url, control) => (asked.push(control.range), { bytes: body }),
    });
    const range = { start: 2000, length: 3000 };
    expectServed(await cache.get('http://o/x', undefined, range), body, range);
    expect(asked).toEqual([range]);
    expect(cache.has('http://o/x')).toBe(true);
    expectServed(await cache.get('http://o/x', undefined, { start: 9000, length: 5000 }), body, {
      start: 9000,
      length: 5000,
    });
    expect(asked.length).toBe(1);
  });

  test('an answer that is not the range asked for is an origin error, not cached', async () => {
    const cache = new ObjectCache({
      maxBytes: 1 << 20,
      fetch: async () => ({ bytes: new Uint8Array(50), range: { start: 7, completeLength: 1000 } }),
    });
    await expectKind(cache.get('http://o/y', undefined, { start: 8, length: 50 }), 'origin-error');
    expect(cache.stats()).toMatchObject({ failures: 1, entries: 0 });
  });
});
