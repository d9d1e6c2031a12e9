/**
 * The fountain mode's codec: every source block of the object (Layout, FOUNTAIN_BLOCK_SYMBOLS
 * symbols) is one wirehair code with the symbol as block size. A block id names one encoded
 * block; ids below the block's symbol count are the original symbols (docs/protocol.md §8.4).
 */
import { AddResult, Codec, Layout, UnitDecoder, UnitEncoder } from '@mutp/shared';
import { isUsableBlockId, Wirehair, WirehairDecoder, WirehairEncoder, wirehairParams } from './wirehair';

/** Whether `unit` names a source block of the object (an integer in range: 0.5 is not one). */
const isUnit = (layout: Layout, unit: number) => Number.isInteger(unit) && unit >= 0 && unit < layout.unitCount;

/** Bytes of the object in source block `unit`. */
function unitBytes(layout: Layout, unit: number): number {
  const start = unit * layout.symbolsPerUnit * layout.symbolSize;
  return Math.min(layout.symbolsPerUnit * layout.symbolSize, layout.objectLength - start);
}

class FountainEncoder implements UnitEncoder {
  readonly mode = 'fountain' as const;
  /** One wirehair encoder per source block, made on first use (most objects have one block). */
  private readonly encoders: (WirehairEncoder | undefined)[];
  private freed = false;

  constructor(
    private readonly wirehair: Wirehair,
    private readonly object: Uint8Array,
    private readonly layout: Layout,
  ) {
    this.encoders = new Array(layout.unitCount);
  }

  encodeInto(unit: number, blockId: number, out: Uint8Array): void {
    if (this.freed) throw new Error('fountain encoder used after free()');
    const { layout } = this;
    if (!isUnit(layout, unit)) throw new RangeError(`source block ${unit} out of range`);
    const start = unit * layout.symbolsPerUnit * layout.symbolSize;
    const bytes = unitBytes(layout, unit);
    if (layout.unitSize(unit) === 1) {
      // Wirehair needs two blocks or more: a one-symbol block is repeated as it is.
      out.set(this.object.subarray(start, start + bytes));
      out.fill(0, bytes, layout.symbolSize);
      return;
    }
    const block = this.encoderOf(unit).encodeView(blockId);
    out.set(block);
    out.fill(0, block.length, layout.symbolSize);
  }

  prepare(unit: number): void {
    if (this.freed) throw new Error('fountain encoder used after free()');
    const { layout } = this;
    if (!isUnit(layout, unit) || layout.unitSize(unit) === 1) return;
    this.encoderOf(unit);
  }

  /** Unit `unit`'s wirehair encoder, made on first use (a unit of two symbols or more). */
  private encoderOf(unit: number): WirehairEncoder {
    const { layout } = this;
    const start = unit * layout.symbolsPerUnit * layout.symbolSize;
    return (this.encoders[unit] ??= this.wirehair.createEncoder(
      this.object.subarray(start, start + unitBytes(layout, unit)),
      layout.symbolSize,
    ));
  }

  usableKey(unit: number, blockId: number): boolean {
    const { layout } = this;
    if (!isUnit(layout, unit)) return false;
    if (layout.unitSize(unit) === 1) return Number.isInteger(blockId) && blockId >= 0 && blockId <= 0xffffffff;
    return isUsableBlockId(wirehairParams(unitBytes(layout, unit), layout.symbolSize), blockId);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    for (const encoder of this.encoders) encoder?.free();
    this.encoders.fill(undefined);
  }
}

interface BlockState {
  decoder?: WirehairDecoder;
  /** Block ids seen, so a duplicate is reported redundant without touching the decoder. */
  seen: Set<number>;
  complete: boolean;
}

class FountainDecoder implements UnitDecoder {
  readonly mode = 'fountain' as const;
  private readonly blocks: (BlockState | undefined)[];
  private readonly object: Uint8Array;
  private freed = false;

  constructor(
    private readonly wirehair: Wirehair,
    private readonly layout: Layout,
  ) {
    this.blocks = new Array(layout.unitCount);
    this.object = new Uint8Array(layout.objectLength);
  }

  add(unit: number, blockId: number, payload: Uint8Array): AddResult {
    if (this.freed) throw new Error('fountain decoder used after free()');
    const { layout } = this;
    if (!isUnit(layout, unit)) return 'invalid';
    if (payload.length !== layout.symbolSize) return 'invalid';
    const state = (this.blocks[unit] ??= { seen: new Set(), complete: false });
    if (state.complete || state.seen.has(blockId)) return 'redundant';
    const size = layout.unitSize(unit);
    const bytes = unitBytes(layout, unit);
    const offset = unit * layout.symbolsPerUnit * layout.symbolSize;
    if (size === 1) {
      this.object.set(payload.subarray(0, bytes), offset);
      state.seen.add(blockId);
      state.complete = true;
      return 'innovative';
    }
    state.decoder ??= this.wirehair.createDecoder(bytes, layout.symbolSize);
    // The decoder takes the short last systematic block zero-padded, as the encoder sends it.
    const result = state.decoder.decode(blockId, payload);
    if (result === 'invalid') return 'invalid';
    state.seen.add(blockId);
    if (result === 'complete') {
      this.object.set(state.decoder.recoverView(), offset);
      state.decoder.free();
      state.decoder = undefined;
      state.seen.clear();
      state.complete = true;
    }
    return 'innovative';
  }

  /** Distinct blocks received (the block's symbol count once decoded). */
  rank(unit: number): number {
    const state = this.blocks[unit];
    if (!state) return 0;
    return state.complete ? this.layout.unitSize(unit) : state.seen.size;
  }

  isComplete(unit: number): boolean {
    return this.blocks[unit]?.complete ?? false;
  }

  readObject(): Uint8Array {
    for (let u = 0; u < this.layout.unitCount; u++) {
      if (!this.isComplete(u)) throw new Error(`source block ${u} is not decoded`);
    }
    return this.object;
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    for (const state of this.blocks) state?.decoder?.free();
    this.blocks.fill(undefined);
  }
}

/**
 * Wasm heap a wirehair encoder of `objectLength` bytes holds: its copy of the message and the
 * recovery blocks it solves for at creation (measured: see wasm/test/encoder-memory.test.ts).
 */
export function fountainEncoderBytes(objectLength: number): number {
  return Math.ceil(objectLength * FOUNTAIN_ENCODER_FACTOR) + 256 * 1024;
}
export const FOUNTAIN_ENCODER_FACTOR = 2.25;

/** The fountain codec over a loaded wirehair module. */
export function fountainCodec(wirehair: Wirehair): Codec {
  return {
    mode: 'fountain',
    name: 'fountain-wirehair',
    createEncoder: (object, layout) => new FountainEncoder(wirehair, object, layout),
    createDecoder: (layout) => new FountainDecoder(wirehair, layout),
    encoderBytes: fountainEncoderBytes,
  };
}
