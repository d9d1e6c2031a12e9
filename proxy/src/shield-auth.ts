/**
 * Who may ask a shield parent for objects: fleet proxies holding the fleet's shield key. A child
 * signs each request, `authorization: MUTP-Shield child=<name>, exp=<unix ms>, mac=<base64url>`,
 * the MAC an HMAC-SHA256 under the key over the child's name, the expiry and the request's
 * object (url, start, length). The parent accepts an expiry at most MAX_SHIELD_SKEW_MS ahead and
 * not past, so a captured header is good for that long and for that object only (a replay makes
 * the parent serve an object it serves anyway, within the child's budgets).
 *
 * A child that asks on behalf of another child (a tier in between) adds `via=<a>/<b>`, the
 * children the request came through before it, under the same MAC (shield-chain.ts: how a
 * parent refuses loops). Without `via` the MAC is the one of fleets before it existed.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ByteRange } from '@mutp/shared';

/** How far ahead a signed request may expire (and so how long a captured one stays usable). */
export const MAX_SHIELD_SKEW_MS = 60_000;
/** A fleet key shorter than this is refused at start-up (guessable). */
export const MIN_SHIELD_KEY_CHARS = 32;
/** Longest child name accepted (names are labels of budgets and metrics). */
export const MAX_CHILD_NAME_CHARS = 64;

const SCHEME = 'MUTP-Shield';
const CHILD_NAME = /^[A-Za-z0-9._-]{1,64}$/;

export interface ShieldRequest {
  url: string;
  range?: ByteRange;
  /** The children the request came through before the signing one, first asker first. */
  via?: readonly string[];
}

/** Most names in `via` a parent reads (a longer chain is refused anyway: shield-chain.ts). */
const MAX_VIA = 8;

function mac(key: string, child: string, expiresAt: number, request: ShieldRequest): Buffer {
  const range = request.range ? `${request.range.start}+${request.range.length}` : '-';
  const via = request.via?.length ? `\nvia ${request.via.join('/')}` : '';
  return createHmac('sha256', key)
    .update(`mutp-shield-v1\n${child}\n${expiresAt}\n${range}\n${request.url}${via}`)
    .digest();
}

/** The authorization header a child sends with `request`. */
export function signShieldRequest(key: string, child: string, request: ShieldRequest, now = Date.now()): string {
  const expiresAt = now + MAX_SHIELD_SKEW_MS / 2;
  const via = request.via?.length ? `via=${request.via.join('/')}, ` : '';
  return `${SCHEME} child=${child}, exp=${expiresAt}, ${via}mac=${mac(key, child, expiresAt, request).toString('base64url')}`;
}

export type ShieldAuth =
  { ok: true; child: string; via: string[] } | { ok: false; reason: 'missing' | 'malformed' | 'expired' | 'bad-mac' };

/** Checks a request's authorization header against the fleet key (constant-time on the MAC). */
export function verifyShieldRequest(
  key: string,
  header: string | undefined,
  request: ShieldRequest,
  now = Date.now(),
): ShieldAuth {
  if (header === undefined) return { ok: false, reason: 'missing' };
  if (header.length > 1024) return { ok: false, reason: 'malformed' };
  const m = /^MUTP-Shield child=([^,\s]+), exp=(\d{1,16}), (?:via=([^,\s]+), )?mac=([A-Za-z0-9_-]{43})$/.exec(header);
  if (!m || !CHILD_NAME.test(m[1])) return { ok: false, reason: 'malformed' };
  const [child, expiresAt] = [m[1], Number(m[2])];
  const via = m[3] === undefined ? [] : m[3].split('/');
  if (via.length > MAX_VIA || !via.every((name) => CHILD_NAME.test(name))) return { ok: false, reason: 'malformed' };
  if (expiresAt < now || expiresAt > now + MAX_SHIELD_SKEW_MS) return { ok: false, reason: 'expired' };
  const presented = Buffer.from(m[4], 'base64url');
  const expected = mac(key, child, expiresAt, { ...request, via });
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected))
    return { ok: false, reason: 'bad-mac' };
  return { ok: true, child, via };
}

/** A name usable as a child's label: the proxy's name when it fits, else a safe cut of it. */
export function childLabel(name: string): string {
  const cleaned = name.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, MAX_CHILD_NAME_CHARS);
  return cleaned.length > 0 ? cleaned : 'proxy';
}
