/**
 * Byte ranges of a resource, as a REQUEST names them and a META describes what was served, and
 * the origin attributes (Content-Type, where the bytes sit in the resource) that META carries so
 * the client answers the page from the origin's words, not from guesses. Pure values and checks:
 * the wire layout is in wire.ts, the rules in docs/protocol.md.
 */
import { MAX_OBJECT_BYTES } from './limits';

/** Largest offset a range may start at (and largest complete length): 2^48 - 1, 256 TiB. */
export const MAX_RANGE_OFFSET = 2 ** 48 - 1;
/** Longest Content-Type META carries (bytes of visible ASCII). */
export const MAX_CONTENT_TYPE_BYTES = 127;

/** Bytes start .. start + length - 1 of a resource (length >= 1). */
export interface ByteRange {
  start: number;
  length: number;
}

/** What the origin said about the bytes a transfer carries; part of the identity sources agree on. */
export interface ObjectAttributes {
  /** The origin's Content-Type, when it sent one that fits (see validContentType). */
  contentType?: string;
  /**
   * Present for a ranged transfer: the object is bytes start .. start + objectLength - 1 of a
   * resource of completeLength bytes (undefined: the origin did not say, `*` in Content-Range).
   */
  range?: { start: number; completeLength?: number };
}

/** Why `r` is not a range a REQUEST may name, or undefined when it is one. */
export function rangeProblem(r: ByteRange): string | undefined {
  if (!Number.isSafeInteger(r.start) || r.start < 0 || r.start > MAX_RANGE_OFFSET)
    return `range start ${r.start} is not in 0..${MAX_RANGE_OFFSET}`;
  if (!Number.isSafeInteger(r.length) || r.length < 1 || r.length > MAX_OBJECT_BYTES)
    return `range length ${r.length} is not in 1..${MAX_OBJECT_BYTES}`;
  if (r.start + r.length - 1 > MAX_RANGE_OFFSET) return 'range ends past the largest offset';
  return undefined;
}

/** Inclusive last byte of a range. */
export function rangeEnd(r: ByteRange): number {
  return r.start + r.length - 1;
}

/**
 * A Content-Type META may carry: visible ASCII (0x20..0x7e), at most MAX_CONTENT_TYPE_BYTES, no
 * CR/LF. Anything else is dropped by the proxy rather than passed on to a page.
 */
export function validContentType(value: string): boolean {
  return value.length > 0 && value.length <= MAX_CONTENT_TYPE_BYTES && /^[\x20-\x7e]+$/.test(value);
}

/**
 * Whether what a source served for `requested` is acceptable: it starts where asked, is no
 * longer than asked, and is shorter only where the resource ends (a known complete length).
 */
export function servedRangeProblem(
  requested: ByteRange,
  served: { start: number; completeLength?: number },
  objectLength: number,
): string | undefined {
  if (served.start !== requested.start) return `served from byte ${served.start}, asked from ${requested.start}`;
  if (objectLength > requested.length) return `served ${objectLength} bytes, asked for ${requested.length}`;
  if (objectLength < requested.length) {
    if (served.completeLength === undefined) return 'served fewer bytes than asked without a complete length';
    if (served.start + objectLength !== served.completeLength)
      return `served ${objectLength} bytes, short of the asked range before the end of the resource`;
  }
  if (served.completeLength !== undefined && served.start + objectLength > served.completeLength)
    return 'served bytes past the complete length';
  return undefined;
}
