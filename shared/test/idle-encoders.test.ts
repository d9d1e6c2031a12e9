/**
 * Idle encoders: an object's encoder outlives its last transfer while a pool keeps it, is reused
 * by the next transfer, and gives its memory back to the budget whenever anything else needs it.
 */
import { Codec, encoderBytesOf, IdleEncoders, Layout, MemoryBudget, rlncCodec, SharedEncoders } from '../src/internal';

const OBJECT = new Uint8Array(4096).map((_, i) => (i * 7) & 0xff);
const LAYOUT = new Layout('rlnc', OBJECT.length, 64, 8);
/** What one encoder of OBJECT is charged. */
const E = encoderBytesOf(rlncCodec, OBJECT.length);

/** rlncCodec, counting the encoders it builds and frees. */
function countingCodec() {
  const counts = { built: 0, freed: 0 };
  const codec: Codec = {
    ...rlncCodec,
    createEncoder: (object, layout) => {
      counts.built++;
      const inner = rlncCodec.createEncoder(object, layout);
      return {
        ...inner,
        encodeInto: (u, k, out) => inner.encodeInto(u, k, out),
        free: () => (counts.freed++, inner.free()),
      };
    },
  };
  return { codec, counts };
}

/** A pooled object whose one transfer has ended: its encoder is parked. */
function oneParked() {
  const budget = new MemoryBudget(1 << 20);
  const pool = new IdleEncoders(budget, 1 << 20);
  const encoders = new SharedEncoders(OBJECT, budget);
  encoders.keepIdleIn(pool);
  const { codec, counts } = countingCodec();
  encoders.lease(codec, LAYOUT).free();
  return { budget, pool, encoders, codec, counts };
}

describe('IdleEncoders with SharedEncoders', () => {
  test('the next transfer of the object reuses the encoder its last transfer let go', () => {
    const { budget, pool, encoders, codec, counts } = oneParked();
    // Parked: still built, still charged.
    expect(counts).toEqual({ built: 1, freed: 0 });
    expect(pool.count).toBe(1);
    expect(budget.used).toBe(E);
    const again = encoders.lease(codec, LAYOUT);
    expect(counts.built).toBe(1);
    expect(pool.count).toBe(0);
    const out = new Uint8Array(64);
    again.encodeInto(0, 1, out);
    again.free();
    expect(pool.count).toBe(1);
  });

  test('without a pool the encoder is freed when its last transfer ends', () => {
    const budget = new MemoryBudget(1 << 20);
    const encoders = new SharedEncoders(OBJECT, budget);
    const { codec, counts } = countingCodec();
    encoders.lease(codec, LAYOUT).free();
    expect(counts).toEqual({ built: 1, freed: 1 });
    expect(budget.used).toBe(0);
  });

  test('the budget takes parked encoders back, oldest first, when a charge would not fit', () => {
    const budget = new MemoryBudget(3 * E);
    const pool = new IdleEncoders(budget, 1 << 20);
    const { codec, counts } = countingCodec();
    const objects = [0, 1].map(() => {
      const e = new SharedEncoders(OBJECT, budget);
      e.keepIdleIn(pool);
      return e;
    });
    objects[0].lease(codec, LAYOUT).free();
    objects[1].lease(codec, LAYOUT).free();
    expect(budget.used).toBe(2 * E);
    // Another use of the budget needs two objects' worth: the oldest parked encoder goes.
    expect(budget.tryTake(2 * E)).toBe(true);
    expect(counts.freed).toBe(1);
    expect(pool.count).toBe(1);
    // More than the parked encoders can give back: refused, and everything parked is gone.
    expect(budget.tryTake(2 * E)).toBe(false);
    expect(pool.count).toBe(0);
    expect(budget.used).toBe(2 * E);
    // The freed object's next transfer builds a new encoder.
    budget.give(2 * E);
    objects[0].lease(codec, LAYOUT).free();
    expect(counts.built).toBe(3);
  });

  test('at most maxBytes stay parked: the oldest is freed first', () => {
    const budget = new MemoryBudget(1 << 20);
    const pool = new IdleEncoders(budget, 2 * E);
    const { codec, counts } = countingCodec();
    for (let i = 0; i < 3; i++) {
      const e = new SharedEncoders(OBJECT, budget);
      e.keepIdleIn(pool);
      e.lease(codec, LAYOUT).free();
    }
    expect(pool.count).toBe(2);
    expect(pool.bytes).toBe(2 * E);
    expect(counts.freed).toBe(1);
    expect(budget.used).toBe(2 * E);
  });

  test('an object that leaves the cache frees its parked encoders; leased ones live on', () => {
    const { budget, pool, encoders, codec, counts } = oneParked();
    const other = new Layout('rlnc', OBJECT.length, 32, 8);
    const busy = encoders.lease(codec, other);
    encoders.keepIdleIn(undefined);
    expect(counts.freed).toBe(1);
    expect(pool.count).toBe(0);
    expect(budget.used).toBe(E);
    busy.free();
    expect(counts.freed).toBe(2);
    expect(budget.used).toBe(0);
  });

  test('a budget takes one reclaimer', () => {
    const budget = new MemoryBudget(1024);
    new IdleEncoders(budget, 1024);
    expect(() => new IdleEncoders(budget, 1024)).toThrow(/already has a reclaimer/);
  });
});
