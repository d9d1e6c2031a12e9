/** Token bucket and rate meter with an injected clock (ms). */
import { RateMeter } from '../src/rate-meter';
import { MAX_DATAGRAM_BYTES } from '@mutp/shared';
import { defaultBurstBytes, TokenBucket } from '../src/token-bucket';

test('starts full, refills at the rate, never above the burst', () => {
  const b = new TokenBucket(1000, 500, 0); // 1000 B/s, 500 B burst
  expect(b.take(500, 0)).toBe(true);
  expect(b.take(1, 0)).toBe(false);
  expect(b.waitTime(100, 0)).toBeCloseTo(100); // 100 B at 1000 B/s
  expect(b.take(100, 99)).toBe(false);
  expect(b.take(100, 100)).toBe(true);
  // A long pause fills the bucket only to its burst.
  expect(b.waitTime(500, 10_000)).toBe(0);
  expect(b.take(500, 10_000)).toBe(true);
  expect(b.take(1, 10_000)).toBe(false);
  expect(b.stats()).toMatchObject({ rateBps: 1000, burstBytes: 500, bytesTaken: 1100, refusals: 3 });
});

test('the long-run rate matches the configured rate', () => {
  const rate = 896 * 1024;
  const b = new TokenBucket(rate, 16 * 1024, 0);
  let now = 0;
  let sent = 0;
  while (now < 10_000) {
    const wait = b.waitTime(1138, now);
    if (wait > 0) now += wait;
    else if (b.take(1138, now)) sent += 1138;
  }
  // 10 s at the rate plus at most the initial burst.
  expect(sent).toBeLessThanOrEqual(rate * 10 + 16 * 1024);
  expect(sent).toBeGreaterThanOrEqual(rate * 10 - 1138);
});

test('requests above the burst wait for a full bucket instead of for ever', () => {
  const b = new TokenBucket(1000, 500, 0);
  b.take(500, 0);
  expect(b.waitTime(10_000, 0)).toBeCloseTo(500);
});

test('the default burst is about 4 ms at the rate, and never less than four datagrams', () => {
  expect(new TokenBucket(1792 * 1024).burstBytes).toBe(Math.ceil(1792 * 1024 * 0.004)); // 7341 B
  expect(new TokenBucket(896 * 1024).burstBytes).toBe(4 * MAX_DATAGRAM_BYTES);
  expect(defaultBurstBytes(100 * 1024 * 1024)).toBe(Math.ceil(100 * 1024 * 1024 * 0.004));
  // Back to back from a full bucket at 896 KB/s: four datagrams, then paced by the rate.
  const b = new TokenBucket(896 * 1024, undefined, 0);
  let sent = 0;
  while (b.take(1200, 0)) sent++;
  expect(sent).toBe(4);
});

test('a rate of 0 is unlimited', () => {
  const b = new TokenBucket(0);
  expect(b.unlimited).toBe(true);
  for (let i = 0; i < 1000; i++) expect(b.take(1 << 20, 0)).toBe(true);
  expect(b.waitTime(1 << 30, 0)).toBe(0);
  expect(b.stats().waits).toBe(0);
});

test('the clock going backwards does not mint tokens', () => {
  const b = new TokenBucket(1000, 500, 1000);
  b.take(500, 1000);
  expect(b.take(1, 500)).toBe(false);
  expect(b.take(100, 1100)).toBe(true);
});

test('rate meter: bytes per second over the last seconds', () => {
  let now = 0;
  const m = new RateMeter(5, () => now);
  for (let t = 0; t < 10_000; t += 100) {
    now = t;
    m.add(1000); // 10 kB/s
  }
  now = 10_000;
  expect(m.bytesPerSecond()).toBeCloseTo(10_000, -2);
  now = 30_000; // silence
  expect(m.bytesPerSecond()).toBe(0);
  expect(m.totalBytes).toBe(100 * 1000);
});
