/**
 * Capabilities on the wire (docs/protocol.md §4.8, §13): the extension block of REQUEST and META
 * round-trips, tolerates what a newer peer adds (unknown entry types, unknown bits, a longer
 * bitmap) and rejects what is not a block; a signed META's signature covers its block; feature
 * names; and what a SourceEndpoint with features switched off, or facing a client that declared
 * fewer, does.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256 } from '@noble/hashes/sha256';
import {
  Admission,
  ALL_CAPABILITIES,
  assertionMessage,
  capabilitiesOf,
  capabilityExtension,
  decode,
  encode,
  encodeMeta,
  encodeRequest,
  extensionCapabilities,
  featureBit,
  featureNames,
  FEATURES,
  hasFeature,
  LEGACY_CAPABILITIES,
  MessageType,
  MetaMessage,
  parseFeatureList,
  RequestMessage,
  rlncCodec,
  SharedEncoders,
  SourceEndpoint,
  uncodedCodec,
  verifyMeta,
  withoutFeatures,
} from '../src/internal';
import { objectOf } from './helpers/fake-host';

const URL_ = 'https://cdn.example/seg.ts';

function request(over: Partial<RequestMessage> = {}): Omit<RequestMessage, 'type'> {
  return {
    transferId: 5,
    mode: 'rlnc',
    scheduler: 'partitioned',
    sourceIndex: 1,
    sourceCount: 3,
    window: 240,
    generationSize: 24,
    symbolSize: 1120,
    url: URL_,
    ...over,
  };
}

function meta(over: Partial<MetaMessage> = {}): Omit<MetaMessage, 'type'> {
  return {
    transferId: 5,
    objectLength: 1000,
    symbolSize: 1120,
    generationSize: 24,
    mode: 'rlnc',
    digest: new Uint8Array(32).fill(1),
    unitRoot: new Uint8Array(32).fill(2),
    ...over,
  };
}

const decoded = (bytes: Uint8Array) => {
  const r = decode(bytes);
  if (!r.ok) throw new Error(`${r.error.code}: ${r.error.message}`);
  return r.value;
};
const errorOf = (bytes: Uint8Array) => {
  const r = decode(bytes);
  return r.ok ? 'decoded' : r.error.code;
};

describe('feature names and sets', () => {
  test("bits follow FEATURES; the legacy set is the first release's features but extensions, fixed", () => {
    expect(featureBit('extensions')).toBe(1);
    expect(featureNames(ALL_CAPABILITIES)).toEqual([...FEATURES]);
    expect(hasFeature(LEGACY_CAPABILITIES, 'extensions')).toBe(false);
    // A feature added since (fetching, bit 8) is never assumed of a peer that declares nothing.
    expect(featureNames(LEGACY_CAPABILITIES)).toEqual(FEATURES.slice(1, 8));
    expect(featureNames(withoutFeatures(['resume', 'ranges']))).toEqual(
      FEATURES.filter((f) => f !== 'resume' && f !== 'ranges'),
    );
  });

  test("a newer peer's names are ignored, a typo in a switch is refused", () => {
    expect(featureNames(capabilitiesOf(['ranges', 'teleport', 'resume']))).toEqual(['ranges', 'resume']);
    expect(parseFeatureList(' resume,ranges ,')).toEqual(['resume', 'ranges']);
    expect(() => parseFeatureList('resume,rnages')).toThrow(/unknown feature "rnages"/);
  });
});

describe('the extension block', () => {
  const caps = withoutFeatures(['weights']);
  const block = capabilityExtension(caps);

  test('REQUEST carries it with and without range, weights and resume part; without it the bytes are as before', () => {
    const variants: Partial<RequestMessage>[] = [
      {},
      { range: { start: 10, length: 500 } },
      { weights: new Uint8Array([1, 2, 3]) },
      { resume: { fromUnit: 7, blockRound: 2 } },
      { range: { start: 0, length: 9 }, weights: new Uint8Array([9, 8, 7]), resume: { fromUnit: 1, blockRound: 0 } },
    ];
    for (const v of variants) {
      const plain = encodeRequest(request(v));
      const bytes = encodeRequest(request({ ...v, extensions: block }));
      expect(bytes.length).toBe(plain.length + block.length + 1);
      expect(bytes[7]).toBe(plain[7] | 0x40);
      const m = decoded(bytes) as RequestMessage;
      expect(m).toMatchObject({ ...request(v), type: MessageType.Request });
      expect(extensionCapabilities(m.extensions!)).toBe(caps);
      expect(Buffer.from(encodeRequest(m)).equals(Buffer.from(bytes))).toBe(true);
      expect('extensions' in (decoded(plain) as RequestMessage)).toBe(false);
    }
  });

  test('META carries it after everything, unsigned and signed, the attributes block then present', () => {
    const withBlock = encodeMeta(meta({ extensions: block }));
    const m = decoded(withBlock) as MetaMessage;
    expect(m.attributes).toBeUndefined();
    expect(extensionCapabilities(m.extensions!)).toBe(caps);
    expect(Buffer.from(encodeMeta(m)).equals(Buffer.from(withBlock))).toBe(true);
    const typed = encodeMeta(meta({ attributes: { contentType: 'video/mp4' }, extensions: block }));
    expect((decoded(typed) as MetaMessage).attributes).toEqual({ contentType: 'video/mp4' });
  });

  test("a signed META's signature covers its block: a changed block does not verify", () => {
    const pair = generateKeyPairSync('ed25519');
    const publicKey = new Uint8Array(Buffer.from(pair.publicKey.export({ format: 'jwk' }).x as string, 'base64url'));
    const provenance = { fetchedAt: 1_700_000_000_000 };
    const asked = { url: URL_ };
    const identity = meta({ extensions: block });
    const signature = new Uint8Array(
      sign(null, assertionMessage(identity, provenance, asked, 'edge-1'), pair.privateKey),
    );
    const bytes = encodeMeta({ ...identity, signed: { ...provenance, signature } });
    expect(verifyMeta(decoded(bytes) as MetaMessage, asked, 'edge-1', publicKey)).toBe(true);
    const changed = bytes.slice();
    changed[changed.length - 3] ^= featureBit('resume'); // the bitmap's first byte (of two)
    const m = decoded(changed) as MetaMessage;
    expect(extensionCapabilities(m.extensions!)).toBe(caps ^ featureBit('resume'));
    expect(verifyMeta(m, asked, 'edge-1', publicKey)).toBe(false);
  });

  test('what a newer peer adds is skipped: unknown entry types, unknown bits, a longer bitmap', () => {
    const newer = new Uint8Array([9, 3, 0xaa, 0xbb, 0xcc, 1, 6, 0x0f, 0xf0, 0xff, 0xff, 0, 0x80, 42, 0]);
    const m = decoded(encodeRequest(request({ extensions: newer }))) as RequestMessage;
    // Byte 0 holds features 0..7 (bits 0..3 set here); byte 1's bits are features 8..15, unknown
    // today and dropped; bytes past the fourth are not read.
    expect(extensionCapabilities(m.extensions!)).toBe(0x0f);
    expect(extensionCapabilities(new Uint8Array([9, 0]))).toBeUndefined();
    expect(extensionCapabilities(new Uint8Array())).toBeUndefined();
  });

  test('what is not a block is rejected; encoders refuse to make one', () => {
    const good = encodeRequest(request({ extensions: block, resume: { fromUnit: 1, blockRound: 0 } }));
    const lengthAt = good.length - 8 - 1;
    const overlong = good.slice();
    overlong[lengthAt] = 250; // points before the fixed fields
    expect(errorOf(overlong)).toBe('truncated');
    const untiled = good.slice();
    untiled[lengthAt - block.length + 1] = 5; // the entry's length runs past the block
    expect(errorOf(untiled)).toBe('out-of-range');
    const metaBytes = encodeMeta(meta({ extensions: block }));
    const badMeta = metaBytes.slice();
    badMeta[badMeta.length - 1] = 200;
    expect(errorOf(badMeta)).toBe('truncated');
    expect(() => encodeRequest(request({ extensions: new Uint8Array([1, 5, 0]) }))).toThrow(RangeError);
    expect(() => encodeMeta(meta({ extensions: new Uint8Array(256) }))).toThrow(RangeError);
  });
});

describe('a SourceEndpoint and what it declares', () => {
  const file = objectOf(20_000, 5);

  function endpoint(disabled: Parameters<typeof withoutFeatures>[0]) {
    const admission = new Admission({ maxTransfers: 8, maxPerClient: 4, memoryBytes: 64 << 20 });
    const signer = { proxyId: 'edge-1', sign: () => new Uint8Array(64).fill(7) };
    const ep = new SourceEndpoint({
      clientKey: 'c',
      codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
      admission,
      seed: () => 1,
      now: 0,
      signer,
      disabledFeatures: disabled,
    });
    const metaFor = (bytes: Uint8Array): MetaMessage | undefined => {
      ep.handleDatagram(bytes, 0);
      for (let e = ep.pollEvent(); e; e = ep.pollEvent()) {
        if (e.type !== 'fetch') continue;
        ep.objectReady(
          e.transferId,
          {
            bytes: file,
            digest: sha256(file),
            encoders: new SharedEncoders(file, admission.memory),
            cached: true,
            contentType: 'video/mp2t',
          },
          0,
        );
      }
      for (let d = ep.pollDatagram(0); d; d = ep.pollDatagram(0)) {
        const m = decoded(d);
        if (m.type === MessageType.Meta) return m;
      }
      return undefined;
    };
    return { ep, metaFor };
  }

  test('declares its features by name, without the switched-off ones', () => {
    expect(SourceEndpoint.declaredFeatures()).toEqual([...FEATURES]);
    expect(SourceEndpoint.declaredFeatures(['symbol-digests'])).toEqual(FEATURES.filter((f) => f !== 'symbol-digests'));
  });

  test('a legacy client (no block) gets the META of before: signed, typed, no block', () => {
    const m = endpoint([]).metaFor(encodeRequest(request()))!;
    expect(m.signed).toBeDefined();
    expect(m.attributes).toEqual({ contentType: 'video/mp2t' });
    expect(m.extensions).toBeUndefined();
  });

  test('a client that declares fewer gets only those, and the source says what it reads', () => {
    const client = withoutFeatures(['signatures', 'attributes']);
    const m = endpoint(['resume']).metaFor(encodeRequest(request({ extensions: capabilityExtension(client) })))!;
    expect(m.signed).toBeUndefined();
    expect(m.attributes).toBeUndefined();
    expect(featureNames(extensionCapabilities(m.extensions!)!)).toEqual(FEATURES.filter((f) => f !== 'resume'));
  });

  test('a switched-off feature is dropped unanswered, as by the release before it', () => {
    const cases: [Parameters<typeof withoutFeatures>[0], Partial<RequestMessage>][] = [
      [['resume'], { resume: { fromUnit: 2, blockRound: 0 } }],
      [['ranges'], { range: { start: 0, length: 100 } }],
      [['weights'], { weights: new Uint8Array([1, 1, 1]) }],
      [['partitioned'], {}],
      [['extensions'], { scheduler: 'rarest', extensions: capabilityExtension(ALL_CAPABILITIES) }],
    ];
    for (const [disabled, over] of cases) {
      const { ep, metaFor } = endpoint(disabled);
      expect([disabled, metaFor(encodeRequest(request(over)))]).toEqual([disabled, undefined]);
      expect(ep.stats().malformed).toBe(1);
      // The same REQUEST without the feature is served.
      const plain = { ...over, scheduler: 'rarest' as const };
      for (const key of ['resume', 'range', 'weights', 'extensions'] as const) delete plain[key];
      expect(metaFor(encodeRequest(request(plain)))).toBeDefined();
    }
  });
});

describe('vectors/capabilities-v1.json (docs/protocol.md §4.8)', () => {
  type Vector = { name: string; description: string; hex: string; capabilities?: number; error?: string };
  const vectors: Vector[] = JSON.parse(readFileSync(join(__dirname, 'vectors', 'capabilities-v1.json'), 'utf8'));

  test.each(vectors.map((v) => [v.name, v] as const))('%s', (_name, v) => {
    const bytes = new Uint8Array(Buffer.from(v.hex, 'hex'));
    if (v.error) {
      expect(errorOf(bytes)).toBe(v.error);
      return;
    }
    const m = decoded(bytes) as RequestMessage | MetaMessage;
    expect(m.extensions).toBeDefined();
    expect(extensionCapabilities(m.extensions!)).toBe(v.capabilities);
    expect(Buffer.from(encode(m)).toString('hex')).toBe(v.hex);
  });
});
