/**
 * decode() on mutated messages of every type, the fountain ones included (fuzz.test.ts mutates
 * the uncoded and rlnc messages): it never throws, refuses with a WireError, and what it accepts
 * re-encodes to exactly its bytes, with byte fields that are views into the datagram.
 */
import fc from 'fast-check';
import {
  decode,
  encode,
  encodeDataFountain,
  encodeFeedbackFountain,
  MAX_DATAGRAM_BYTES,
  MessageType,
  WireError,
} from '../src/internal';

const u32 = fc.oneof(fc.nat(), fc.constantFrom(0, 1, 0x7fffffff, 0xffffffff));
const common = {
  transferId: u32,
  metaKnown: fc.boolean(),
  complete: fc.boolean(),
  largestSeq: u32,
  ackDelay: fc.nat(0xffff),
  ackBits: u32,
  rateBps: u32,
  inFlightCap: u32,
  weights: fc.uint8Array({ minLength: 1, maxLength: 32 }),
  wMin: u32,
};
const fountainMessage = fc.oneof(
  fc
    .record({
      transferId: u32,
      seq: u32,
      block: u32,
      blockId: u32,
      payload: fc.uint8Array({ minLength: 1, maxLength: 1200 }),
    })
    .map((m) => encodeDataFountain(m)),
  fc
    .record({ ...common, missing: fc.array(fc.nat(0xffff), { maxLength: 120 }) })
    .map((m) => encodeFeedbackFountain({ ...m, missing: Uint16Array.from(m.missing) })),
);

const edit = fc.oneof(
  fc.record({ at: fc.nat(), value: fc.nat(255) }).map(({ at, value }) => (b: Uint8Array) => {
    const c = b.slice();
    if (c.length) c[at % c.length] = value;
    return c;
  }),
  fc.nat().map((cut) => (b: Uint8Array) => b.slice(0, cut % (b.length + 1))),
  fc.uint8Array({ minLength: 1, maxLength: 8 }).map((tail) => (b: Uint8Array) => Uint8Array.from([...b, ...tail])),
  fc.record({ at: fc.nat(), bit: fc.nat(7) }).map(({ at, bit }) => (b: Uint8Array) => {
    const c = b.slice();
    if (c.length) c[at % c.length] ^= 1 << bit;
    return c;
  }),
);

test('fountain messages round-trip, and mutated ones decode canonically or fail with a WireError', () => {
  let accepted = 0;
  fc.assert(
    fc.property(fountainMessage, fc.array(edit, { maxLength: 3 }), fc.nat(7), (bytes, edits, offset) => {
      const input = edits.reduce((b, f) => f(b), bytes);
      if (input.length > MAX_DATAGRAM_BYTES) return;
      // At an odd offset of a larger buffer, as a datagram inside a receive buffer.
      const buffer = new Uint8Array(input.length + offset + 2).fill(0xee);
      buffer.set(input, offset);
      const view = buffer.subarray(offset, offset + input.length);
      const result = decode(view);
      if (edits.length === 0) expect(result.ok).toBe(true);
      if (!result.ok) {
        expect(result.error).toBeInstanceOf(WireError);
        return;
      }
      accepted++;
      expect([MessageType.DataFountain, MessageType.FeedbackFountain, ...Object.values(MessageType)]).toContain(
        result.value.type,
      );
      expect(Buffer.from(encode(result.value)).equals(Buffer.from(input))).toBe(true);
      for (const v of Object.values(result.value)) {
        if (v instanceof Uint8Array) expect(v.buffer).toBe(buffer.buffer);
      }
    }),
    { seed: 3, numRuns: 3000 },
  );
  // The edits must leave many datagrams decodable, or the test says little about deep fields.
  expect(accepted).toBeGreaterThan(1000);
});
