/**
 * The encoders of one object, shared by every transfer that sends it with the same layout: a
 * WebAssembly codec copies the object into its memory (wirehair also builds its code), so a
 * hundred clients of one cached segment would otherwise hold a hundred copies. Each encoder is
 * charged to the memory budget while it lives and freed when its last transfer lets go.
 */
import { Codec, UnitEncoder } from '../codec/types';
import { Layout } from '../layout';
import { MemoryBudget } from './admission';
import { IdleEncoders } from './idle-encoders';

/** Thrown by `lease` when the memory budget cannot take a new encoder. */
export class EncoderBudgetError extends Error {
  override readonly name = 'EncoderBudgetError';
}

interface Entry {
  encoder: UnitEncoder;
  leases: number;
  bytes: number;
}

/** Bytes of codec state an encoder of `objectLength` bytes holds, when the codec does not say. */
export function encoderBytesOf(codec: Codec, objectLength: number): number {
  return codec.encoderBytes?.(objectLength) ?? objectLength;
}

export class SharedEncoders {
  private readonly entries = new Map<string, Entry>();
  /**
   * Where an encoder goes when its last transfer lets go, for the next transfer of the object
   * (set by the cache while it holds the object); without it the encoder is freed at once.
   */
  private idle?: IdleEncoders;

  constructor(
    private readonly object: Uint8Array,
    private readonly budget: MemoryBudget,
  ) {}

  /** Keep idle encoders in `pool` from now on; undefined: free them, and any parked now. */
  keepIdleIn(pool: IdleEncoders | undefined): void {
    if (!pool) this.dropIdle();
    this.idle = pool;
  }

  /** Frees the encoders no transfer uses (the object left the cache). */
  dropIdle(): void {
    for (const entry of [...this.entries.values()]) if (entry.leases === 0) this.idle?.drop(entry);
  }

  /** An encoder of the object for `layout`; its `free()` ends this lease only. */
  lease(codec: Codec, layout: Layout): UnitEncoder {
    const key = `${codec.name}/${layout.mode}/${layout.symbolSize}/${layout.generationSize}`;
    let entry = this.entries.get(key);
    if (entry && entry.leases === 0 && !this.idle?.unpark(entry)) entry = undefined;
    if (!entry) {
      const bytes = encoderBytesOf(codec, this.object.length);
      if (!this.budget.tryTake(bytes))
        throw new EncoderBudgetError(`no memory budget left for a ${layout.mode} encoder of ${bytes} bytes`);
      let encoder: UnitEncoder;
      try {
        encoder = codec.createEncoder(this.object, layout);
      } catch (e) {
        this.budget.give(bytes);
        throw e;
      }
      entry = { encoder, leases: 0, bytes };
      this.entries.set(key, entry);
    }
    entry.leases++;
    return this.leaseOf(key, entry);
  }

  private leaseOf(key: string, entry: Entry): UnitEncoder {
    let freed = false;
    const release = () => {
      if (freed) return;
      freed = true;
      if (--entry.leases > 0) return;
      const dispose = () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
        entry.encoder.free();
        this.budget.give(entry.bytes);
      };
      if (this.idle) this.idle.park(entry, entry.bytes, dispose);
      else dispose();
    };
    const { encoder } = entry;
    return {
      mode: encoder.mode,
      encodeInto: (unit, k, out) => {
        if (freed) throw new Error('encoder lease used after free()');
        encoder.encodeInto(unit, k, out);
      },
      usableKey: encoder.usableKey ? (unit, k) => encoder.usableKey!(unit, k) : undefined,
      prepare: encoder.prepare
        ? (unit) => {
            if (freed) throw new Error('encoder lease used after free()');
            encoder.prepare!(unit);
          }
        : undefined,
      free: release,
    };
  }

  /** Encoders alive now (tests, metrics). */
  get size(): number {
    return this.entries.size;
  }
}

/** A codec whose encoders come from `encoders` (what a Sender is given to share them). */
export function sharingCodec(codec: Codec, encoders: SharedEncoders): Codec {
  return {
    mode: codec.mode,
    name: codec.name,
    createEncoder: (_object, layout) => encoders.lease(codec, layout),
    createDecoder: (layout) => codec.createDecoder(layout),
  };
}
