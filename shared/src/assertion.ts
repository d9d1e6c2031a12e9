/**
 * What a source's signed META asserts, as the bytes its signature covers. A proxy signs, with the
 * Ed25519 key whose public half origo publishes for it, that for this URL and range the object
 * it holds has this identity (length, SHA-256, unit root, layout, Content-Type, place in the
 * resource) and came from the origin at `fetchedAt` with this validator. The statement names the
 * proxy and the request, not the transfer, so it means the same to anyone who checks it: a client
 * that sees two sources disagree holds evidence a third party (origo, against the origin) can
 * judge, instead of two unsigned claims of which only one is true.
 */
import { ed25519 } from '@noble/curves/ed25519';
import { Sha256, unitDigests, unitRoot } from './integrity';
import { Layout } from './layout';
import { DEFAULT_SYMBOL_SIZE } from './limits';
import { DEFAULT_GENERATION_SIZE } from './modes';
import { ByteRange, ObjectAttributes } from './range';
import {
  encodeFetching,
  encodeMeta,
  FetchingMessage,
  HEADER_BYTES,
  MetaMessage,
  MetaSignature,
  SIGNATURE_BYTES,
} from './wire';

const DOMAIN = new TextEncoder().encode('MUTP META assertion 1\0');
const FETCHING_DOMAIN = new TextEncoder().encode('MUTP FETCHING assertion 1\0');
const ZERO_SIGNATURE = new Uint8Array(SIGNATURE_BYTES);

/** The request a META answers, as the statement names it. */
export interface AssertedRequest {
  url: string;
  range?: ByteRange;
}

/** What a source signs into its META (the fields of MetaSignature but the signature). */
export type AssertionProvenance = Omit<MetaSignature, 'signature'>;

/**
 * The bytes a source signs: a domain tag, the proxy id, the URL and range asked for, and the META
 * as encoded with the signature zeroed (every field, the validator and fetchedAt included).
 */
export function assertionMessage(
  meta: Omit<MetaMessage, 'type' | 'transferId' | 'signed'>,
  provenance: AssertionProvenance,
  request: AssertedRequest,
  proxyId: string,
): Uint8Array {
  const body = encodeMeta({ ...meta, transferId: 0, signed: { ...provenance, signature: ZERO_SIGNATURE } }).subarray(
    HEADER_BYTES,
  );
  return statement(DOMAIN, body, request, proxyId);
}

/**
 * The bytes a source signs into a FETCHING: its own domain tag (a FETCHING signature can never
 * pass for a META's), the proxy id, the URL and range asked for, and the FETCHING from offset 6
 * with the signature zeroed. "For this request I am getting the object from the origin and will
 * answer within answerWithinMs", checkable against the key origo publishes for the proxy.
 */
export function fetchingAssertionMessage(
  answerWithinMs: number,
  request: AssertedRequest,
  proxyId: string,
): Uint8Array {
  const body = encodeFetching({ transferId: 0, answerWithinMs, signature: ZERO_SIGNATURE }).subarray(HEADER_BYTES);
  return statement(FETCHING_DOMAIN, body, request, proxyId);
}

/** A domain tag, the proxy id (u8 length), the URL (u16 length) and range (u8 1/0, u48, u32), the body. */
function statement(domain: Uint8Array, body: Uint8Array, request: AssertedRequest, proxyId: string): Uint8Array {
  const id = new TextEncoder().encode(proxyId);
  const url = new TextEncoder().encode(request.url);
  if (id.length > 255) throw new RangeError('proxy id longer than 255 bytes');
  if (url.length > 0xffff) throw new RangeError('URL longer than 65535 bytes');
  const out = new Uint8Array(domain.length + 1 + id.length + 2 + url.length + 11 + body.length);
  const v = new DataView(out.buffer);
  let at = 0;
  out.set(domain, at);
  at += domain.length;
  out[at++] = id.length;
  out.set(id, at);
  at += id.length;
  v.setUint16(at, url.length);
  at += 2;
  out.set(url, at);
  at += url.length;
  const range = request.range;
  out[at] = range ? 1 : 0;
  v.setUint16(at + 1, Math.floor((range?.start ?? 0) / 2 ** 32));
  v.setUint32(at + 3, (range?.start ?? 0) >>> 0);
  v.setUint32(at + 7, range?.length ?? 0);
  at += 11;
  out.set(body, at);
  return out;
}

/**
 * The layout an HTTP answer's signed META names (its unit root is over these check units): the
 * default uncoded one, whose unit digests a proxy's cache already holds for uncoded transfers of
 * the same object. An HTTP client checks the whole body against the digest; the layout only makes
 * the statement a META like any other, which origo judges the same way (`conflict`).
 */
export const HTTP_ASSERTION_LAYOUT = {
  mode: 'uncoded',
  symbolSize: DEFAULT_SYMBOL_SIZE,
  generationSize: DEFAULT_GENERATION_SIZE,
} as const;

/** What a `/v1/http` answer asserts: the bytes it sends, as its headers describe them. */
export interface AnsweredObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes. */
  digest: Uint8Array;
  /** The Content-Type it answers with and, for a ranged request, where the bytes sit. */
  attributes: ObjectAttributes;
  provenance?: AssertionProvenance;
  /** The unit digests under a layout, when the caller keeps them (a cache entry's LayoutDigests). */
  unitDigests?: (layout: Layout) => Uint8Array;
}

/**
 * A proxy's signed statement about an HTTP answer (`x-mutp-meta`), encoded as a META datagram
 * (transfer id 0): the same assertion a coded transfer's META makes, so a client holding two that
 * disagree hands origo evidence it already knows how to judge. Costs one Ed25519 signature, and
 * the unit digests when the caller does not hold them (one more pass over the bytes).
 */
export function signHttpAnswer(
  object: AnsweredObject,
  request: AssertedRequest,
  /** The proxy's key (a MetaSigner: named structurally, as sender/options.ts imports this file). */
  signer: { readonly proxyId: string; sign(message: Uint8Array): Uint8Array },
  sha256?: Sha256,
): Uint8Array {
  const { mode, symbolSize, generationSize } = HTTP_ASSERTION_LAYOUT;
  const layout = new Layout(mode, object.bytes.length, symbolSize, generationSize);
  const digests = object.unitDigests?.(layout) ?? unitDigests(object.bytes, layout, sha256);
  const identity = {
    objectLength: object.bytes.length,
    symbolSize,
    generationSize,
    mode,
    digest: object.digest,
    unitRoot: unitRoot(digests, sha256),
    attributes: object.attributes,
  };
  const provenance = object.provenance ?? { fetchedAt: 0 };
  const signature = signer.sign(assertionMessage(identity, provenance, request, signer.proxyId));
  return encodeMeta({ transferId: 0, ...identity, signed: { ...provenance, signature } });
}

/** Ed25519 verification (hosts may pass a native one: node:crypto is 20 times faster). */
export type VerifySignature = (signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array) => boolean;

/** Portable Ed25519 verification (@noble/curves). */
export const verifyEd25519: VerifySignature = (signature, message, publicKey) =>
  ed25519.verify(signature, message, publicKey);

/** Whether `meta` carries a signature by `publicKey` (32 bytes) over what it asserts. */
export function verifyMeta(
  meta: MetaMessage,
  request: AssertedRequest,
  proxyId: string,
  publicKey: Uint8Array,
  verify: VerifySignature = verifyEd25519,
): boolean {
  const signed = meta.signed;
  if (!signed || publicKey.length !== 32) return false;
  try {
    const { signature, ...provenance } = signed;
    return verify(signature, assertionMessage(meta, provenance, request, proxyId), publicKey);
  } catch {
    // Malformed keys or points are a failed verification, never an exception for the caller.
    return false;
  }
}

/** Whether `m` carries a signature by `publicKey` (32 bytes) over its statement for `request`. */
export function verifyFetching(
  m: FetchingMessage,
  request: AssertedRequest,
  proxyId: string,
  publicKey: Uint8Array,
  verify: VerifySignature = verifyEd25519,
): boolean {
  if (!m.signature || publicKey.length !== 32) return false;
  try {
    return verify(m.signature, fetchingAssertionMessage(m.answerWithinMs, request, proxyId), publicKey);
  } catch {
    return false;
  }
}

/** An assertion key as origo hands it out (base64url, 32 raw bytes), or undefined if malformed. */
export function decodeAssertionKey(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined;
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/') + '=';
  const raw = atob(b64);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out.length === 32 ? out : undefined;
}
