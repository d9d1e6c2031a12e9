/**
 * ProxyExclusions (the proxies a MutpClient does not ask origo for) on its own, with fake time:
 * how long each kind of exclusion lasts, how many withdrawn proxies are remembered, and who is
 * told when a proxy starts leaving.
 */
import { ProxyExclusions } from '../src/client/proxy-exclusions';
import { FakeClock } from './helpers/fake-host';

function setup(goingAway: string[] = []) {
  const clock = new FakeClock();
  const traced: string[] = [];
  const exclusions = new ProxyExclusions(
    clock,
    () => goingAway,
    (line) => traced.push(line),
  );
  const advance = (ms: number) => {
    let fired = false;
    clock.setTimer(ms, () => (fired = true));
    while (!fired) clock.step();
  };
  return { exclusions, advance, traced };
}

test('a proxy that could not be reached is avoided for a minute, and forgotten on a network change', () => {
  const { exclusions, advance } = setup();
  exclusions.failed('a');
  advance(60_000);
  expect(exclusions.avoided()).toEqual(['a']);
  advance(1);
  expect(exclusions.avoided()).toEqual([]);
  exclusions.failed('b');
  exclusions.forgetFailures();
  expect(exclusions.avoided()).toEqual([]);
});

test('a polluter is avoided for an hour, and known as one while it is', () => {
  const { exclusions, advance } = setup();
  expect(exclusions.isPolluter('p')).toBe(false);
  exclusions.polluted('p');
  expect(exclusions.isPolluter('p')).toBe(true);
  advance(60 * 60_000);
  expect(exclusions.avoided()).toEqual(['p']);
  advance(1);
  expect(exclusions.avoided()).toEqual([]);
  expect(exclusions.isPolluter('p')).toBe(false);
});

test('a withdrawn proxy is leaving for ten minutes; listeners hear of it, and of one going away', () => {
  const goingAway = ['g'];
  const { exclusions, advance, traced } = setup(goingAway);
  const heard: string[] = [];
  const unsubscribe = exclusions.onLeaving((id) => heard.push(id));
  exclusions.withdrawn('w', 'draining');
  exclusions.announceLeaving('g');
  expect(heard).toEqual(['w', 'g']);
  expect(traced).toEqual(['origo withdrew proxy w (draining): no new downloads from it']);
  expect(exclusions.leaving()).toEqual(['g', 'w']);
  expect(exclusions.avoided()).toEqual(['g', 'w']);
  advance(10 * 60_000 + 1);
  expect(exclusions.leaving()).toEqual(['g']);
  unsubscribe();
  exclusions.withdrawn('x', 'revoked');
  expect(heard).toEqual(['w', 'g']);
});

test('a proxy both going away and withdrawn is listed once', () => {
  const { exclusions } = setup(['a']);
  exclusions.withdrawn('a', 'draining');
  expect(exclusions.leaving()).toEqual(['a']);
});

test('at most 256 withdrawn proxies are remembered, the oldest forgotten first', () => {
  const { exclusions } = setup();
  for (let i = 0; i < 257; i++) exclusions.withdrawn(`p${i}`, 'proven-false');
  const leaving = exclusions.leaving();
  expect(leaving).toHaveLength(256);
  expect(leaving).not.toContain('p0');
  expect(leaving[0]).toBe('p1');
  // Withdrawn again: it becomes the newest, so it outlives the others.
  exclusions.withdrawn('p1', 'proven-false');
  exclusions.withdrawn('p257', 'proven-false');
  expect(exclusions.leaving()).toContain('p1');
  expect(exclusions.leaving()).not.toContain('p2');
});
