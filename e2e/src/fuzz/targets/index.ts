/** Every parser `npm run fuzz` runs, in the order of its summary. */
import { createRequire } from 'node:module';
import { FuzzTarget } from '../target';
import { addressTarget } from './address';
import { endpointTarget } from './endpoint';
import { rlncTarget, wirehairTarget } from './codecs';
import { manifestTarget } from './manifest';
import { rangeTarget } from './range';
import { signallingTarget } from './signalling';
import { wireTarget } from './wire';

export const TARGETS: readonly FuzzTarget<never>[] = [
  signallingTarget,
  wireTarget,
  endpointTarget,
  rangeTarget,
  manifestTarget,
  addressTarget,
  rlncTarget,
  wirehairTarget,
] as unknown as FuzzTarget<never>[];

export const TARGET_NAMES: readonly string[] = TARGETS.map((t) => t.name);

export function targetByName(name: string, targets: readonly FuzzTarget<never>[] = TARGETS): FuzzTarget<unknown> {
  const target = targets.find((t) => t.name === name);
  if (!target) throw new Error(`unknown parser ${name} (known: ${targets.map((t) => t.name).join(', ')})`);
  return target as unknown as FuzzTarget<unknown>;
}

/**
 * The targets of another module exporting `TARGETS` (the runner's own tests give it targets that
 * crash and hang on purpose); this module's when `modulePath` is undefined.
 */
export function loadTargets(modulePath: string | undefined): readonly FuzzTarget<never>[] {
  if (modulePath === undefined) return TARGETS;
  return (createRequire(__filename)(modulePath) as { TARGETS: readonly FuzzTarget<never>[] }).TARGETS;
}
