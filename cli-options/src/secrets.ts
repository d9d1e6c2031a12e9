/**
 * Comparing a presented secret (a bearer token) with the one an option configured, for every
 * service that takes one (origo's admin and metrics tokens and proxy keys, the proxy's metrics
 * token): in constant time whatever the lengths. Both sides are hashed first, because
 * timingSafeEqual needs equal lengths, and a length check before it would tell the length.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export function secretsEqual(given: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(given), digest(expected));
}
