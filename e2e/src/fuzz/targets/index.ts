/** Every parser `npm run fuzz` runs, in the order of its summary. */
import { FuzzTarget } from '../target';
import { addressTarget } from './address';
import { rlncTarget, wirehairTarget } from './codecs';
import { manifestTarget } from './manifest';
import { rangeTarget } from './range';
import { signallingTarget } from './signalling';
import { wireTarget } from './wire';

export const TARGETS: readonly FuzzTarget<never>[] = [
  signallingTarget,
  wireTarget,
  rangeTarget,
  manifestTarget,
  addressTarget,
  rlncTarget,
  wirehairTarget,
] as unknown as FuzzTarget<never>[];

export const TARGET_NAMES: readonly string[] = TARGETS.map((t) => t.name);

export function targetByName(name: string): FuzzTarget<unknown> {
  const target = TARGETS.find((t) => t.name === name);
  if (!target) throw new Error(`unknown parser ${name} (known: ${TARGET_NAMES.join(', ')})`);
  return target as unknown as FuzzTarget<unknown>;
}
