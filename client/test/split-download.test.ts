import type { ByteRange } from '@mutp/shared';
import type { GetResult } from '@mutp/shared/client';
import { downloadSplit, retryable, SplitError, SplitProgress, SplitSink } from '../src/split-download';

/** A resource of `length` bytes (byte i = i mod 251) served range by range as the proxies would. */
function resource(length: number | (() => number), options: { statesLength?: boolean } = {}) {
  const asked: ByteRange[] = [];
  const fetchRange = (range: ByteRange): Promise<GetResult> => {
    asked.push(range);
    const total = typeof length === 'function' ? length() : length;
    if (range.start >= total) return Promise.reject(new Error('download-failed: range not satisfiable (4)'));
    const end = Math.min(total, range.start + range.length);
    const object = Uint8Array.from({ length: end - range.start }, (_, i) => (range.start + i) % 251);
    return Promise.resolve({
      object,
      mode: 'rlnc',
      startedAt: 0,
      durationMs: 1,
      goodputBps: 1,
      normalizedGoodput: 0.5,
      attributes: {
        range: { start: range.start, ...(options.statesLength === false ? {} : { completeLength: total }) },
      },
      sources: [
        { proxyId: 'a', name: 'edge-a', bytes: object.length, share: 0.75, useful: 3, received: 4, state: 'active' },
        {
          proxyId: 'b',
          name: 'edge-b',
          bytes: object.length,
          share: 0.25,
          useful: 1,
          received: 4,
          state: 'failed',
          error: 'lost',
        },
      ],
    } as unknown as GetResult);
  };
  return { asked, fetchRange };
}

/** Collects what is written, checking it comes in order. */
function memorySink(): SplitSink & { bytes: number[]; commits: SplitProgress[] } {
  const bytes: number[] = [];
  const commits: SplitProgress[] = [];
  return {
    bytes,
    commits,
    write: (offset, chunk) => {
      expect(offset).toBe(commits[commits.length - 1]?.nextOffset ?? offset);
      bytes.push(...chunk);
      return Promise.resolve();
    },
    commit: (p) => {
      commits.push(p);
      return Promise.resolve();
    },
  };
}

const expected = (start: number, end: number) => Array.from({ length: end - start }, (_, i) => (start + i) % 251);

test('the whole resource in ranges of chunkBytes, the last one only as long as what is left', async () => {
  const r = resource(2500);
  const sink = memorySink();
  const result = await downloadSplit(r.fetchRange, { start: 0, chunkBytes: 1000 }, sink);
  expect(r.asked).toEqual([
    { start: 0, length: 1000 },
    { start: 1000, length: 1000 },
    { start: 2000, length: 500 },
  ]);
  expect(sink.bytes).toEqual(expected(0, 2500));
  expect(sink.commits.map((c) => c.nextOffset)).toEqual([1000, 2000, 2500]);
  expect(result).toMatchObject({ fetchedBytes: 2500, resumedFrom: 0, completeLength: 2500, ranges: 3, mostProxies: 2 });
  expect(result.normalizedGoodput).toBeCloseTo(0.5);
  const [a, b] = result.proxies;
  expect(a).toMatchObject({ name: 'edge-a', ranges: 3, packets: { received: 12, useful: 9 }, failures: [] });
  expect(a.share).toBeCloseTo(0.75);
  expect(b.failures).toEqual(['lost']);
});

test('a resumed download asks only from where it stopped; --range bounds hold', async () => {
  const r = resource(10_000);
  const sink = memorySink();
  const result = await downloadSplit(r.fetchRange, { start: 1000, end: 4999, chunkBytes: 1500 }, sink, {
    nextOffset: 2500,
    completeLength: 10_000,
  });
  expect(r.asked).toEqual([
    { start: 2500, length: 1500 },
    { start: 4000, length: 1000 },
  ]);
  expect(sink.bytes).toEqual(expected(2500, 5000));
  expect(result).toMatchObject({ fetchedBytes: 2500, resumedFrom: 2500 });
});

test('a range asked past the end of a shorter resource ends at its end', async () => {
  const r = resource(1200);
  const sink = memorySink();
  await downloadSplit(r.fetchRange, { start: 0, end: 99_999, chunkBytes: 1000 }, sink);
  expect(r.asked).toEqual([
    { start: 0, length: 1000 },
    { start: 1000, length: 200 },
  ]);
  expect(sink.bytes).toEqual(expected(0, 1200));
});

test('an origin that never states the length: a short range is the end, and so is a refused one', async () => {
  const short = resource(2500, { statesLength: false });
  const sink = memorySink();
  await downloadSplit(short.fetchRange, { start: 0, chunkBytes: 1000 }, sink);
  expect(short.asked).toHaveLength(3);
  expect(sink.bytes).toEqual(expected(0, 2500));

  const exact = resource(2000, { statesLength: false });
  const sink2 = memorySink();
  const result = await downloadSplit(exact.fetchRange, { start: 0, chunkBytes: 1000 }, sink2);
  expect(exact.asked).toHaveLength(3); // the third is refused (416): the resource ended
  expect(result.fetchedBytes).toBe(2000);
});

test('a refused first range is an error, not an empty file', async () => {
  const r = resource(500);
  await expect(downloadSplit(r.fetchRange, { start: 600, chunkBytes: 1000 }, memorySink())).rejects.toThrow(
    /range not satisfiable/,
  );
});

test('an object that changes length between ranges fails instead of stitching versions', async () => {
  let length = 3000;
  const r = resource(() => length);
  const sink = memorySink();
  const run = downloadSplit(r.fetchRange, { start: 0, chunkBytes: 1000 }, sink, undefined, {
    onRange: () => (length = 4000),
  });
  await expect(run).rejects.toThrow(SplitError);
  await expect(run).rejects.toThrow(/changed while it was downloaded: it had 3000 bytes, now 4000/);
  expect(sink.commits.map((c) => c.nextOffset)).toEqual([1000]); // what was verified stays committed
});

test('a range that fails in a way trying again can mend is tried again (up to maxTries); others fail at once', async () => {
  const r = resource(3000);
  const failures = [
    'download-failed: metadata-unconfirmed: fewer than 2 sources could confirm the object',
    'connect-failed: no proxy could be reached',
  ];
  const flaky = (range: ByteRange) =>
    range.start === 1000 && failures.length > 0 ? Promise.reject(new Error(failures.shift())) : r.fetchRange(range);
  const waits: number[] = [];
  const retried: number[] = [];
  const sink = memorySink();
  const result = await downloadSplit(flaky, { start: 0, chunkBytes: 1000, maxTries: 3 }, sink, undefined, {
    sleep: (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
    onRetry: (range, attempt) => retried.push(range.start * 10 + attempt),
  });
  expect(sink.bytes).toEqual(expected(0, 3000));
  expect(result.retries).toBe(2);
  expect(waits).toEqual([1000, 2000]);
  expect(retried).toEqual([10002, 10003]);

  // Out of tries: the last failure stands, and what was verified stays committed.
  const always = (range: ByteRange) =>
    range.start === 1000 ? Promise.reject(new Error('download-failed: idle-timeout: silent')) : r.fetchRange(range);
  const sink2 = memorySink();
  await expect(
    downloadSplit(always, { start: 0, chunkBytes: 1000, maxTries: 2 }, sink2, undefined, {
      sleep: () => Promise.resolve(),
    }),
  ).rejects.toThrow(/idle-timeout/);
  expect(sink2.commits.map((c) => c.nextOffset)).toEqual([1000]);
});

test('what the origin answered, a conflict or a cancel is not retried', () => {
  expect(
    retryable(
      new Error(
        'download-failed: all-sources-failed: no source can serve the object (a: source-error: origin not found (1): origin answered 404)',
      ),
    ),
  ).toBe(false);
  expect(
    retryable(
      new Error('download-failed: all-sources-failed: no source can serve the object (a: connection to a lost)'),
    ),
  ).toBe(true);
  expect(retryable(new Error('download-failed: metadata-conflict: the sources disagree'))).toBe(false);
  expect(retryable(new Error('cancelled: cancelled by the caller'))).toBe(false);
  expect(retryable(new Error('origo-unreachable: no origo instance answered'))).toBe(false);
  expect(retryable(new Error('download-failed: range not satisfiable (8)'))).toBe(false);
});

describe('look-ahead (onUpcoming)', () => {
  const announced = async (
    r: ReturnType<typeof resource>,
    plan: Parameters<typeof downloadSplit>[1],
    from?: SplitProgress,
  ) => {
    const calls: { before: number; upcoming: ByteRange[] }[] = [];
    await downloadSplit(r.fetchRange, plan, memorySink(), from, {
      onUpcoming: (upcoming) => calls.push({ before: r.asked.length, upcoming }),
    });
    return calls;
  };

  test('announces the next ranges before each fetch, none past the end, none before the length is known', async () => {
    const calls = await announced(resource(4500), { start: 0, chunkBytes: 1000, lookahead: 2 });
    expect(calls).toEqual([
      // the first range's answer states the length: nothing is announced before it
      {
        before: 1,
        upcoming: [
          { start: 2000, length: 1000 },
          { start: 3000, length: 1000 },
        ],
      },
      {
        before: 2,
        upcoming: [
          { start: 3000, length: 1000 },
          { start: 4000, length: 500 },
        ],
      },
      { before: 3, upcoming: [{ start: 4000, length: 500 }] },
    ]);
  });

  test('with --range the end is known at once; a resumed download announces nothing before its resume point', async () => {
    const calls = await announced(
      resource(100_000),
      { start: 1000, end: 5999, chunkBytes: 1000, lookahead: 1 },
      { nextOffset: 3000 },
    );
    expect(calls.map((c) => c.upcoming)).toEqual([[{ start: 4000, length: 1000 }], [{ start: 5000, length: 1000 }]]);
  });

  test('an origin that never states the length gets no look-ahead; lookahead 0 announces nothing', async () => {
    expect(
      await announced(resource(2500, { statesLength: false }), { start: 0, chunkBytes: 1000, lookahead: 2 }),
    ).toEqual([]);
    expect(await announced(resource(2500), { start: 0, chunkBytes: 1000 })).toEqual([]);
  });
});
