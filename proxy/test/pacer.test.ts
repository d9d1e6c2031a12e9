/** The proxy's one pacing timer, with an injected clock and timers (no real time). */
import { MAX_DATAGRAM_BYTES } from '@mutp/shared';
import { Pacer, PacerTimers, pacingQuantumBytes } from '../src/pacer';
import { TokenBucket } from '../src/token-bucket';

/** Timers a test fires by hand: each armed one with its delay. */
function manualTimers() {
  const armed: { fire: () => void; ms: number; cleared: boolean }[] = [];
  const timers: PacerTimers = {
    set: (fire, ms) => {
      const t = { fire, ms, cleared: false };
      armed.push(t);
      return t;
    },
    clear: (handle) => {
      (handle as { cleared: boolean }).cleared = true;
    },
  };
  const live = () => armed.filter((t) => !t.cleared);
  return { timers, armed, live };
}

const RATE = 1_000_000; // 1000 B/ms

/** A pacer waiting for one datagram of an emptied 4000 B bucket, its timers, and what it resumed. */
function drainedPacer() {
  const bucket = new TokenBucket(RATE, 4000, 0);
  bucket.take(4000, 0);
  const manual = manualTimers();
  const pacer = new Pacer(bucket, MAX_DATAGRAM_BYTES, manual.timers);
  const resumed: string[] = [];
  return { pacer, live: manual.live, resumed, resume: (name: string) => () => resumed.push(name) };
}

test('the quantum is one datagram by default, else ms of tokens within one datagram and the burst', () => {
  const bucket = new TokenBucket(RATE, 8000, 0);
  expect(pacingQuantumBytes(bucket)).toBe(MAX_DATAGRAM_BYTES);
  expect(pacingQuantumBytes(bucket, 0.5)).toBe(MAX_DATAGRAM_BYTES);
  expect(pacingQuantumBytes(bucket, 3)).toBe(3000);
  expect(pacingQuantumBytes(bucket, 20)).toBe(8000);
});

test('one timer for every waiting host, at the time the quantum is back; each resumed once', () => {
  const bucket = new TokenBucket(RATE, 8000, 0);
  expect(bucket.take(8000, 0)).toBe(true);
  const { timers, armed } = manualTimers();
  const pacer = new Pacer(bucket, 2500, timers);
  const resumed: string[] = [];
  const a = () => resumed.push('a');
  const b = () => resumed.push('b');
  pacer.wait(a, 0);
  pacer.wait(b, 0.3);
  pacer.wait(a, 0.6); // asked twice: still one resume
  expect(armed).toHaveLength(1);
  expect(armed[0].ms).toBe(3); // 2500 B at 1000 B/ms, in whole ms
  expect(pacer.size).toBe(2);
  armed[0].fire();
  expect(resumed).toEqual(['a', 'b']);
  expect(pacer.size).toBe(0);
});

test('a host that finds the bucket dry again waits for the next round, which starts with another host', () => {
  const bucket = new TokenBucket(RATE, 4000, 0);
  let now = 0;
  const { timers, armed, live } = manualTimers();
  const pacer = new Pacer(bucket, MAX_DATAGRAM_BYTES, timers);
  const sent: string[] = [];
  // A host's pump: sends while the bucket has a datagram's tokens, then waits.
  const host = (name: string) => {
    const pump = () => {
      while (bucket.waitTime(MAX_DATAGRAM_BYTES, now) === 0) {
        bucket.take(MAX_DATAGRAM_BYTES, now);
        sent.push(name);
      }
      pacer.wait(pump, now);
    };
    return pump;
  };
  const x = host('x');
  const y = host('y');
  x();
  y();
  expect(sent).toEqual(['x', 'x', 'x']); // the initial burst
  for (let round = 0; round < 4; round++) {
    expect(live()).toHaveLength(1);
    const t = live()[0];
    t.cleared = true;
    now += t.ms;
    t.fire();
  }
  expect(armed.length).toBeGreaterThan(4);
  // Every round had tokens for one or two datagrams; the first in line changes each round.
  const rounds = sent.slice(3);
  expect(rounds.filter((s) => s === 'x').length).toBeGreaterThan(0);
  expect(rounds.filter((s) => s === 'y').length).toBeGreaterThan(0);
});

test('cancel forgets a host; the timer goes with the last one', () => {
  const { pacer, live, resumed, resume } = drainedPacer();
  const a = resume('a');
  const b = resume('b');
  pacer.wait(a, 0);
  pacer.wait(b, 0);
  pacer.cancel(a);
  expect(live()).toHaveLength(1);
  pacer.cancel(b);
  expect(live()).toHaveLength(0);
  pacer.wait(a, 0);
  expect(live()).toHaveLength(1);
  live()[0].fire();
  expect(resumed).toEqual(['a']);
});

test('a resume that throws does not keep the others waiting; its error goes on', () => {
  const { pacer, live, resumed, resume } = drainedPacer();
  pacer.wait(() => {
    throw new Error('bug');
  }, 0);
  pacer.wait(resume('b'), 0);
  expect(() => live()[0].fire()).toThrow('bug');
  expect(resumed).toEqual(['b']);
});

test("arming the timer does not count as another of the bucket's waits", () => {
  const bucket = new TokenBucket(RATE, 4000, 0);
  bucket.take(4000, 0);
  expect(bucket.waitTime(MAX_DATAGRAM_BYTES, 0)).toBeGreaterThan(0);
  new Pacer(bucket, MAX_DATAGRAM_BYTES, manualTimers().timers).wait(() => {}, 0);
  expect(bucket.stats().waits).toBe(1);
});
