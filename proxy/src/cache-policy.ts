/**
 * What the proxy's cache may do with an origin response (RFC 9111 as it applies to a shared cache
 * that never revalidates): `no-store`, `private` and `no-cache` keep the object out of the cache
 * (it is served to the transfers waiting for it, then dropped); `s-maxage`, else `max-age`,
 * bounds how long it is kept; else `Expires` (against the response's `Date`); else, with a
 * `Last-Modified`, a tenth of the object's age (§4.2.2's heuristic), at least a minute (a live
 * segment written seconds ago must outlive the staging that fetched it ahead) and at most a day.
 * With none of these the object is kept until the LRU evicts it (the proxy caches video
 * segments, which do not change). A stale copy matters more than it used to: sources that disagree fail a download
 * (issue 31), so a proxy must not hold a changed object's old version for ever.
 */
export interface CachePolicy {
  store: boolean;
  /** Lifetime in the cache; undefined: until evicted. */
  ttlMs?: number;
}

const NO_STORE = new Set(['no-store', 'private', 'no-cache']);

/** The response headers freshness is read from (dates as HTTP sends them). */
export interface Freshness {
  cacheControl?: string;
  expires?: string;
  date?: string;
  lastModified?: string;
}

/** The lifetimes the Last-Modified heuristic gives lie between these. */
export const MIN_HEURISTIC_TTL_MS = 60_000;
export const MAX_HEURISTIC_TTL_MS = 24 * 3600_000;

export function cachePolicy(headers: Freshness | string | undefined, now = Date.now()): CachePolicy {
  const h: Freshness = typeof headers === 'string' ? { cacheControl: headers } : (headers ?? {});
  const explicit = cacheControlPolicy(h.cacheControl);
  if (explicit !== undefined) return explicit;
  const date = parseDate(h.date) ?? now;
  if (h.expires !== undefined) {
    // An Expires that does not parse (e.g. "0") means already expired (§5.3).
    const expires = parseDate(h.expires);
    const ttlMs = expires === undefined ? 0 : expires - date;
    return ttlMs > 0 ? { store: true, ttlMs } : { store: false };
  }
  const lastModified = parseDate(h.lastModified);
  if (lastModified === undefined) return { store: true };
  const tenth = Math.floor(Math.max(0, date - lastModified) / 10);
  return { store: true, ttlMs: Math.min(MAX_HEURISTIC_TTL_MS, Math.max(MIN_HEURISTIC_TTL_MS, tenth)) };
}

function parseDate(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const t = Date.parse(value);
  return Number.isFinite(t) ? t : undefined;
}

/** From Cache-Control alone; undefined when it says nothing about freshness. */
function cacheControlPolicy(cacheControl: string | undefined): CachePolicy | undefined {
  if (!cacheControl) return undefined;
  let maxAge: number | undefined;
  let sharedMaxAge: number | undefined;
  for (const part of cacheControl.toLowerCase().split(',')) {
    const [name, rawValue] = part.trim().split('=', 2);
    if (NO_STORE.has(name)) return { store: false };
    const value = rawValue === undefined ? NaN : Number(rawValue.replace(/^"|"$/g, ''));
    if (!Number.isInteger(value) || value < 0) continue;
    if (name === 's-maxage') sharedMaxAge = value;
    else if (name === 'max-age') maxAge = value;
  }
  const seconds = sharedMaxAge ?? maxAge;
  if (seconds === undefined) return undefined;
  if (seconds === 0) return { store: false };
  return { store: true, ttlMs: seconds * 1000 };
}
