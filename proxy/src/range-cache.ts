/**
 * The cache's view of byte ranges: the key of an entry, where a range sits inside the bytes an
 * entry holds, and whether two responses are of the same version of a resource. Pure functions
 * used by object-cache.
 */
import { ByteRange } from '@mutp/shared';

/** Where an entry's bytes sit in the resource; completeLength undefined: the origin did not say. */
export interface ResourceExtent {
  start: number;
  completeLength?: number;
}

/** The origin's validators of the version an entry holds. */
export interface Validators {
  etag?: string;
  lastModified?: string;
}

/** The cache key: the href alone for the whole object, else the href and the range. */
export function rangeKey(href: string, range: ByteRange | undefined): string {
  // A space never occurs in a normalised href (URL encodes it), so keys cannot collide.
  return range ? `${href} bytes=${range.start}+${range.length}` : href;
}

/**
 * Where `range` sits in `length` bytes placed at `extent`: the part to serve (shorter than asked
 * only where the resource ends), 'past-end' when the range starts at or past the known end of
 * the resource, undefined when these bytes do not hold it.
 */
export function locateRange(
  extent: ResourceExtent,
  length: number,
  range: ByteRange,
): { offset: number; length: number } | 'past-end' | undefined {
  const { start, completeLength } = extent;
  if (completeLength !== undefined && range.start >= completeLength) return 'past-end';
  const end = start + length; // exclusive
  if (range.start < start || range.start >= end) return undefined;
  const wanted = range.start + range.length;
  if (wanted <= end) return { offset: range.start - start, length: range.length };
  // Asked past the end of the resource: the part up to its end is the answer (as from the origin).
  if (completeLength !== undefined && end === completeLength)
    return { offset: range.start - start, length: end - range.start };
  return undefined;
}

/**
 * Whether two responses are of the same version: equal ETags when either has one, else equal
 * Last-Modified (neither having any: nothing tells them apart, taken as the same).
 */
export function sameVersion(a: Validators, b: Validators): boolean {
  if (a.etag !== undefined || b.etag !== undefined) return a.etag === b.etag;
  return a.lastModified === b.lastModified;
}
