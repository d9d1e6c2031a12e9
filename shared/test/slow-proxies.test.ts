/**
 * SlowProxies: a proxy far below its share of a segment, segment after segment, is degrading
 * (the handoff replaces it between segments); its share follows origo's claimed capacities.
 */
import { MIN_JUDGED_BYTES, SLOW_SEGMENTS, SlowProxies } from '../src/client/staging/slow-proxies';
import type { ProxyInfo } from '../src';

const proxy = (id: string, capacityBps = 0): ProxyInfo => ({
  proxyId: id,
  name: id,
  httpUrl: `http://${id}.test/`,
  capacityBps,
});

/** A segment of `bytes` in which each proxy had `shares[id]` of the useful packets. */
function segment(shares: Record<string, number>, bytes = 2 * MIN_JUDGED_BYTES) {
  return {
    sources: Object.entries(shares).map(([proxyId, share]) => ({
      proxyId,
      name: proxyId,
      share,
      bytes: share * bytes,
    })),
  };
}

const EVEN = [proxy('a'), proxy('b'), proxy('c'), proxy('d')];

test(`slow in ${SLOW_SEGMENTS} judged segments in a row is degrading; a good one in between resets the count`, () => {
  const slow = new SlowProxies();
  const d = (share: number) => segment({ a: (1 - share) / 3, b: (1 - share) / 3, c: (1 - share) / 3, d: share });
  // An even share is 0.25; below a quarter of it (0.0625) is slow.
  expect(slow.judge(d(0.05), EVEN)).toEqual([]);
  expect(slow.judge(d(0.05), EVEN)).toEqual([EVEN[3]]);
  expect(slow.judge(d(0.05), EVEN)).toEqual([EVEN[3]]);
  expect(slow.judge(d(0.1), EVEN)).toEqual([]);
  expect(slow.judge(d(0.05), EVEN)).toEqual([]);
  expect(slow.judge(d(0.05), EVEN)).toEqual([EVEN[3]]);
  slow.forget('d');
  expect(slow.judge(d(0.05), EVEN)).toEqual([]);
});

test('shares follow the claimed capacities: a slower proxy is not degrading for being slower', () => {
  const mixed = [proxy('a', 896e3), proxy('b', 896e3), proxy('c', 1792e3), proxy('d', 1792e3)];
  const slow = new SlowProxies();
  // a and b should have 1/6 each; 0.05 is above a quarter of that (0.042)...
  for (let i = 0; i < 3; i++)
    expect(slow.judge(segment({ a: 0.05, b: 0.2833, c: 0.3333, d: 0.3333 }), mixed)).toEqual([]);
  // ...0.03 is not.
  slow.judge(segment({ a: 0.03, b: 0.3033, c: 0.3333, d: 0.3333 }), mixed);
  expect(slow.judge(segment({ a: 0.03, b: 0.3033, c: 0.3333, d: 0.3333 }), mixed)).toEqual([mixed[0]]);
  // One proxy without a claim: every share is even (0.25, slow below 0.0625).
  const unclaimed = [proxy('a', 896e3), proxy('b', 896e3), proxy('c'), proxy('d', 1792e3)];
  const even = new SlowProxies();
  for (let i = 0; i < 3; i++)
    expect(even.judge(segment({ a: 0.07, b: 0.31, c: 0.31, d: 0.31 }), unclaimed)).toEqual([]);
});

test('segments too small to say anything, and sets of one, are not judged', () => {
  const slow = new SlowProxies();
  const two = [proxy('a'), proxy('b')];
  slow.judge(segment({ a: 0.99, b: 0.01 }), two);
  // A small segment leaves the streak as it was: the next judged slow segment completes it.
  expect(slow.judge(segment({ a: 0.99, b: 0.01 }, MIN_JUDGED_BYTES / 2), two)).toEqual([]);
  expect(slow.judge(segment({ a: 0.99, b: 0.01 }), two)).toEqual([two[1]]);
  const one = new SlowProxies();
  for (let i = 0; i < 3; i++) expect(one.judge(segment({ a: 1 }), [proxy('a')])).toEqual([]);
  // A proxy of the set absent from the result (it failed) is the failure handoff's, not judged here.
  const absent = new SlowProxies();
  for (let i = 0; i < 3; i++) expect(absent.judge(segment({ a: 0.5, b: 0.5 }), [...two, proxy('c')])).toEqual([]);
});
