/**
 * What one proxy's `/v1/http` answer states about the bytes it is about to send, and whether that
 * statement counts. A proxy whose assertion key origo published must sign it: `x-mutp-meta`
 * carries a META (assertion.ts `signHttpAnswer`) its key signed for this URL and range; without
 * one its answer counts neither for nor against the object (a man in the middle, or a proxy that
 * restarted with a new key, is left out, not believed and not blamed). A proxy without a known key
 * (a client without origo) states the digest alone, in `x-mutp-sha256`, as before.
 */
import { AssertedRequest, decodeAssertionKey, verifyEd25519, verifyMeta, VerifySignature } from '../assertion';
import { ObjectAttributes } from '../range';
import type { ProxyInfo } from '../signalling';
import { decode, MessageType, MetaMessage } from '../wire';

/** Hex SHA-256 as proxies state it. */
export const DIGEST_HEADER = 'x-mutp-sha256';
/** The signed META of the answer, base64. */
export const META_HEADER = 'x-mutp-meta';
/** A signed META is a few hundred bytes; anything longer is not decoded (bounded work per answer). */
const MAX_META_HEADER_CHARS = 2048;
const HEX_DIGEST = /^[0-9a-f]{64}$/;

export interface HttpStatement {
  /** The hex SHA-256 the body must hash to. */
  digest: string;
  /** The signed META as received (evidence for origo), when the proxy has a key. */
  meta?: Uint8Array;
  /** What the signed META says of the bytes (undefined: unsigned, the headers say it). */
  attributes?: ObjectAttributes;
}

type Headers = { get(name: string): string | null };

export function hex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b.toString(16).padStart(2, '0');
  return out;
}

/** The answer's statement, or why it does not count. */
export function statementOf(
  proxy: ProxyInfo,
  request: AssertedRequest,
  headers: Headers,
  verify: VerifySignature = verifyEd25519,
): HttpStatement | string {
  const stated = headers.get(DIGEST_HEADER)?.toLowerCase();
  const publicKey = proxy.assertionKey === undefined ? undefined : decodeAssertionKey(proxy.assertionKey);
  if (!publicKey) return stated && HEX_DIGEST.test(stated) ? { digest: stated } : `no ${DIGEST_HEADER} digest`;
  const meta = signedMeta(headers.get(META_HEADER));
  if (!meta || !verifyMeta(meta.message, request, proxy.proxyId, publicKey, verify))
    return 'its answer is not signed by the key origo published for it';
  const digest = hex(meta.message.digest);
  // Both headers are the proxy's own words: two that differ are its contradiction, not evidence.
  if (stated !== undefined && stated !== digest) return `${DIGEST_HEADER} is not the digest it signed`;
  return { digest, meta: meta.bytes, attributes: meta.message.attributes ?? {} };
}

function signedMeta(text: string | null): { bytes: Uint8Array; message: MetaMessage } | undefined {
  if (text === null || text.length > MAX_META_HEADER_CHARS) return undefined;
  let bytes: Uint8Array;
  try {
    bytes = Uint8Array.from(atob(text.trim()), (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
  const decoded = decode(bytes);
  if (!decoded.ok || decoded.value.type !== MessageType.Meta || !decoded.value.signed) return undefined;
  return { bytes, message: decoded.value };
}

/**
 * The signed statements of proxies that stated different digests, one per digest first (a caller
 * keeping the first few keeps both sides): what origo judges against the origin. Empty without two
 * signed sides.
 */
export function conflictEvidence(
  proxies: readonly ProxyInfo[],
  statements: readonly (HttpStatement | undefined)[],
): { proxyId: string; meta: Uint8Array }[] {
  const firsts: { proxyId: string; meta: Uint8Array }[] = [];
  const rest: { proxyId: string; meta: Uint8Array }[] = [];
  const digests = new Set<string>();
  statements.forEach((s, i) => {
    if (!s?.meta) return;
    const known = digests.has(s.digest);
    digests.add(s.digest);
    (known ? rest : firsts).push({ proxyId: proxies[i].proxyId, meta: s.meta });
  });
  return digests.size >= 2 ? [...firsts, ...rest] : [];
}
