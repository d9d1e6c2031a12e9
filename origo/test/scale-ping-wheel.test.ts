/**
 * Liveness pings are spread over the interval (sessions/ping-wheel.ts): every socket once per
 * interval, a slot's worth per tick, never all of them in one turn of the event loop.
 */
import { PingWheel } from '../src/sessions/ping-wheel';

test('each member is visited once per round, a slot at a time, and a deleted one no more', () => {
  const visits = new Map<number, number>();
  // An interval so long the timer never fires here: the test turns the wheel itself.
  const wheel = new PingWheel<number>(1e9, (m) => visits.set(m, (visits.get(m) ?? 0) + 1), 4);
  try {
    for (let m = 0; m < 100; m++) wheel.add(m);
    wheel.add(0); // already in: not dealt twice
    expect(wheel.size).toBe(100);
    const perTick: number[] = [];
    for (let t = 0; t < 4; t++) {
      const before = visits.size === 0 ? 0 : [...visits.values()].reduce((a, b) => a + b, 0);
      wheel.tick();
      perTick.push([...visits.values()].reduce((a, b) => a + b, 0) - before);
    }
    expect(perTick).toEqual([25, 25, 25, 25]);
    expect([...visits.values()].every((n) => n === 1)).toBe(true);
    wheel.delete(7);
    wheel.delete(7);
    expect(wheel.size).toBe(99);
    for (let t = 0; t < 4; t++) wheel.tick();
    expect(visits.get(7)).toBe(1);
    expect(visits.get(8)).toBe(2);
  } finally {
    wheel.stop();
  }
});

test('a member may leave while its slot is visited', () => {
  const seen: number[] = [];
  const wheel: PingWheel<number> = new PingWheel<number>(
    1e9,
    (m) => {
      seen.push(m);
      wheel.delete(m); // as a socket terminated on a missed ping leaves
    },
    1,
  );
  try {
    for (let m = 0; m < 5; m++) wheel.add(m);
    wheel.tick();
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    expect(wheel.size).toBe(0);
  } finally {
    wheel.stop();
  }
});
