/**
 * Property tests of the WebAssembly decoders under hostile input: arbitrary layouts, units, keys
 * and payloads never trap or throw anything but the codec's error class, memory returns to its
 * baseline, and an honest decode on the same module afterwards is byte-exact.
 * (`npm run fuzz` runs the same kind of inputs by the hundred thousand.)
 */
import fc from 'fast-check';
import { Codec, Layout, seededRandom } from '@mutp/shared';
import { fountainCodec } from '../src/fountain';
import { RlncModule, RlncWasmError, WasmRlncCodec } from '../src/rlnc';
import { loadRlncModuleNodeSync } from '../src/rlnc-node';
import { isUsableBlockId, Wirehair, WirehairError } from '../src/wirehair';
import { loadWirehairNodeSync } from '../src/wirehair-node';

const bytesOf = (length: number, seed: number) => {
  const random = seededRandom(seed);
  return Uint8Array.from({ length }, () => random() & 0xff);
};

/** Runs f; an exception must be of `errorClass`. */
function codecCall<T>(f: () => T, errorClass: new (...args: never[]) => Error): T | undefined {
  try {
    return f();
  } catch (e) {
    if (!(e instanceof errorClass)) throw new Error(`threw ${String(e)}, not a ${errorClass.name}`);
    return undefined;
  }
}

const odd = fc.constantFrom(-1, 0.5, NaN, Infinity, 2 ** 32, -0);
const hostilePacket = fc.record({
  unit: fc.oneof(fc.nat(6), fc.nat(), odd),
  key: fc.oneof(fc.nat(), fc.nat(40), fc.constantFrom(0xffff, 0x10000, 0xffffffff), odd),
  length: fc.oneof(fc.constant(-1), fc.nat(1500)),
  fill: fc.nat(),
});

let rlncModule: RlncModule;
let rlnc: WasmRlncCodec;
let wirehair: Wirehair;
let fountain: Codec;
beforeAll(() => {
  rlncModule = loadRlncModuleNodeSync();
  rlnc = new WasmRlncCodec(rlncModule);
  wirehair = loadWirehairNodeSync();
  fountain = fountainCodec(wirehair);
  // Wirehair allocates its tables on first use and keeps them: baselines are taken after one decode.
  for (const [codec, mode] of [
    [rlnc, 'rlnc'],
    [fountain, 'fountain'],
  ] as const) {
    honestDecode(codec, new Layout(mode, 1000, 64, 8), bytesOf(1000, 0));
  }
});

/** Decodes `object` from honest packets only and checks it. */
function honestDecode(codec: Codec, layout: Layout, object: Uint8Array): void {
  const encoder = codec.createEncoder(object, layout);
  const decoder = codec.createDecoder(layout);
  const packet = new Uint8Array(layout.symbolSize);
  try {
    for (let unit = 0; unit < layout.unitCount; unit++) {
      for (let key = 1; !decoder.isComplete(unit) && key < 10_000; key++) {
        if (encoder.usableKey && !encoder.usableKey(unit, key)) continue;
        encoder.encodeInto(unit, key, packet);
        decoder.add(unit, key, packet);
      }
    }
    expect(Buffer.from(decoder.readObject()).equals(Buffer.from(object))).toBe(true);
  } finally {
    encoder.free();
    decoder.free();
  }
}

describe.each([
  ['rlnc', () => rlnc, 'rlnc' as const, RlncWasmError],
  ['fountain', () => fountain, 'fountain' as const, WirehairError],
])('%s decoder on hostile packets', (_name, codecOf, mode, errorClass) => {
  test('only the codec error class, memory back to baseline, and a later honest decode exact', () => {
    const codec = codecOf();
    const usage = () => (mode === 'rlnc' ? rlncModule.allocatedBytes() : wirehair.allocatedBytes());
    const baseline = usage();
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 6000 }),
        fc.oneof(fc.integer({ min: 16, max: 600 }), fc.constantFrom(1, 2)),
        fc.integer({ min: 1, max: 40 }),
        fc.array(hostilePacket, { maxLength: 60 }),
        (objectLength, symbolSize, generationSize, packets) => {
          const layout = new Layout(mode, objectLength, symbolSize, generationSize);
          const decoder = codecCall(() => codec.createDecoder(layout), errorClass);
          if (decoder) {
            for (const p of packets) {
              const payload = bytesOf(p.length < 0 ? symbolSize : p.length, p.fill);
              const result = codecCall(() => decoder.add(p.unit, p.key, payload), errorClass);
              if (result !== undefined) expect(['innovative', 'redundant', 'invalid']).toContain(result);
            }
            decoder.free();
          }
          expect(usage()).toBe(baseline);
          honestDecode(codec, new Layout(mode, 1000, 64, 8), bytesOf(1000, objectLength));
          expect(usage()).toBe(baseline);
        },
      ),
      { seed: 9, numRuns: 150 },
    );
  });
});

describe('wirehair decoder on hostile blocks', () => {
  test('only WirehairError, codecs and heap freed, and a later honest decode exact', () => {
    const baseline = { bytes: wirehair.allocatedBytes(), codecs: wirehair.liveCodecs() };
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 5000 }), odd),
        fc.oneof(fc.integer({ min: 8, max: 700 }), odd),
        fc.array(hostilePacket, { maxLength: 60 }),
        (messageBytes, blockBytes, blocks) => {
          const decoder = codecCall(() => wirehair.createDecoder(messageBytes, blockBytes), WirehairError);
          if (decoder) {
            for (const b of blocks) {
              const data = bytesOf(b.length < 0 ? blockBytes : b.length, b.fill);
              const result = codecCall(() => decoder.decode(b.key, data), WirehairError);
              if (result !== undefined) expect(['need-more', 'complete', 'invalid']).toContain(result);
            }
            if (decoder.complete) codecCall(() => decoder.recover(), WirehairError);
            decoder.free();
          }
          expect(wirehair.liveCodecs()).toBe(baseline.codecs);
          expect(wirehair.allocatedBytes()).toBe(baseline.bytes);
          const message = bytesOf(900, blocks.length);
          const encoder = wirehair.createEncoder(message, 90);
          const honest = wirehair.createDecoder(900, 90);
          for (let id = 0; !honest.complete && id < 100; id++) {
            if (isUsableBlockId(encoder.params, id)) honest.decode(id, encoder.encode(id));
          }
          expect(Buffer.from(honest.recover()).equals(Buffer.from(message))).toBe(true);
          encoder.free();
          honest.free();
        },
      ),
      { seed: 9, numRuns: 150 },
    );
  });
});

// Found by `npm run fuzz`: a source block 0.5 passed the range check, and the decoder then asked
// wirehair for a code of a negative length (WirehairError out of add() instead of 'invalid').
test('fountain codec: a unit that is not an integer is not a source block', () => {
  const layout = new Layout('fountain', 5940, 471, 1);
  const object = bytesOf(layout.objectLength, 1);
  const encoder = fountain.createEncoder(object, layout);
  const decoder = fountain.createDecoder(layout);
  for (const unit of [0.5, -0.5, 1e-9, NaN]) {
    expect(decoder.add(unit, 0, new Uint8Array(layout.symbolSize))).toBe('invalid');
    expect(encoder.usableKey!(unit, 0)).toBe(false);
    expect(() => encoder.encodeInto(unit, 0, new Uint8Array(layout.symbolSize))).toThrow(RangeError);
  }
  encoder.free();
  decoder.free();
});
