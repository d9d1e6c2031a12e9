/**
 * The frame's SHA-256: hash-wasm's WebAssembly hasher, synchronous once loaded (crypto.subtle is
 * asynchronous, and the core verifies units and the object synchronously). In Chromium the core's
 * portable SHA-256 ran at a third of Node's speed (79 against 226 MB/s), and the check of the
 * whole object sits on every download's critical path (28-46 ms per 2 MB segment).
 *
 * `create()` starts an incremental hash (the shape of noble's `sha256.create()`), which the core
 * uses to hash an object unit by unit as the units verify instead of all at once at completion
 * (shared/src/receiver/object-digest.ts).
 */
import { createSHA256, IHasher } from 'hash-wasm';

/** One incremental SHA-256. */
export interface Sha256Stream {
  update(data: Uint8Array): Sha256Stream;
  digest(): Uint8Array;
}

export type Sha256 = ((data: Uint8Array) => Uint8Array) & { create(): Sha256Stream };

/**
 * Loads the hasher once; each one-shot call hashes its input from a fresh state, and each stream
 * keeps its own state between its calls (calls never interleave: the frame is single-threaded).
 */
export async function loadSha256(): Promise<Sha256> {
  const hasher = await createSHA256();
  const oneShot = (data: Uint8Array) => hasher.init().update(data).digest('binary');
  return Object.assign(oneShot, { create: () => streamOn(hasher) });
}

/**
 * A stream over the shared hasher: its state (~100 bytes) is saved after every update and loaded
 * before the next, so one-shot calls and other streams can use the hasher in between.
 */
function streamOn(hasher: IHasher): Sha256Stream {
  let state: Uint8Array | undefined = hasher.init().save();
  const stream: Sha256Stream = {
    update(data) {
      if (!state) throw new Error('SHA-256 stream updated after its digest');
      state = hasher.load(state).update(data).save();
      return stream;
    },
    digest() {
      if (!state) throw new Error('SHA-256 stream digested twice');
      const digest = hasher.load(state).digest('binary');
      state = undefined;
      return digest;
    },
  };
  return stream;
}
