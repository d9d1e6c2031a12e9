/**
 * What a page's request asks for, before any download: whether it is one the downloader serves,
 * and how its Range is fetched through MUTP (see downloader.ts, "Byte ranges").
 */
import type { ByteRange } from '@mutp/shared';
import type { GetRequest } from '../common/messages';
import { ByteRangeSpec, formatRange } from '../common/media';
import { DOWNLOAD_MODES } from '../common/settings';

/** How a page's Range request is fetched through MUTP. */
export type RangePlan =
  /** A ranged transfer; `open`: the page asked to the end without the length being known. */
  | { kind: 'ranged'; range: ByteRange; open: boolean }
  /** The whole object, sliced (a suffix range of a file of unknown length). */
  | { kind: 'whole' }
  | { kind: 'unsatisfiable'; message: string }
  | { kind: 'too-large'; message: string };

/** Largest last byte a range may name (the protocol's offsets are 48-bit). */
const MAX_RANGE_END = 2 ** 48 - 1;

export function validRequest(req: GetRequest): boolean {
  if (typeof req.url !== 'string' || req.url.length > 8192 || !/^https?:\/\//i.test(req.url)) return false;
  if (!DOWNLOAD_MODES.includes(req.mode)) return false;
  if (!Number.isInteger(req.proxies) || req.proxies < 1 || req.proxies > 32) return false;
  if (req.range) {
    const r = req.range;
    const ok =
      (r.kind === 'from' &&
        Number.isSafeInteger(r.start) &&
        r.start >= 0 &&
        (r.end === undefined || r.end >= r.start)) ||
      (r.kind === 'suffix' && Number.isSafeInteger(r.length) && r.length >= 0);
    if (!ok) return false;
  }
  return true;
}

/**
 * How to fetch the page's range `spec`: from what it asked, the file's complete length when an
 * earlier answer told it, and the most one request may fetch (`max`).
 */
export function planRange(spec: ByteRangeSpec, complete: number | undefined, max: number): RangePlan {
  let start: number;
  let length: number;
  let open = false;
  if (spec.kind === 'suffix') {
    if (complete === undefined) return { kind: 'whole' };
    if (spec.length === 0 || complete === 0)
      return { kind: 'unsatisfiable', message: `${formatRange(spec)} of ${complete} bytes` };
    start = Math.max(0, complete - spec.length);
    length = complete - start;
  } else if (spec.end !== undefined) {
    start = spec.start;
    length = spec.end - spec.start + 1;
    if (complete !== undefined && start >= complete)
      return { kind: 'unsatisfiable', message: `${formatRange(spec)} of ${complete} bytes` };
  } else if (complete !== undefined) {
    start = spec.start;
    length = complete - spec.start;
    if (length <= 0) return { kind: 'unsatisfiable', message: `${formatRange(spec)} of ${complete} bytes` };
  } else {
    start = spec.start;
    length = max;
    open = true;
  }
  if (length > max) return { kind: 'too-large', message: `a range of ${length} bytes (at most ${max} per request)` };
  if (start + length - 1 > MAX_RANGE_END)
    return { kind: 'unsatisfiable', message: `${formatRange(spec)}: beyond 2^48 bytes` };
  return { kind: 'ranged', range: { start, length }, open };
}
