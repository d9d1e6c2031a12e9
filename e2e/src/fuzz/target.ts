/**
 * What `npm run fuzz` runs: one target per parser. A target draws inputs from a fast-check
 * arbitrary that mixes near-valid inputs (valid messages with a field mutated, truncated,
 * extended) with raw random bytes, and checks one input: it returns normally when the parser
 * accepted it or refused it with its documented error, and throws otherwise (a crash).
 */
import fc from 'fast-check';
import { seededRandom } from '@mutp/shared';

export interface FuzzTarget<Input> {
  readonly name: string;
  /** One sentence for `--help` and the summary. */
  readonly about: string;
  readonly inputs: fc.Arbitrary<Input>;
  /** Loads what the parser needs (WebAssembly modules); called once per worker. */
  setup?(): Promise<void>;
  /**
   * Runs the parser on one input. Throws on a crash: an exception other than the documented
   * error result or class, or a broken invariant (a private address allowed, a later honest
   * decode corrupted, memory not returned).
   */
  check(input: Input): void;
  /** The input as bytes for the report (what the parser saw, or its JSON when it is structured). */
  bytes(input: Input): Uint8Array;
}

/** A broken invariant found by a target's own check (as opposed to an exception from the parser). */
export class InvariantError extends Error {
  override readonly name = 'InvariantError';
}

export function invariant(condition: unknown, message: string): asserts condition {
  if (!condition) throw new InvariantError(message);
}

export const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

/** JSON of a structured input, with byte arrays as hex, for the report. */
export function jsonBytes(input: unknown): Uint8Array {
  return utf8(
    JSON.stringify(input, (_key, value: unknown) =>
      value instanceof Uint8Array ? `hex:${Buffer.from(value).toString('hex')}` : value,
    ),
  );
}

/**
 * Raw random bytes, up to `maxLength`. Drawn from a seed by a small PRNG rather than byte by
 * byte through fast-check, which would dominate the run time for kilobyte inputs.
 */
export function rawBytes(maxLength: number): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(fc.integer({ min: 0, max: maxLength }), fc.integer({ min: 0, max: 0xffffffff }), fc.nat(3))
    .map(([length, seed, flavour]) => {
      const random = seededRandom(seed);
      const out = new Uint8Array(length);
      for (let i = 0; i < length; i++) {
        const r = random();
        // Mostly uniform bytes; some inputs from a small alphabet, which more often looks like
        // structure (runs of zeros, repeated length fields).
        out[i] = flavour === 0 ? r & 0x03 : flavour === 1 ? (r & 1 ? 0xff : 0) : r & 0xff;
      }
      return out;
    });
}

export type Mutation =
  | { op: 'flip'; pos: number; bit: number }
  | { op: 'set'; pos: number; value: number }
  | { op: 'truncate'; len: number }
  | { op: 'extend'; bytes: Uint8Array }
  | { op: 'insert'; pos: number; value: number }
  | { op: 'delete'; pos: number }
  | { op: 'duplicate'; pos: number; len: number };

const position = fc.nat(1 << 16);
const byteValue = fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0, 1, 0x7f, 0x80, 0xfe, 0xff));

export const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), pos: position, bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant('set' as const), pos: position, value: byteValue }),
  fc.record({ op: fc.constant('truncate' as const), len: position }),
  fc.record({ op: fc.constant('extend' as const), bytes: rawBytes(64) }),
  fc.record({ op: fc.constant('insert' as const), pos: position, value: byteValue }),
  fc.record({ op: fc.constant('delete' as const), pos: position }),
  fc.record({ op: fc.constant('duplicate' as const), pos: position, len: fc.integer({ min: 1, max: 64 }) }),
);

/** Applies byte-level mutations to a copy of `base`. */
export function mutateBytes(base: Uint8Array, mutations: readonly Mutation[]): Uint8Array {
  let b = Array.from(base);
  for (const m of mutations) {
    const at = (pos: number) => (b.length === 0 ? 0 : pos % b.length);
    switch (m.op) {
      case 'flip':
        if (b.length) b[at(m.pos)] ^= 1 << m.bit;
        break;
      case 'set':
        if (b.length) b[at(m.pos)] = m.value;
        break;
      case 'truncate':
        b = b.slice(0, m.len % (b.length + 1));
        break;
      case 'extend':
        b = b.concat(Array.from(m.bytes));
        break;
      case 'insert':
        b.splice(m.pos % (b.length + 1), 0, m.value);
        break;
      case 'delete':
        if (b.length) b.splice(at(m.pos), 1);
        break;
      case 'duplicate': {
        const start = at(m.pos);
        b.splice(start, 0, ...b.slice(start, start + m.len));
        break;
      }
    }
  }
  return Uint8Array.from(b);
}

/** `base` with 1..4 byte-level mutations. */
export function mutated(base: fc.Arbitrary<Uint8Array>): fc.Arbitrary<Uint8Array> {
  return fc
    .tuple(base, fc.array(mutationArb, { minLength: 1, maxLength: 4 }))
    .map(([bytes, ms]) => mutateBytes(bytes, ms));
}

/** Text mutations of `base`: the same byte-level edits on its UTF-8, decoded leniently. */
export function mutatedText(base: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return mutated(base.map(utf8)).map((bytes) => new TextDecoder().decode(bytes));
}
