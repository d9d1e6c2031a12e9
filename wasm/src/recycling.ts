/**
 * A codec whose WebAssembly instance is replaced once it is idle and large. Linear memory only
 * grows: a proxy that once held many encoders at a peak would keep that memory for good. When
 * the last encoder and decoder of an instance is freed and its memory exceeds `keepBytes`, the
 * instance is dropped (the garbage collector takes its memory) and the next create call starts
 * a fresh one, instantiated synchronously from the already compiled module.
 */
import { Codec, Layout, UnitDecoder, UnitEncoder } from '@mutp/shared';

/** One instance of a codec and the size of its linear memory. */
export interface CodecInstance {
  codec: Codec;
  memoryBytes(): number;
}

export interface RecyclingStats {
  /** Instances dropped because they were idle and larger than keepBytes. */
  recycled: number;
  /** Encoders and decoders alive on the current instance. */
  live: number;
  /** Linear memory of the current instance (0 before the first use after a recycle). */
  memoryBytes: number;
}

interface Generation {
  instance: CodecInstance;
  live: number;
}

export class RecyclingCodec implements Codec {
  readonly mode: Codec['mode'];
  readonly name: string;
  private current?: Generation;
  private recycled = 0;

  constructor(
    private readonly create: () => CodecInstance,
    private readonly keepBytes: number,
  ) {
    const first = create();
    this.mode = first.codec.mode;
    this.name = first.codec.name;
    this.current = { instance: first, live: 0 };
  }

  createEncoder(object: Uint8Array, layout: Layout): UnitEncoder {
    const generation = this.generation();
    const encoder = generation.instance.codec.createEncoder(object, layout);
    generation.live++;
    const release = once(() => this.released(generation));
    return {
      mode: encoder.mode,
      encodeInto: (unit, key, out) => encoder.encodeInto(unit, key, out),
      usableKey: encoder.usableKey ? (unit, key) => encoder.usableKey!(unit, key) : undefined,
      prepare: encoder.prepare ? (unit) => encoder.prepare!(unit) : undefined,
      free: () => {
        encoder.free();
        release();
      },
    };
  }

  createDecoder(layout: Layout): UnitDecoder {
    const generation = this.generation();
    const decoder = generation.instance.codec.createDecoder(layout);
    generation.live++;
    const release = once(() => this.released(generation));
    return {
      mode: decoder.mode,
      add: (unit, key, payload) => decoder.add(unit, key, payload),
      rank: (unit) => decoder.rank(unit),
      isComplete: (unit) => decoder.isComplete(unit),
      readObject: () => decoder.readObject(),
      free: () => {
        decoder.free();
        release();
      },
    };
  }

  encoderBytes(objectLength: number): number {
    const codec = this.generation().instance.codec;
    return codec.encoderBytes?.(objectLength) ?? objectLength;
  }

  stats(): RecyclingStats {
    return {
      recycled: this.recycled,
      live: this.current?.live ?? 0,
      memoryBytes: this.current?.instance.memoryBytes() ?? 0,
    };
  }

  private generation(): Generation {
    return (this.current ??= { instance: this.create(), live: 0 });
  }

  private released(generation: Generation): void {
    generation.live--;
    if (generation !== this.current || generation.live > 0) return;
    if (generation.instance.memoryBytes() <= this.keepBytes) return;
    this.current = undefined;
    this.recycled++;
  }
}

function once(f: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    f();
  };
}
