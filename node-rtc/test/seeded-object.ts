/** The object the loopback tests' source serves and their receiver checks: `length` seeded bytes. */
import { seededRandom } from '@mutp/shared';

export function seededObject(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const object = new Uint8Array(length);
  for (let i = 0; i < length; i++) object[i] = random() & 0xff;
  return object;
}
