/**
 * The frame's incremental SHA-256 (sha256.ts `create()`), which the core uses to hash an object
 * unit by unit as the units verify: it must give the one-shot digest of the concatenation, while
 * one-shot calls and other streams use the same hasher in between.
 */
import { createHash } from 'node:crypto';
import { loadSha256, Sha256 } from '../src/downloader/sha256';

let sha256: Sha256;
beforeAll(async () => {
  sha256 = await loadSha256();
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const reference = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const data = Uint8Array.from({ length: 50_000 }, (_, i) => (i * 2654435761) >>> 24);

test('a stream fed in pieces gives the digest of their concatenation', () => {
  for (const cuts of [[], [1], [63, 64, 65], [1000, 24_577, 24_578, 49_999]]) {
    const stream = sha256.create();
    let at = 0;
    for (const cut of [...cuts, data.length]) {
      stream.update(data.subarray(at, cut));
      at = cut;
    }
    expect(hex(stream.digest())).toBe(reference(data));
  }
});

test('one-shot calls and a second stream between updates do not disturb a stream', () => {
  const a = sha256.create();
  const b = sha256.create();
  a.update(data.subarray(0, 7000));
  expect(hex(sha256(data.subarray(0, 3)))).toBe(reference(data.subarray(0, 3)));
  b.update(data.subarray(100, 200));
  a.update(data.subarray(7000));
  expect(hex(sha256(data))).toBe(reference(data));
  expect(hex(a.digest())).toBe(reference(data));
  expect(hex(b.digest())).toBe(reference(data.subarray(100, 200)));
});

test('a stream is used once: update or digest after its digest throws', () => {
  const stream = sha256.create().update(data.subarray(0, 10));
  stream.digest();
  expect(() => stream.digest()).toThrow(/twice/);
  expect(() => stream.update(data)).toThrow(/after its digest/);
});

test('streams that take turns keep their own states (a stream started while another is open starts fresh)', () => {
  const streams = [sha256.create(), sha256.create(), sha256.create()];
  const pieces = [0, 1, 2].map((i) => data.subarray(i * 9000, i * 9000 + 9000));
  for (let round = 0; round < 3; round++) streams.forEach((s, i) => s.update(pieces[(i + round) % 3]));
  const expected = (i: number) => Buffer.concat([0, 1, 2].map((round) => pieces[(i + round) % 3]));
  streams.forEach((s, i) => expect(hex(s.digest())).toBe(reference(expected(i))));
  // After the others finished, a new stream starts from the initial state.
  expect(hex(sha256.create().update(pieces[0]).digest())).toBe(reference(pieces[0]));
});
