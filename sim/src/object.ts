import { seededRandom } from '@mutp/shared';

/** Deterministic pseudo-random object content (incompressible, like video). */
export function makeObject(bytes: number, seed: number): Uint8Array {
  const object = new Uint8Array(bytes);
  const words = new Uint32Array(object.buffer, 0, bytes >>> 2);
  const random = seededRandom(seed ^ 0x5eed0b1e);
  for (let i = 0; i < words.length; i++) words[i] = random();
  for (let i = words.length * 4; i < bytes; i++) object[i] = random() & 0xff;
  return object;
}
