/**
 * Signed METAs (issue 31, evidence): what a proxy's signature covers, and that a META counts
 * toward agreement only when the key origo published for its source signed it.
 */
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import {
  assertionMessage,
  decode,
  decodeAssertionKey,
  encodeMeta,
  HTTP_ASSERTION_LAYOUT,
  Layout,
  MessageType,
  MetaMessage,
  MetaSigner,
  signHttpAnswer,
  unitDigests,
  unitRoot,
  verifyEd25519,
  verifyMeta,
} from '../src/internal';
import { MetaSignatures } from '../src/receiver/meta-signatures';

const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());

function keyPair(): { signer: (proxyId: string) => MetaSigner; publicKey: Uint8Array; text: string } {
  const pair = generateKeyPairSync('ed25519');
  const text = pair.publicKey.export({ format: 'jwk' }).x as string;
  return {
    signer: (proxyId) => ({ proxyId, sign: (m) => new Uint8Array(sign(null, m, pair.privateKey)) }),
    publicKey: decodeAssertionKey(text)!,
    text,
  };
}

const identity = {
  objectLength: 3,
  symbolSize: 1120,
  generationSize: 24,
  mode: 'rlnc' as const,
  digest: sha256(new TextEncoder().encode('abc')),
  unitRoot: sha256(new Uint8Array(16)),
  attributes: { contentType: 'video/mp2t' },
};
const request = { url: 'https://origin.example/seg-1.ts', range: { start: 100, length: 3 } };
const provenance = { fetchedAt: 1_764_201_600_000, validator: { kind: 'etag' as const, value: '"v1"' } };

function signedMeta(signer: MetaSigner, overrides: Partial<MetaMessage> = {}): MetaMessage {
  const signature = signer.sign(assertionMessage(identity, provenance, request, signer.proxyId));
  const bytes = encodeMeta({ transferId: 7, ...identity, signed: { ...provenance, signature }, ...overrides });
  const m = decode(bytes);
  if (!m.ok || m.value.type !== MessageType.Meta) throw new Error('not a META');
  return m.value;
}

describe('a signed META', () => {
  const key = keyPair();
  const meta = signedMeta(key.signer('edge-1'));

  test('verifies for its proxy, URL and range, whatever the transfer id', () => {
    expect(verifyMeta(meta, request, 'edge-1', key.publicKey)).toBe(true);
    expect(verifyMeta({ ...meta, transferId: 99 }, request, 'edge-1', key.publicKey)).toBe(true);
  });

  test.each<[string, (m: MetaMessage) => MetaMessage]>([
    ['another length', (m) => ({ ...m, objectLength: 4 })],
    ['another digest', (m) => ({ ...m, digest: sha256(m.digest) })],
    ['another unit root', (m) => ({ ...m, unitRoot: sha256(m.unitRoot) })],
    ['another layout', (m) => ({ ...m, generationSize: 16 })],
    ['another Content-Type', (m) => ({ ...m, attributes: { contentType: 'text/html' } })],
    ['another validator', (m) => ({ ...m, signed: { ...m.signed!, validator: { kind: 'etag', value: '"v2"' } } })],
    ['another fetch time', (m) => ({ ...m, signed: { ...m.signed!, fetchedAt: 1 } })],
    ['a flipped signature bit', (m) => ({ ...m, signed: { ...m.signed!, signature: flip(m.signed!.signature) } })],
    ['no signature', (m) => ({ ...m, signed: undefined })],
  ])('with %s does not verify', (_, change) => {
    expect(verifyMeta(change(meta), request, 'edge-1', key.publicKey)).toBe(false);
  });

  test('does not verify for another proxy id, URL, range or key', () => {
    expect(verifyMeta(meta, request, 'edge-2', key.publicKey)).toBe(false);
    expect(verifyMeta(meta, { ...request, url: 'https://origin.example/seg-2.ts' }, 'edge-1', key.publicKey)).toBe(
      false,
    );
    expect(verifyMeta(meta, { url: request.url }, 'edge-1', key.publicKey)).toBe(false);
    expect(verifyMeta(meta, request, 'edge-1', keyPair().publicKey)).toBe(false);
    expect(verifyMeta(meta, request, 'edge-1', new Uint8Array(31))).toBe(false);
  });

  test('the portable verifier agrees with node:crypto', () => {
    const message = assertionMessage(identity, provenance, request, 'edge-1');
    expect(verifyEd25519(meta.signed!.signature, message, key.publicKey)).toBe(true);
    expect(verifyEd25519(flip(meta.signed!.signature), message, key.publicKey)).toBe(false);
  });

  test('keys as origo hands them out: base64url of 32 bytes, nothing else', () => {
    expect(decodeAssertionKey(key.text)).toEqual(key.publicKey);
    expect(decodeAssertionKey(key.text.slice(1))).toBeUndefined();
    expect(decodeAssertionKey(`${key.text.slice(1)}+`)).toBeUndefined();
  });
});

describe('MetaSignatures', () => {
  const a = keyPair();
  const b = keyPair();

  test('a source with a published key counts only with a META that key signed; others as before', () => {
    const signatures = new MetaSignatures(
      [{ proxyId: 'a', publicKey: a.publicKey }, { proxyId: 'b', publicKey: b.publicKey }, undefined],
      request,
    );
    signatures.record(0, signedMeta(a.signer('a')));
    signatures.record(1, signedMeta(a.signer('b'))); // signed, but not by b's key
    expect(signatures.signed(0)).toBe(true);
    expect(signatures.signed(1)).toBe(false);
    expect(signatures.signed(2)).toBe(true);
    expect(signatures.evidence(0)).toBeDefined();
    expect(signatures.evidence(1)).toBeUndefined();
  });

  test('keeps the first META it was given (a later one cannot replace what was checked)', () => {
    const signatures = new MetaSignatures([{ proxyId: 'a', publicKey: a.publicKey }], request);
    signatures.record(0, signedMeta(b.signer('a')));
    signatures.record(0, signedMeta(a.signer('a')));
    expect(signatures.signed(0)).toBe(false);
  });
});

function flip(bytes: Uint8Array): Uint8Array {
  const out = bytes.slice();
  out[0] ^= 1;
  return out;
}

describe('signHttpAnswer (a /v1/http answer, issue 31)', () => {
  const bytes = new Uint8Array(5000).map((_, i) => (i * 7) & 0xff);
  const answer = {
    bytes,
    digest: sha256(bytes),
    attributes: { contentType: 'video/mp2t', range: { start: 100, completeLength: 9000 } },
    provenance: { fetchedAt: 1_700_000_000_000, validator: { kind: 'etag' as const, value: '"v1"' } },
  };
  const key = keyPair();

  test('is a META over the answered bytes, signed for this proxy, URL and range only', () => {
    const decoded = decode(signHttpAnswer(answer, request, key.signer('p-1'), sha256));
    if (!decoded.ok || decoded.value.type !== MessageType.Meta) throw new Error('not a META');
    const meta = decoded.value;
    const layout = new Layout('uncoded', bytes.length, HTTP_ASSERTION_LAYOUT.symbolSize, 24);
    expect(meta).toMatchObject({ objectLength: 5000, mode: 'uncoded', attributes: answer.attributes });
    expect(meta.digest).toEqual(answer.digest);
    expect(meta.unitRoot).toEqual(unitRoot(unitDigests(bytes, layout, sha256), sha256));
    expect(meta.signed).toMatchObject(answer.provenance);
    expect(verifyMeta(meta, request, 'p-1', key.publicKey)).toBe(true);
    expect(verifyMeta(meta, { url: request.url }, 'p-1', key.publicKey)).toBe(false);
    expect(verifyMeta(meta, request, 'p-2', key.publicKey)).toBe(false);
    expect(verifyMeta(meta, request, 'p-1', keyPair().publicKey)).toBe(false);
  });

  test("uses the caller's unit digests when it holds them (a cache entry's)", () => {
    const held = new Uint8Array(16 * 8).fill(7);
    const decoded = decode(signHttpAnswer({ ...answer, unitDigests: () => held }, request, key.signer('p-1'), sha256));
    if (!decoded.ok || decoded.value.type !== MessageType.Meta) throw new Error('not a META');
    expect(decoded.value.unitRoot).toEqual(sha256(held));
  });
});
