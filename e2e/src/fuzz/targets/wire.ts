/** The datagram decoder (`shared/src/wire.ts` decode): never throws, and what it accepts is canonical. */
import fc from 'fast-check';
import {
  decode,
  DIGEST_BYTES,
  encode,
  MAX_DIGESTS_PER_MESSAGE,
  MAX_ERROR_MESSAGE_BYTES,
  MAX_FEEDBACK_BLOCKS,
  MAX_FEEDBACK_GENERATIONS,
  MAX_SOURCES,
  MAX_SYMBOL_SIZE,
  Message,
  MessageType,
  MIN_SYMBOL_SIZE,
  UNIT_DIGEST_BYTES,
  WireError,
} from '@mutp/shared/internal';
import { FuzzTarget, invariant, mutated, rawBytes } from '../target';

const u32 = fc.oneof(
  fc.integer({ min: 0, max: 0xffffffff }),
  fc.constantFrom(0, 1, 0x7fffffff, 0xfffffffe, 0xffffffff),
);
const mode = fc.constantFrom('uncoded' as const, 'rlnc' as const, 'fountain' as const);
const bytesUpTo = (max: number) => fc.uint8Array({ minLength: 1, maxLength: max });

const feedbackCommon = {
  transferId: u32,
  metaKnown: fc.boolean(),
  complete: fc.boolean(),
  largestSeq: u32,
  ackDelay: fc.integer({ min: 0, max: 0xffff }),
  ackBits: u32,
  rateBps: u32,
  inFlightCap: u32,
  weights: fc.uint8Array({ minLength: 1, maxLength: MAX_SOURCES }),
  wMin: u32,
  rewind: fc.boolean(),
};

/** One valid message of every type, with fields over their whole ranges. */
export const validMessage: fc.Arbitrary<Message> = fc.oneof(
  fc
    .record({
      transferId: u32,
      mode,
      scheduler: fc.constantFrom('random' as const, 'rarest' as const, 'partitioned' as const),
      sourceCount: fc.integer({ min: 1, max: MAX_SOURCES }),
      sourceIndex: fc.nat(MAX_SOURCES - 1),
      window: fc.integer({ min: 1, max: 8192 }),
      generationSize: fc.integer({ min: 1, max: 255 }),
      symbolSize: fc.integer({ min: MIN_SYMBOL_SIZE, max: MAX_SYMBOL_SIZE }),
      url: fc.string({ maxLength: 300, unit: 'binary' }),
      range: fc.option(
        fc.record({ start: fc.integer({ min: 0, max: 2 ** 40 }), length: fc.integer({ min: 1, max: 2 ** 30 }) }),
        { nil: undefined },
      ),
      weights: fc.option(fc.uint8Array({ minLength: MAX_SOURCES, maxLength: MAX_SOURCES }), { nil: undefined }),
    })
    .map(({ range, weights, ...r }) => ({
      ...r,
      type: MessageType.Request,
      sourceIndex: r.sourceIndex % r.sourceCount,
      ...(range ? { range } : {}),
      ...(weights ? { weights: weights.subarray(0, r.sourceCount) } : {}),
    })),
  fc
    .record({
      transferId: u32,
      objectLength: fc.integer({ min: 0, max: 1 << 30 }),
      symbolSize: fc.integer({ min: MIN_SYMBOL_SIZE, max: MAX_SYMBOL_SIZE }),
      generationSize: fc.integer({ min: 1, max: 255 }),
      mode,
      digest: fc.uint8Array({ minLength: DIGEST_BYTES, maxLength: DIGEST_BYTES }),
      unitRoot: fc.uint8Array({ minLength: DIGEST_BYTES, maxLength: DIGEST_BYTES }),
    })
    .map((r) => ({ ...r, type: MessageType.Meta })),
  fc
    .record({
      transferId: u32,
      first: u32,
      count: fc.integer({ min: 1, max: MAX_DIGESTS_PER_MESSAGE }),
      seed: fc.uint8Array({ minLength: UNIT_DIGEST_BYTES, maxLength: UNIT_DIGEST_BYTES }),
    })
    .map(({ count, seed, ...r }) => ({
      ...r,
      type: MessageType.Digests,
      digests: Uint8Array.from({ length: count * UNIT_DIGEST_BYTES }, (_, i) => seed[i % UNIT_DIGEST_BYTES] ^ i),
    })),
  fc
    .record({ transferId: u32, seq: u32, index: u32, payload: bytesUpTo(1200) })
    .map((r) => ({ ...r, type: MessageType.DataUncoded })),
  fc
    .record({ transferId: u32, seq: u32, generation: u32, seed: u32, payload: bytesUpTo(1200) })
    .map((r) => ({ ...r, type: MessageType.DataRlnc })),
  fc
    .record({ transferId: u32, seq: u32, block: u32, blockId: u32, payload: bytesUpTo(1200) })
    .map((r) => ({ ...r, type: MessageType.DataFountain })),
  fc
    .record({ ...feedbackCommon, bitmap: bytesUpTo(64), bitCount: fc.nat(512) })
    .map((r) => ({ ...r, type: MessageType.FeedbackUncoded, bitCount: Math.min(r.bitCount, r.bitmap.length * 8) })),
  fc
    .record({ ...feedbackCommon, ranks: bytesUpTo(Math.min(MAX_FEEDBACK_GENERATIONS, 200)) })
    .map((r) => ({ ...r, type: MessageType.FeedbackRlnc })),
  fc
    .record({
      ...feedbackCommon,
      missing: fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: Math.min(MAX_FEEDBACK_BLOCKS, 100) }),
    })
    .map((r) => ({ ...r, type: MessageType.FeedbackFountain, missing: Uint16Array.from(r.missing) })),
  fc
    .record({ transferId: u32, reason: fc.constantFrom(0 as const, 1 as const, 2 as const) })
    .map((r) => ({ ...r, type: MessageType.Stop })),
  fc
    .record({
      transferId: u32,
      code: fc.integer({ min: 0, max: 0xffff }),
      message: fc.string({ maxLength: MAX_ERROR_MESSAGE_BYTES / 4 }),
    })
    .map((r) => ({ ...r, type: MessageType.Error })),
  fc
    .record({
      transferId: u32,
      answerWithinMs: u32,
      signature: fc.option(fc.uint8Array({ minLength: 64, maxLength: 64 }), { nil: undefined }),
    })
    .map(({ signature, ...r }) => ({ ...r, type: MessageType.Fetching, ...(signature ? { signature } : {}) })),
);

/** Encodes, or gives an empty datagram when the generated message is outside an encoder's range. */
/** The message's bytes, or none when a field is outside what the encoder writes. */
export function encodeOrEmpty(m: Message): Uint8Array {
  try {
    return encode(m);
  } catch (e) {
    if (e instanceof RangeError) return new Uint8Array(0);
    throw e;
  }
}

const KNOWN_TYPES = new Set<number>(Object.values(MessageType));

export const wireTarget: FuzzTarget<Uint8Array> = {
  name: 'wire',
  about: 'MUTP datagram decoder (shared/src/wire.ts decode)',
  inputs: fc.oneof(
    { weight: 2, arbitrary: rawBytes(1400) },
    { weight: 1, arbitrary: rawBytes(24) },
    { weight: 2, arbitrary: validMessage.map(encodeOrEmpty) },
    { weight: 5, arbitrary: mutated(validMessage.map(encodeOrEmpty)) },
  ),
  check(bytes) {
    const result = decode(bytes);
    if (!result.ok) {
      invariant(result.error instanceof WireError, `decode failed with ${String(result.error)}, not a WireError`);
      return;
    }
    invariant(KNOWN_TYPES.has(result.value.type), `decoded an unknown type ${result.value.type}`);
    // Accepted datagrams re-encode to exactly their bytes: nothing decodes that the encoders
    // would not write, and no two encodings mean the same message.
    const again = encode(result.value);
    invariant(Buffer.from(again).equals(Buffer.from(bytes)), 'an accepted datagram does not re-encode to its bytes');
  },
  bytes: (input) => input,
};
