/**
 * The frame's SHA-256: hash-wasm's WebAssembly hasher, synchronous once loaded (crypto.subtle is
 * asynchronous, and the core verifies units and the object synchronously). In Chromium the core's
 * portable SHA-256 ran at a third of Node's speed (79 against 226 MB/s), and the check of the
 * whole object sits on every download's critical path (28-46 ms per 2 MB segment).
 *
 * `create()` starts an incremental hash (the shape of noble's `sha256.create()`), which the core
 * uses to hash an object unit by unit as the units verify, and a fountain unit as its systematic
 * blocks arrive, instead of all at once at completion (shared/src/receiver/object-digest.ts,
 * systematic-prefix.ts).
 */
import { createSHA256, IHasher } from 'hash-wasm';

/** One incremental SHA-256. */
export interface Sha256Stream {
  update(data: Uint8Array): Sha256Stream;
  digest(): Uint8Array;
}

export type Sha256 = ((data: Uint8Array) => Uint8Array) & { create(): Sha256Stream };

/**
 * Loads the hashers once: one for one-shot calls (each from a fresh state), one that incremental
 * streams share (calls never interleave: the frame is single-threaded).
 */
export async function loadSha256(): Promise<Sha256> {
  const [oneShotHasher, streamHasher] = await Promise.all([createSHA256(), createSHA256()]);
  const oneShot = (data: Uint8Array) => oneShotHasher.init().update(data).digest('binary');
  const streams = new SharedStreamHasher(streamHasher);
  return Object.assign(oneShot, { create: () => streams.start() });
}

interface StreamState {
  /** The stream's state while another stream holds the hasher (hash-wasm's save(), ~116 bytes). */
  saved?: Uint8Array;
  done: boolean;
}

/**
 * Streams take turns on one hasher: the one that used it last leaves its state in it, so a single
 * download's updates cost no save or load; a stream whose turn comes after another's saves that
 * one's state and loads its own.
 */
class SharedStreamHasher {
  private holder?: StreamState;

  constructor(private readonly hasher: IHasher) {}

  start(): Sha256Stream {
    const state: StreamState = { done: false };
    const stream: Sha256Stream = {
      update: (data) => {
        if (state.done) throw new Error('SHA-256 stream updated after its digest');
        this.take(state).update(data);
        return stream;
      },
      digest: () => {
        if (state.done) throw new Error('SHA-256 stream digested twice');
        const digest = this.take(state).digest('binary');
        state.done = true;
        this.holder = undefined;
        return digest;
      },
    };
    return stream;
  }

  private take(state: StreamState): IHasher {
    if (this.holder === state) return this.hasher;
    if (this.holder) this.holder.saved = this.hasher.save();
    if (state.saved) this.hasher.load(state.saved);
    else this.hasher.init();
    state.saved = undefined;
    this.holder = state;
    return this.hasher;
  }
}
