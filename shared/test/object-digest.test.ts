/**
 * The object's SHA-256 taken incrementally as check units verify (object-digest.ts, issue 33):
 * the object check at completion compares it instead of hashing the whole object there, and it
 * proves exactly what the one-shot hash proved.
 */
import { sha256 as nobleSha256 } from '@noble/hashes/sha256';
import { Layout, rlncCodec, seededRandom, unitDigests } from '../src/internal';
import { Completion } from '../src/receiver/completion';
import { HashStream, StreamingSha256 } from '../src/receiver/object-digest';

const symbolSize = 64;
const generationSize = 4;
/** Four generations, the last one short: four check units. */
const object = Uint8Array.from({ length: 14 * symbolSize - 9 }, (_, i) => (i * 31 + 11) & 0xff);
const layout = new Layout('rlnc', object.length, symbolSize, generationSize);
const identity = { objectLength: object.length, digest: nobleSha256(object), unitRoot: new Uint8Array(32) };

/** A streaming SHA-256 that records what it hashes: one-shot input lengths, and each stream's updates. */
function recordingSha256() {
  const oneShot: number[] = [];
  const updates: Uint8Array[] = [];
  const hash = ((data: Uint8Array) => {
    oneShot.push(data.length);
    return nobleSha256(data);
  }) as StreamingSha256;
  hash.create = (): HashStream => {
    const inner = nobleSha256.create();
    return {
      update(data) {
        updates.push(data.slice());
        inner.update(data);
      },
      digest: () => inner.digest(),
    };
  };
  return { hash, oneShot, updates };
}

function completionWith(sha256: (data: Uint8Array) => Uint8Array, checked = true): Completion {
  const completion = new Completion({
    mode: 'rlnc',
    symbolSize,
    generationSize,
    window: 64,
    codec: rlncCodec,
    sha256,
    maxPacketLogBytes: 1 << 20,
    checked,
  });
  completion.start(object.length, unitDigests(object, layout, nobleSha256));
  return completion;
}

/** Decodes generation `unit` completely (coded packets from a seeded encoder). */
function deliver(completion: Completion, unit: number, seed: number): void {
  const encoder = rlncCodec.createEncoder(object, layout);
  const random = seededRandom(seed);
  const payload = new Uint8Array(symbolSize);
  const want = completion.dof + layout.unitSize(unit);
  for (let sent = 0; completion.dof < want; sent++) {
    if (sent > 100) throw new Error(`generation ${unit} did not decode from 100 packets`);
    const key = random();
    encoder.encodeInto(unit, key, payload);
    completion.add(0, unit, key, payload.slice());
  }
  encoder.free();
}

function deliverAll(completion: Completion, order: number[]): void {
  order.forEach((unit, i) => deliver(completion, unit, 100 + i));
}

/** Bytes of generation `unit` (the last one is short). */
function unitBytes(unit: number): number {
  const start = unit * generationSize * symbolSize;
  return Math.min(generationSize * symbolSize, object.length - start);
}

describe('ObjectDigest: the object hashed as its check units verify', () => {
  test('units verifying out of order are hashed in object order, once each; completion hashes no whole object', () => {
    const { hash, oneShot, updates } = recordingSha256();
    const completion = completionWith(hash);
    deliverAll(completion, [2, 0, 3, 1]);
    expect(completion.allUnitsComplete).toBe(true);
    // Every unit went into the stream exactly once, in order: the stream saw the object itself.
    expect(updates.map((u) => u.length)).toEqual([0, 1, 2, 3].map(unitBytes));
    expect(Buffer.concat(updates)).toEqual(Buffer.from(object));
    expect(completion.verify(identity)).toBeUndefined();
    // Unit checks hash their own units; nothing hashed the whole object at completion.
    expect(oneShot.filter((n) => n === object.length)).toEqual([]);
    expect(completion.takeObject()).toEqual(object);
  });

  test('the streamed digest is still compared: an identity naming other bytes fails, twice', () => {
    const { hash } = recordingSha256();
    const completion = completionWith(hash);
    deliverAll(completion, [1, 3, 2, 0]);
    const other = object.slice();
    other[5] ^= 1;
    const wrong = { ...identity, digest: nobleSha256(other) };
    expect(completion.verify(wrong)).toMatchObject({ code: 'digest-mismatch' });
    expect(completion.verify(wrong)).toMatchObject({ code: 'digest-mismatch' });
    expect(completion.verify(identity)).toBeUndefined();
  });

  test('no digest is given before every unit was hashed (a unit before the others still missing)', () => {
    const { hash, updates } = recordingSha256();
    const completion = completionWith(hash);
    deliverAll(completion, [1, 2, 3]);
    // Unit 0 has not verified: nothing could be hashed yet.
    expect(updates).toEqual([]);
    expect(completion.allUnitsComplete).toBe(false);
  });

  test('a SHA-256 that cannot stream: the object is hashed once at completion, as before', () => {
    const oneShot: number[] = [];
    const plain = (data: Uint8Array) => {
      oneShot.push(data.length);
      return nobleSha256(data);
    };
    const completion = completionWith(plain);
    deliverAll(completion, [0, 1, 2, 3]);
    expect(completion.verify({ ...identity, digest: new Uint8Array(32) })).toMatchObject({ code: 'digest-mismatch' });
    expect(completion.verify(identity)).toBeUndefined();
    expect(oneShot.filter((n) => n === object.length)).toHaveLength(2);
  });

  test('the unchecked baseline streams nothing', () => {
    const { hash, updates } = recordingSha256();
    const completion = completionWith(hash, false);
    deliverAll(completion, [0, 1, 2, 3]);
    expect(completion.verify({ ...identity, digest: new Uint8Array(32) })).toBeUndefined();
    expect(updates).toEqual([]);
  });
});
