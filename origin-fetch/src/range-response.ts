/**
 * The HTTP side of a ranged origin fetch: the Range header the proxy sends, the Content-Range of
 * a 206 and whether it answers what was asked (RFC 9110 §14), and the requested part of a whole
 * body when the origin ignored Range. Pure functions; origin-fetch applies them to responses.
 */
import { ByteRange, rangeEnd } from '@mutp/shared';

/** What a 206 says it carries: bytes first..last of a resource of completeLength (undefined: `*`). */
export interface ContentRange {
  first: number;
  last: number;
  completeLength?: number;
}

/** `bytes=start-end` for the Range request header. */
export function rangeHeader(range: ByteRange): string {
  return `bytes=${range.start}-${rangeEnd(range)}`;
}

// Up to 16 digits: past 2^53 a number is not exact, and no range the proxy asks for gets there.
const CONTENT_RANGE = /^bytes (\d{1,16})-(\d{1,16})\/(\d{1,16}|\*)$/;

/** The Content-Range of a 206, or undefined when it is missing or not one satisfied byte range. */
export function parseContentRange(value: string | undefined): ContentRange | undefined {
  const match = CONTENT_RANGE.exec((value ?? '').trim());
  if (!match) return undefined;
  const first = Number(match[1]);
  const last = Number(match[2]);
  const completeLength = match[3] === '*' ? undefined : Number(match[3]);
  if (last < first) return undefined;
  if (completeLength !== undefined && last >= completeLength) return undefined;
  return { first, last, completeLength };
}

/**
 * Why a 206 for `requested` is not acceptable, or undefined: it must start where asked, end no
 * later than asked, and end earlier only at the end of a resource whose length it states.
 */
export function partialProblem(requested: ByteRange, served: ContentRange): string | undefined {
  const end = rangeEnd(requested);
  if (served.first !== requested.start) return `origin sent bytes from ${served.first}, asked from ${requested.start}`;
  if (served.last > end) return `origin sent bytes up to ${served.last}, asked up to ${end}`;
  if (served.last < end) {
    if (served.completeLength === undefined) return 'origin sent a short range without the complete length';
    if (served.last !== served.completeLength - 1) return 'origin sent a short range before the end of the resource';
  }
  return undefined;
}

/**
 * The requested part of the whole resource (the origin answered 200 to a Range request), short
 * at the end of the resource; undefined when the range starts at or past its end.
 */
export function sliceOfWhole(whole: Uint8Array, requested: ByteRange): Uint8Array | undefined {
  if (requested.start >= whole.byteLength) return undefined;
  return whole.subarray(requested.start, Math.min(whole.byteLength, requested.start + requested.length));
}
