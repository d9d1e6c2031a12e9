/**
 * The WebAssembly decoders (`wasm/src/rlnc.ts`, `wasm/src/wirehair.ts` and the fountain codec over
 * it): arbitrary layouts, packets, keys and lengths, mixed with honest packets so decoders fill up
 * and complete. Errors must be the codec's error class, every decode of honest packets must give
 * the object back, memory must return to where it was, and an honest decode on the same module
 * after each hostile input must still be byte-exact (no corruption carried over).
 */
import fc from 'fast-check';
import { Codec, Layout, seededRandom } from '@mutp/shared';
import {
  fountainCodec,
  RlncModule,
  RlncWasmError,
  WasmRlncCodec,
  Wirehair,
  WirehairError,
  isUsableBlockId,
} from '@mutp/wasm';
import { loadRlncModuleNode, loadWirehairNode } from '@mutp/wasm/node';
import { FuzzTarget, invariant, jsonBytes } from '../target';

const ADD_RESULTS = new Set(['innovative', 'redundant', 'invalid']);

function objectOf(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  return Uint8Array.from({ length }, () => random() & 0xff);
}

/** A packet: honest (encoded from the object) or hostile (arbitrary unit, key and bytes). */
export interface PacketOp {
  honest: boolean;
  unit: number;
  key: number;
  /** Hostile payload: its length (symbolSize when negative) and the seed of its bytes. */
  length: number;
  fill: number;
}

const oddNumber = fc.constantFrom(-1, 0.5, NaN, Infinity, 2 ** 32, 2 ** 53, -0);
const key = fc.oneof(
  fc.integer({ min: 0, max: 0xffffffff }),
  fc.nat(70),
  fc.constantFrom(0xffff, 0x10000, 0xffffffff),
  oddNumber,
);
const packetOp: fc.Arbitrary<PacketOp> = fc.record({
  honest: fc.boolean(),
  unit: fc.oneof(fc.nat(8), fc.nat(), oddNumber),
  key,
  length: fc.oneof(fc.constant(-1), fc.constant(-1), fc.nat(3000), fc.constantFrom(0, 1)),
  fill: fc.nat(),
});

function payloadOf(op: PacketOp, symbolSize: number): Uint8Array {
  return objectOf(op.length < 0 ? symbolSize : op.length, op.fill);
}

// ------------------------------------------------------------------ rlnc

export interface RlncInput {
  objectLength: number;
  symbolSize: number;
  generationSize: number;
  objectSeed: number;
  ops: PacketOp[];
}

let rlnc: WasmRlncCodec | undefined;
let rlncModule: RlncModule | undefined;

/** An honest decode of a small object on the module, checked byte for byte. */
function rlncCanary(codec: WasmRlncCodec, seed: number): void {
  const layout = new Layout('rlnc', 640, 64, 8);
  const object = objectOf(layout.objectLength, seed);
  const encoder = codec.createEncoder(object, layout);
  const decoder = codec.createDecoder(layout);
  try {
    const packet = new Uint8Array(layout.symbolSize);
    for (let g = 0; g < layout.unitCount; g++) {
      for (let k = 1; !decoder.isComplete(g) && k < 100; k++) {
        encoder.encodeInto(g, (seed + k) >>> 0, packet);
        decoder.add(g, (seed + k) >>> 0, packet);
      }
    }
    invariant(
      Buffer.from(decoder.readObject()).equals(Buffer.from(object)),
      'an honest rlnc decode after it is corrupted',
    );
  } finally {
    encoder.free();
    decoder.free();
  }
}

function expectCodecError<T>(f: () => T, errorClass: new (...args: never[]) => Error): T | undefined {
  try {
    return f();
  } catch (e) {
    invariant(e instanceof errorClass, `threw ${String(e)}, not a ${errorClass.name}`);
    return undefined;
  }
}

export const rlncTarget: FuzzTarget<RlncInput> = {
  name: 'rlnc',
  about: 'WebAssembly RLNC decoder (wasm/src/rlnc.ts): layouts, generations, seeds, payloads',
  inputs: fc.record({
    objectLength: fc.oneof(fc.nat(20_000), fc.constantFrom(0, 1, 255, 256, 65_536), oddNumber),
    symbolSize: fc.oneof(fc.integer({ min: 1, max: 1300 }), fc.constantFrom(0, 1, 16, 65_535, 65_536), oddNumber),
    generationSize: fc.oneof(fc.integer({ min: 1, max: 64 }), fc.constantFrom(0, 1, 255, 256), oddNumber),
    objectSeed: fc.nat(),
    ops: fc.array(packetOp, { maxLength: 120 }),
  }),
  async setup() {
    rlncModule = await loadRlncModuleNode();
    rlnc = new WasmRlncCodec(rlncModule);
  },
  check(input) {
    const codec = rlnc!;
    const baseline = rlncModule!.allocatedBytes();
    const layout = new Layout('rlnc', input.objectLength, input.symbolSize, input.generationSize);
    const decoder = expectCodecError(() => codec.createDecoder(layout), RlncWasmError);
    if (decoder) {
      const object = objectOf(input.objectLength, input.objectSeed);
      const encoder = codec.createEncoder(object, layout);
      try {
        const packet = new Uint8Array(layout.symbolSize);
        let hostile = false;
        for (const op of input.ops) {
          const unit =
            layout.unitCount > 0 && Number.isInteger(op.unit) && op.unit >= 0 ? op.unit % layout.unitCount : op.unit;
          let payload: Uint8Array;
          if (op.honest && Number.isInteger(unit) && unit >= 0 && unit < layout.unitCount) {
            encoder.encodeInto(unit, op.key >>> 0, packet);
            payload = packet;
          } else {
            payload = payloadOf(op, layout.symbolSize);
            hostile = true;
          }
          const result = expectCodecError(
            () => decoder.add(unit, op.honest ? op.key >>> 0 : op.key, payload),
            RlncWasmError,
          );
          invariant(result === undefined || ADD_RESULTS.has(result), `add returned ${result}`);
          if (Number.isInteger(unit) && unit >= 0 && unit < layout.unitCount) {
            const rank = decoder.rank(unit);
            invariant(
              rank >= 0 && rank <= layout.unitSize(unit),
              `rank ${rank} of a generation of ${layout.unitSize(unit)}`,
            );
          }
        }
        if (decoder.completeUnits() === layout.unitCount) {
          const decoded = decoder.readObject();
          invariant(
            decoded.length === layout.objectLength,
            `decoded ${decoded.length} bytes of ${layout.objectLength}`,
          );
          if (!hostile) invariant(Buffer.from(decoded).equals(Buffer.from(object)), 'honest packets decoded wrongly');
        }
      } finally {
        encoder.free();
        decoder.free();
      }
    }
    invariant(rlncModule!.allocatedBytes() === baseline, `${rlncModule!.allocatedBytes() - baseline} bytes not freed`);
    rlncCanary(codec, input.objectSeed);
  },
  bytes: jsonBytes,
};

// ------------------------------------------------------------------ wirehair and the fountain codec

export interface WirehairInput {
  /** Through the raw binding or the fountain Codec the Receiver uses. */
  via: 'wirehair' | 'fountain';
  messageBytes: number;
  blockBytes: number;
  messageSeed: number;
  ops: PacketOp[];
}

let wirehair: Wirehair | undefined;
let fountain: Codec | undefined;

function wirehairCanary(wh: Wirehair, seed: number): void {
  const message = objectOf(640, seed);
  const encoder = wh.createEncoder(message, 64);
  const decoder = wh.createDecoder(640, 64);
  try {
    for (let id = 1; id < 200 && !decoder.complete; id++) {
      if (isUsableBlockId(encoder.params, id)) decoder.decode(id, encoder.encode(id));
    }
    invariant(
      decoder.complete && Buffer.from(decoder.recover()).equals(Buffer.from(message)),
      'an honest wirehair decode after it is corrupted',
    );
  } finally {
    encoder.free();
    decoder.free();
  }
}

function wirehairRun(wh: Wirehair, input: WirehairInput): void {
  const decoder = expectCodecError(() => wh.createDecoder(input.messageBytes, input.blockBytes), WirehairError);
  if (!decoder) return;
  const message = objectOf(input.messageBytes, input.messageSeed);
  const encoder = wh.createEncoder(message, input.blockBytes);
  try {
    let hostile = false;
    for (const op of input.ops) {
      let data: Uint8Array;
      if (op.honest && isUsableBlockId(encoder.params, op.key)) data = encoder.encode(op.key);
      else {
        data = payloadOf(op, input.blockBytes);
        hostile = true;
      }
      const result = expectCodecError(() => decoder.decode(op.key, data), WirehairError);
      invariant(
        result === undefined || ['need-more', 'complete', 'invalid'].includes(result),
        `decode returned ${result}`,
      );
    }
    if (decoder.complete) {
      const recovered = expectCodecError(() => decoder.recover(), WirehairError);
      if (recovered && !hostile)
        invariant(Buffer.from(recovered).equals(Buffer.from(message)), 'honest blocks decoded wrongly');
    }
  } finally {
    encoder.free();
    decoder.free();
  }
}

function fountainRun(codec: Codec, input: WirehairInput): void {
  const layout = new Layout('fountain', input.messageBytes, input.blockBytes, 1);
  if (!(Number.isInteger(layout.symbolSize) && layout.symbolSize >= 1 && layout.symbolSize <= 4096)) return; // the Receiver's bounds
  // The Receiver refuses objects over its limit before it makes a decoder.
  if (!(Number.isInteger(layout.objectLength) && layout.objectLength >= 0 && layout.objectLength <= 1 << 20)) return;
  const object = objectOf(input.messageBytes, input.messageSeed);
  const decoder = codec.createDecoder(layout);
  const encoder = codec.createEncoder(object, layout);
  try {
    const packet = new Uint8Array(layout.symbolSize);
    let hostile = false;
    for (const op of input.ops) {
      const unit =
        layout.unitCount > 0 && Number.isInteger(op.unit) && op.unit >= 0 ? op.unit % layout.unitCount : op.unit;
      let payload: Uint8Array;
      if (op.honest && encoder.usableKey?.(unit, op.key)) {
        encoder.encodeInto(unit, op.key, packet);
        payload = packet;
      } else {
        payload = payloadOf(op, layout.symbolSize);
        hostile = true;
      }
      const result = expectCodecError(() => decoder.add(unit, op.key, payload), WirehairError);
      invariant(result === undefined || ADD_RESULTS.has(result), `add returned ${result}`);
    }
    let complete = true;
    for (let u = 0; u < layout.unitCount; u++) complete &&= decoder.isComplete(u);
    if (complete && !hostile)
      invariant(Buffer.from(decoder.readObject()).equals(Buffer.from(object)), 'honest blocks decoded wrongly');
  } finally {
    encoder.free();
    decoder.free();
  }
}

export const wirehairTarget: FuzzTarget<WirehairInput> = {
  name: 'wirehair',
  about: 'WebAssembly wirehair decoder and the fountain codec over it (wasm/src/wirehair.ts, fountain.ts)',
  inputs: fc.record({
    via: fc.constantFrom('wirehair' as const, 'fountain' as const),
    messageBytes: fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: 1, max: 8000 }) },
      { weight: 1, arbitrary: fc.constantFrom(0, 1, 2, 64_000, 64_001) },
      { weight: 1, arbitrary: oddNumber },
    ),
    // Small blocks make codes of thousands of blocks, whose set-up is the costly part: drawn less often.
    blockBytes: fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: 16, max: 1300 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 16 }) },
      { weight: 1, arbitrary: fc.constantFrom(0, 1, 2, 1 << 20, (1 << 20) + 1) },
      { weight: 1, arbitrary: oddNumber },
    ),
    messageSeed: fc.nat(),
    ops: fc.array(packetOp, { maxLength: 120 }),
  }),
  async setup() {
    wirehair = await loadWirehairNode();
    fountain = fountainCodec(wirehair);
  },
  check(input) {
    const wh = wirehair!;
    const run = () => {
      const before = { bytes: wh.allocatedBytes(), codecs: wh.liveCodecs() };
      if (input.via === 'wirehair') wirehairRun(wh, input);
      else fountainRun(fountain!, input);
      invariant(wh.liveCodecs() === before.codecs, `${wh.liveCodecs() - before.codecs} codecs not freed`);
      return wh.allocatedBytes() - before.bytes;
    };
    // Wirehair allocates some tables on first use of a code size and keeps them: heap growth is a
    // leak only when the same input grows it again.
    if (run() !== 0) {
      const again = run();
      invariant(again === 0, `${again} heap bytes not freed (on a second run of the input)`);
    }
    wirehairCanary(wh, input.messageSeed);
  },
  bytes: jsonBytes,
};
