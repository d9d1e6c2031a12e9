/**
 * What the proxy's cache may do with an origin response, from its Cache-Control (RFC 9111 as it
 * applies to a shared cache that never revalidates): `no-store`, `private` and `no-cache` keep
 * the object out of the cache (it is served to the transfers waiting for it, then dropped);
 * `s-maxage`, else `max-age`, bounds how long it is kept. Without Cache-Control the object is
 * kept until the LRU evicts it (the proxy caches video segments, which do not change).
 */
export interface CachePolicy {
  store: boolean;
  /** Lifetime in the cache; undefined: until evicted. */
  ttlMs?: number;
}

const NO_STORE = new Set(['no-store', 'private', 'no-cache']);

export function cachePolicy(cacheControl: string | undefined): CachePolicy {
  if (!cacheControl) return { store: true };
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
  if (seconds === undefined) return { store: true };
  if (seconds === 0) return { store: false };
  return { store: true, ttlMs: seconds * 1000 };
}
