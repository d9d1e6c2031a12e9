/**
 * Which input is number i of a parser in a run: inputs come in batches drawn by fast-check from a
 * seed derived from (run seed, parser name, batch), so any input can be drawn again from the run
 * seed alone, in the worker that checks it or in the runner that reports a hang.
 */
import fc from 'fast-check';
import { FuzzTarget } from './target';

export const BATCH_SIZE = 256;

/** 32-bit FNV-1a of the name, then mixed with the seed and batch (murmur3's finaliser). */
export function batchSeed(runSeed: number, parser: string, batch: number): number {
  let h = 0x811c9dc5;
  for (const c of parser) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193);
  for (const v of [runSeed >>> 0, batch >>> 0, Math.floor(batch / 2 ** 32)]) {
    h = Math.imul(h ^ v, 0x9e3779b1);
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h | 0;
}

export function drawBatch<T>(target: FuzzTarget<T>, runSeed: number, batch: number): T[] {
  return fc.sample(target.inputs, { seed: batchSeed(runSeed, target.name, batch), numRuns: BATCH_SIZE });
}

/** Input `index` of `target` in the run with `runSeed`. */
export function drawInput<T>(target: FuzzTarget<T>, runSeed: number, index: number): T {
  return drawBatch(target, runSeed, Math.floor(index / BATCH_SIZE))[index % BATCH_SIZE];
}
