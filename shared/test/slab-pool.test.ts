/**
 * Kept packets' slabs (slab-pool.ts) are shared by every checked decoder of the process: a
 * download that ends gives its slabs back, and the next one takes them instead of allocating
 * (issue 33: a fountain unit keeps its whole source block, more than a pool per download held).
 */
import { createHash } from 'node:crypto';
import { Layout, rlncCodec, seededRandom, unitDigests } from '../src/internal';
import { CheckedDecoder } from '../src/receiver/check-units';
import { SLAB_BYTES, SlabPool } from '../src/receiver/slab-pool';

const sha256 = (data: Uint8Array) => new Uint8Array(createHash('sha256').update(data).digest());
const symbolSize = 1024;
const generationSize = 32;
/** Three generations of 32 KiB: each unit's log fills two slabs. */
const object = Uint8Array.from({ length: 3 * generationSize * symbolSize }, (_, i) => (i * 13 + 5) & 0xff);
const layout = new Layout('rlnc', object.length, symbolSize, generationSize);

/** Feeds `count` coded packets of generation `unit`. */
function feed(decoder: CheckedDecoder, unit: number, count: number, seed: number): void {
  const encoder = rlncCodec.createEncoder(object, layout);
  const random = seededRandom(seed);
  const payload = new Uint8Array(symbolSize);
  for (let i = 0; i < count; i++) {
    const key = random();
    encoder.encodeInto(unit, key, payload);
    decoder.add(0, unit, key, payload);
  }
  encoder.free();
}

test('SlabPool: slabs given back are taken again, up to its bound; larger requests get their own', () => {
  const pool = new SlabPool(2);
  const a = pool.take();
  const b = pool.take();
  const c = pool.take();
  pool.give([a, b, c]);
  expect(pool.size).toBe(2);
  const again = [pool.take(), pool.take()];
  expect(again).toContain(a);
  expect(again).toContain(b);
  expect(pool.size).toBe(0);
  const big = pool.take(SLAB_BYTES + 1);
  expect(big.length).toBe(SLAB_BYTES + 1);
  pool.give([big]);
  expect(pool.size).toBe(0);
});

test("a download's unfinished units give their slabs back when it ends; the next download takes them", () => {
  const pool = new SlabPool();
  const digests = unitDigests(object, layout, sha256);
  const first = new CheckedDecoder(layout, rlncCodec, digests, sha256, 1 << 20, true, pool);
  // Part of two generations: their logs hold slabs until the download ends.
  feed(first, 0, 20, 1);
  feed(first, 1, 20, 2);
  expect(pool.size).toBe(0);
  first.free();
  const returned = pool.size;
  expect(returned).toBe(4); // 20 KiB of each unit's log: two slabs each

  const second = new CheckedDecoder(layout, rlncCodec, digests, sha256, 1 << 20, true, pool);
  feed(second, 2, 20, 3);
  expect(pool.size).toBe(returned - 2);
  // The unit verifies once complete, and its slabs go back.
  feed(second, 2, generationSize, 4);
  expect(second.isVerified(2)).toBe(true);
  expect(pool.size).toBe(returned);
  second.free();
});
