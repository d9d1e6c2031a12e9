/**
 * The chain of shield proxies a miss has come through, so that parents set up in a cycle (A's
 * parent B whose parent is A) or in too long a line do not pass a request round: each child
 * signs the chain before it into its request (shield-auth.ts `via`), a parent's endpoint refuses a
 * request whose chain names itself or is longer than MAX_SHIELD_CHAIN (508, the child then asks
 * the origin), and a parent that is itself a child carries the chain on to its own parent.
 *
 * A request crosses the parent's cache between its endpoint and its own shield fetch (the cache
 * starts the fetch): the chain travels in async context from the endpoint's lookup to the fetch
 * that lookup starts. A fetch another request started (joined, not started) keeps that one's
 * chain: its parents were asked already.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** Proxies a request may pass through as children, its first asker included (tiers deeper than this are refused). */
export const MAX_SHIELD_CHAIN = 4;

const chain = new AsyncLocalStorage<readonly string[]>();

/** Runs `lookup` (a shield endpoint's cache lookup) as part of a request that came through `through`. */
export function withShieldChain<T>(through: readonly string[], lookup: () => T): T {
  return chain.run(through, lookup);
}

/** The children a miss started in this context came through (empty: a client's own miss). */
export function currentShieldChain(): readonly string[] {
  return chain.getStore() ?? [];
}

/** Why a parent named `self` must not serve a request that came through `through` (undefined: it may). */
export function chainProblem(self: string, through: readonly string[]): string | undefined {
  if (through.includes(self)) return `loop: ${[...through, self].join(' > ')}`;
  if (through.length > MAX_SHIELD_CHAIN) return `chain of ${through.length} children, at most ${MAX_SHIELD_CHAIN}`;
  return undefined;
}
