/**
 * Signed METAs as proxies make them (their assertion keys), a loopback origin serving the true
 * object under a strong ETag, and the `conflict` a client hands origo about it: what the conflict
 * tests, on one instance and across a cluster, prove a proxy false with.
 */
import { createHash, generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  assertionMessage,
  ByteRange,
  decode,
  encodeMeta,
  MessageType,
  MetaMessage,
  OriginValidator,
} from '@mutp/shared/internal';
import { track } from './helpers';

const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());
export const bytesOf = (text: string) => new TextEncoder().encode(text);
export const TRUE_BYTES = bytesOf('the object the origin serves');
export const FAKE_BYTES = bytesOf('an object a rogue made up!!!');
export const URL_ = 'http://origin.test/seg-1.ts';
export const ETAG: OriginValidator = { kind: 'etag', value: '"v1"' };

/** A proxy's assertion key: the private half signs, `text` is what it registers. */
export interface Key {
  privateKey: KeyObject;
  text: string;
}

export function newKey(): Key {
  const pair = generateKeyPairSync('ed25519');
  return { privateKey: pair.privateKey, text: pair.publicKey.export({ format: 'jwk' }).x as string };
}

/** A META for `bytes` as proxy `proxyId` signs it, naming `validator`. */
export function statement(
  proxyId: string,
  key: Key,
  bytes: Uint8Array,
  validator: OriginValidator | undefined,
  url = URL_,
  range?: ByteRange,
): { proxyId: string; meta: MetaMessage; wire: Uint8Array } {
  const identity = {
    objectLength: bytes.length,
    symbolSize: 1120,
    generationSize: 24,
    mode: 'rlnc' as const,
    digest: sha256(bytes),
    unitRoot: sha256(sha256(bytes).subarray(0, 16)),
  };
  const provenance = { fetchedAt: 1_764_201_600_000, ...(validator ? { validator } : {}) };
  const signature = new Uint8Array(
    sign(null, assertionMessage(identity, provenance, { url, ...(range ? { range } : {}) }, proxyId), key.privateKey),
  );
  const wire = encodeMeta({ transferId: 9, ...identity, signed: { ...provenance, signature } });
  const m = decode(wire);
  if (!m.ok || m.value.type !== MessageType.Meta) throw new Error('not a META');
  return { proxyId, meta: m.value, wire };
}

/** A loopback origin serving TRUE_BYTES under ETAG (closed by closeAll); resolves with its URL. */
export async function startOrigin(): Promise<string> {
  const origin = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'video/mp2t', etag: ETAG.value, 'content-length': TRUE_BYTES.length });
    res.end(TRUE_BYTES);
  });
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  track({ close: () => new Promise<void>((resolve) => origin.close(() => resolve())) });
  return `http://127.0.0.1:${(origin.address() as AddressInfo).port}/seg-1.ts`;
}

/** The conflict a client hands in about `url`: `honest`'s true statement and `rogue`'s lie, both under ETAG. */
export function conflictAbout(
  url: string,
  honest: { proxyId: string; key: Key },
  rogue: { proxyId: string; key: Key },
): Record<string, unknown> {
  const wire = (s: ReturnType<typeof statement>) => ({
    proxyId: s.proxyId,
    meta: Buffer.from(s.wire).toString('base64'),
  });
  return {
    type: 'conflict',
    url,
    statements: [
      wire(statement(honest.proxyId, honest.key, TRUE_BYTES, ETAG, url)),
      wire(statement(rogue.proxyId, rogue.key, FAKE_BYTES, ETAG, url)),
    ],
  };
}
