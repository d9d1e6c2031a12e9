/**
 * SpreadRule against the rates its two models of the origin paths produce: one path shared by
 * every proxy (the testbed's vehicular profiles) and one path per proxy.
 */
import { SpreadRule } from '../src/client/staging/spread-rule';

const SEGMENT = 2_000_000; // bytes
const EDGE = 1792 * 1024; // bytes per second from each proxy

/** Feeds `rounds` segments at the rule's spread of the moment; `stagingMs(k)` is one hint's origin fetch. */
function run(rule: SpreadRule, stagingMs: (k: number) => number, rounds = 40, inFlight = 1): number[] {
  const seen: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const k = rule.current();
    rule.observeStaging(k, inFlight, stagingMs(k), SEGMENT);
    rule.observeFetch(k, k * EDGE);
    // Staging slower than fetching: the segment's download begins before it is staged.
    rule.observeStart(k, (inFlight * SEGMENT * 1000) / stagingMs(k) < k * EDGE);
    seen.push(rule.decide());
  }
  return seen;
}

test('one origin path shared by the proxies: the spread settles at sqrt(B / r), where staging keeps up', () => {
  const shared = (bytesPerSecond: number) => (k: number) => (1000 * k * SEGMENT) / bytesPerSecond;
  // 60 Mbit/s behind four proxies at 1792 KB/s: sqrt(7.5e6 / 1.835e6) = 2.02.
  const rule = new SpreadRule(4, { min: 1, start: 'set' });
  const seen = run(rule, shared(7.5e6));
  expect(seen.slice(-10)).toEqual(Array(10).fill(2));
  // Eight proxies behind a path four times as fast: sqrt(4 * 7.5e6 / 1.835e6) = 4.04.
  const wide = new SpreadRule(8, { min: 1, start: 'set' });
  expect(run(wide, shared(30e6)).slice(-10)).toEqual(Array(10).fill(4));
});

test('with as many hints in flight as the pipeline holds the shared path gives the same spread (Little)', () => {
  // Four hints share the path: each takes four times as long, and four are out when it is sent.
  const rule = new SpreadRule(4, { min: 1, start: 'set' });
  expect(run(rule, (k) => (4 * 1000 * k * SEGMENT) / 7.5e6, 40, 4).slice(-5)).toEqual(Array(5).fill(2));
});

test('a path per proxy fast enough to keep up: from the floor to the whole set in one move, and it stays', () => {
  const rule = new SpreadRule(4);
  expect(rule.current()).toBe(2); // the default start: the floor
  // 50 Mbit/s each: a hint takes 320 ms whatever k is; a fetch from four takes 272 ms, one hint out.
  const seen = run(rule, () => 320, 40, 2);
  // Three samples of each rate at 2, then the whole set.
  expect(seen.slice(0, 2)).toEqual([2, 2]);
  expect(seen.slice(2).every((k) => k === 4)).toBe(true);
  expect(rule.moves).toBe(1);
  // Begun at the whole set it never moves.
  const fromSet = new SpreadRule(4, { start: 'set' });
  expect(run(fromSet, () => 320, 40, 2).every((k) => k === 4)).toBe(true);
  expect(fromSet.moves).toBe(0);
});

test('begun at the floor behind one shared origin path: never more copies than the path carries', () => {
  const rule = new SpreadRule(4);
  const seen = run(rule, (k) => (1000 * k * 2_000_000) / 7.5e6);
  expect(seen.every((k) => k === 2)).toBe(true);
  expect(rule.moves).toBe(0);
  // A set of two: the floor is the set.
  expect(new SpreadRule(2).current()).toBe(2);
  expect(new SpreadRule(1).current()).toBe(1);
});

test('a slow path per proxy: the spread falls to where fetching is as fast as staging, never below min', () => {
  const rule = new SpreadRule(6, { min: 2, start: 'set' });
  // 2 s per hint whatever k is, one out: 0.5 segments per second; a fetch from k takes 1090/k ms.
  const seen = run(rule, () => 2000);
  expect(seen[seen.length - 1]).toBe(2);
  expect(Math.min(...seen)).toBe(2);
});

test('staging faster than fetching grows the spread back to the whole set', () => {
  const rule = new SpreadRule(4, { min: 1, start: 'set' });
  run(rule, (k) => (1000 * k * SEGMENT) / 7.5e6, 20);
  expect(rule.current()).toBe(2);
  // The origin path got much faster (another route): staging now outruns fetching.
  run(rule, (k) => (1000 * k * SEGMENT) / 100e6, 20);
  expect(rule.current()).toBe(4);
});

test('it moves only on minSamples of both rates, all taken at the current spread', () => {
  const rule = new SpreadRule(4, { min: 1, minSamples: 3, start: 'set' });
  // Samples from another spread (hints sent before a change) do not count.
  for (let i = 0; i < 5; i++) {
    rule.observeStaging(3, 1, 1000, SEGMENT);
    rule.observeFetch(3, 20000000);
  }
  expect(rule.decide()).toBe(4);
  rule.observeStart(4, true); // staging is behind
  rule.observeStaging(4, 1, 1067, SEGMENT);
  rule.observeStaging(4, 1, 1067, SEGMENT);
  rule.observeFetch(4, 7407407);
  rule.observeFetch(4, 7407407);
  rule.observeFetch(4, 7407407);
  expect(rule.decide()).toBe(4); // two staging samples only
  // A hint answered from the cache says nothing of the origin path.
  rule.observeStaging(4, 1, 0, SEGMENT);
  expect(rule.decide()).toBe(4);
  rule.observeStaging(4, 1, 1067, SEGMENT);
  expect(rule.decide()).toBe(2);
  expect(rule.moves).toBe(1);
  // Measured anew at 2: the old samples are gone.
  rule.observeFetch(2, 3703704);
  expect(rule.decide()).toBe(2);
});

test('rates are in bytes: small audio segments interleaved with video ones move the spread as video alone', () => {
  const B = 7.5e6; // one shared origin path, bytes per second
  const rule = new SpreadRule(4, { min: 1, start: 'set' });
  for (let i = 0; i < 40; i++) {
    const k = rule.current();
    for (const bytes of [SEGMENT, 100_000]) {
      rule.observeStaging(k, 1, (1000 * k * bytes) / B, bytes);
      rule.observeFetch(k, k * EDGE);
      rule.observeStart(k, B / k < k * EDGE);
    }
    rule.decide();
  }
  expect(rule.current()).toBe(2);
  // A sample without bytes (an empty answer) is not used.
  rule.observeStaging(2, 1, 1, 0);
  rule.observeFetch(2, 0);
  expect(rule.decide()).toBe(2);
});

test('fewer sources only when staging is seen behind: segments staged in time keep the spread, rates aside', () => {
  const rule = new SpreadRule(4, { min: 1, start: 'set' });
  for (let i = 0; i < 10; i++) {
    rule.observeStaging(4, 1, 1067, SEGMENT); // reads as 1.9 MB/s against 7.3 MB/s delivered
    rule.observeFetch(4, 4 * EDGE);
    rule.observeStart(4, false); // yet each segment was staged before its download (a paced player)
    expect(rule.decide()).toBe(4);
  }
  // Three of the last five behind: now it falls.
  for (let i = 0; i < 3; i++) rule.observeStart(4, true);
  expect(rule.decide()).toBe(2);
});

test('a smaller set clamps the spread; min never exceeds the set', () => {
  const rule = new SpreadRule(4, { min: 2 });
  rule.setSize(1);
  expect(rule.current()).toBe(1);
  run(rule, () => 10_000, 5);
  expect(rule.current()).toBe(1);
  rule.setSize(3);
  expect(rule.current()).toBe(1); // grows only on measurements
  expect(() => new SpreadRule(4, { min: 0 })).toThrow(RangeError);
});
