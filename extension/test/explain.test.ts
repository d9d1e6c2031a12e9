/** The popup's explanations from counters: the worker notice and the time saved (common/explain.ts). */
import { Counters, emptyCounters, sanitizeCounters, sumCounters } from '../src/common/counters';
import { estimateSavings, workerNotice } from '../src/common/explain';

const MIB = 1024 * 1024;
const counters = (c: Partial<Counters>): Counters => ({ ...emptyCounters(), ...c });

describe('workerNotice', () => {
  test('no worker, no notice', () => {
    expect(workerNotice(counters({ appendedBytes: 50 * MIB }))).toBeUndefined();
  });

  test('hls.js: a transmux worker and every segment served by MUTP is not a notice', () => {
    // TS in, fMP4 out: a few percent fewer bytes appended than fetched.
    const c = counters({ workers: 1, media: 10, served: 10, servedBytes: 20 * MIB, appendedBytes: 19 * MIB });
    expect(workerNotice(c)).toBeUndefined();
    // Some segments fell back to the network: their bytes were fetched by the page too.
    expect(workerNotice({ ...c, servedBytes: 12 * MIB, fetchedBytes: 8 * MIB })).toBeUndefined();
  });

  test('media appended that no main-thread request fetched came through a worker', () => {
    expect(workerNotice(counters({ workers: 2, appendedBytes: 8 * MIB }))).toEqual({
      kind: 'unexplained-media',
      workers: 2,
      bytes: 8 * MIB,
    });
    expect(
      workerNotice(counters({ workers: 1, media: 3, servedBytes: 2 * MIB, fetchedBytes: MIB, appendedBytes: 9 * MIB })),
    ).toEqual({ kind: 'unexplained-media', workers: 1, bytes: 6 * MIB });
  });

  test('under 1 MiB or within the slack is not a notice', () => {
    expect(workerNotice(counters({ workers: 1, appendedBytes: MIB / 2 }))).toBeUndefined();
    expect(workerNotice(counters({ workers: 1, media: 4, servedBytes: 10 * MIB, appendedBytes: 12 * MIB }))).toBe(
      undefined,
    );
  });

  test('with hidden response sizes only a page without main-thread media requests is reported', () => {
    const hidden = counters({ workers: 1, media: 4, fetchedUnsized: 4, appendedBytes: 8 * MIB });
    expect(workerNotice(hidden)).toBeUndefined();
    expect(workerNotice({ ...hidden, media: 0 })).toMatchObject({ kind: 'unexplained-media' });
  });

  test('MSE inside a worker (a MediaSourceHandle) is reported', () => {
    expect(workerNotice(counters({ workers: 1, workerMediaSources: 1 }))).toEqual({ kind: 'worker-mse', workers: 1 });
  });
});

describe('estimateSavings', () => {
  test('no network sample: what MUTP served, no estimate', () => {
    expect(estimateSavings(counters({ served: 3, servedBytes: 6e6, servedMs: 1500 }))).toEqual({
      served: 3,
      servedBytes: 6e6,
      servedMs: 1500,
    });
  });

  test('served bytes at the network’s measured rate, minus MUTP’s time', () => {
    // Network: 4 MB in 2 s = 2 MB/s; MUTP served 6 MB in 1.5 s: the network would take 3 s.
    const s = estimateSavings(
      counters({ served: 3, servedBytes: 6e6, servedMs: 1500, networkFiles: 2, networkBytes: 4e6, networkMs: 2000 }),
    );
    expect(s).toEqual({
      served: 3,
      servedBytes: 6e6,
      servedMs: 1500,
      network: { bps: 2e6, files: 2, bytes: 4e6 },
      networkMs: 3000,
      savedMs: 1500,
    });
  });

  test('MUTP slower than the network is said as a loss (negative)', () => {
    const s = estimateSavings(
      counters({ served: 1, servedBytes: 1e6, servedMs: 900, networkFiles: 1, networkBytes: 2e6, networkMs: 1000 }),
    );
    expect(s.savedMs).toBeCloseTo(-400);
  });
});

test('the new counters are summed over frames and sanitized like the others', () => {
  const a = counters({ servedMs: 10, networkFiles: 1, networkBytes: 5, appendedBytes: 7, workerMediaSources: 1 });
  expect(sumCounters([a, a])).toMatchObject({ servedMs: 20, networkFiles: 2, networkBytes: 10, appendedBytes: 14 });
  expect(sanitizeCounters({ ...a, networkMs: -3, fetchedBytes: 'x', appendedBytes: 7.9 })).toMatchObject({
    networkMs: 0,
    fetchedBytes: 0,
    appendedBytes: 7,
    workerMediaSources: 1,
  });
  // Counters from an older hook (no new fields) still sum.
  expect(sumCounters([sanitizeCounters({ media: 1 })]).appendedBytes).toBe(0);
});
