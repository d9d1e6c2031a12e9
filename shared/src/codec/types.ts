import { Layout } from '../layout';
import { Mode } from '../wire';

/** What a decoder made of one packet. */
export type AddResult = 'innovative' | 'redundant' | 'invalid';

/**
 * Encodes packets of one object. `key` identifies which packet of the unit: ignored by uncoded,
 * the coefficient seed for rlnc (and the block id for fountain codes).
 */
export interface UnitEncoder {
  readonly mode: Mode;
  /** Writes the payload of (unit, key) into out[0 .. layout.payloadLength(unit)). */
  encodeInto(unit: number, key: number, out: Uint8Array): void;
  /**
   * Fountain codes: whether block id `key` of `unit` can be encoded. A sender numbering block ids
   * upwards skips the ones that cannot (wirehair cannot use a few, see docs/protocol.md §8.4).
   */
  usableKey?(unit: number, key: number): boolean;
  /**
   * Does now what the first packet of `unit` would otherwise wait for (wirehair solves its code on
   * first use). Absent: the codec has nothing to prepare.
   */
  prepare?(unit: number): void;
  free(): void;
}

/** Collects packets of one object and reports progress in degrees of freedom. */
export interface UnitDecoder {
  readonly mode: Mode;
  add(unit: number, key: number, payload: Uint8Array): AddResult;
  rank(unit: number): number;
  isComplete(unit: number): boolean;
  /** The reassembled object; only valid once every unit is complete. */
  readObject(): Uint8Array;
  free(): void;
}

/** The plug-in point for codecs (the WebAssembly codecs implement the same interface). */
export interface Codec {
  readonly mode: Mode;
  readonly name: string;
  createEncoder(object: Uint8Array, layout: Layout): UnitEncoder;
  createDecoder(layout: Layout): UnitDecoder;
  /**
   * Bytes of codec state an encoder of an object of this length holds beyond the object itself
   * (copies in WebAssembly memory, code tables): what a source charges to its memory budget.
   * Absent: one copy of the object.
   */
  encoderBytes?(objectLength: number): number;
}
