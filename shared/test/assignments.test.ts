/** Assignments: which proxies each upcoming segment goes to (its hint and its download). */
import type { ProxyInfo } from '../src';
import { Assignments } from '../src/client/staging/assignments';

const proxy = (id: string): ProxyInfo => ({
  proxyId: id,
  name: id,
  httpUrl: `https://${id}.example/`,
  capacityBps: 1e6,
});
const SET = ['a', 'b', 'c', 'd'].map(proxy);
const ids = (ps: readonly ProxyInfo[]) => ps.map((p) => p.proxyId);

test('k of the set, the next k in turn: each proxy gets its share', () => {
  const a = new Assignments();
  const given = ['s0', 's1', 's2', 's3'].map((key) => ids(a.assign(key, SET, 2)));
  expect(given).toEqual([
    ['a', 'b'],
    ['c', 'd'],
    ['a', 'b'],
    ['c', 'd'],
  ]);
  // The whole set takes no turn.
  expect(ids(a.assign('s4', SET, 4))).toEqual(['a', 'b', 'c', 'd']);
  expect(ids(a.assign('s5', SET, 2))).toEqual(['a', 'b']);
});

test('a segment keeps its proxies when k changes, and until it is forgotten', () => {
  const a = new Assignments();
  expect(ids(a.assign('s0', SET, 4))).toEqual(['a', 'b', 'c', 'd']);
  expect(ids(a.assign('s0', SET, 2))).toEqual(['a', 'b', 'c', 'd']);
  expect(ids(a.assign('s1', SET, 2))).toEqual(['a', 'b']);
  expect(ids(a.assign('s1', SET, 4))).toEqual(['a', 'b']);
  a.forget('s1');
  expect(a.of('s1')).toBeUndefined();
  expect(ids(a.assign('s1', SET, 4))).toEqual(['a', 'b', 'c', 'd']);
});

test("a handoff gives a leaver's segments to its newcomer; one whose proxy left is topped up from the set", () => {
  const a = new Assignments();
  a.assign('s0', SET, 2); // a, b
  a.assign('s1', SET, 2); // c, d
  a.handOver(new Map([['b', 'e']]));
  const after = [proxy('a'), proxy('c'), proxy('d'), proxy('e')];
  expect(ids(a.assign('s0', after, 2))).toEqual(['a', 'e']);
  expect(ids(a.assign('s1', after, 2))).toEqual(['c', 'd']);
  // c left without a successor: s1 keeps d and takes the first free proxy of the set.
  const without = [proxy('a'), proxy('d'), proxy('e')];
  expect(ids(a.assign('s1', without, 2))).toEqual(['d', 'a']);
});

test('at most 256 segments are remembered: the oldest go first', () => {
  const a = new Assignments();
  for (let i = 0; i < 300; i++) a.assign(`s${i}`, SET, 2);
  expect(a.of('s0')).toBeUndefined();
  expect(a.of('s43')).toBeUndefined();
  expect(a.of('s44')).toBeDefined();
  expect(a.of('s299')).toBeDefined();
});
