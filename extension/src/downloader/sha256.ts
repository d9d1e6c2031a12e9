/**
 * The frame's SHA-256: hash-wasm's WebAssembly hasher, synchronous once loaded (crypto.subtle is
 * asynchronous, and the core verifies units and the object synchronously). In Chromium the core's
 * portable SHA-256 ran at a third of Node's speed (79 against 226 MB/s), and the check of the
 * whole object sits on every download's critical path (28-46 ms per 2 MB segment).
 */
import { createSHA256 } from 'hash-wasm';

export type Sha256 = (data: Uint8Array) => Uint8Array;

/** Loads the hasher once; each call hashes its input from a fresh state (calls never interleave). */
export async function loadSha256(): Promise<Sha256> {
  const hasher = await createSHA256();
  return (data) => hasher.init().update(data).digest('binary');
}
