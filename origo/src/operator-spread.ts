/**
 * Offers spread over operators (issue 31, independence; docs/signalling.md "Selection policy",
 * rule 7): of the N proxies offered a client, no operator holds more than ceil(N/2) while other
 * operators' eligible proxies exist, so one operator's proxies cannot make a download's quorum
 * alone. A pass over what selection chose: its picks are kept in their order while their operator
 * has room (the random place of rule 5 first, so the spread never undoes it), and the places
 * left are chosen again by the same rules with those operators' picks excluded. When no other
 * operator has an eligible proxy, the places go to the dropped picks (availability over
 * independence) and the offer says so (operatorsConcentrated).
 */
import type { ProxyLoad, SelectionRequest } from './selection-types';

/** Selection rounds excluding only what was picked before the full operators' proxies are listed. */
export const MAX_SPREAD_ROUNDS = 4;

/** The operator a proxy counts for: the one origo's keys name, else itself. */
export function operatorKey(p: ProxyLoad): string {
  return p.operator ?? p.proxyId;
}

/** The most proxies of one operator an offer of `count` holds while others are eligible. */
export function operatorCap(count: number): number {
  return Math.ceil(count / 2);
}

/** Whether an offer holds more of one operator's proxies than operatorCap (no other was eligible). */
export function operatorsConcentrated(chosen: readonly ProxyLoad[]): boolean {
  const held = new Map<string, number>();
  for (const p of chosen) held.set(operatorKey(p), (held.get(operatorKey(p)) ?? 0) + 1);
  const cap = operatorCap(chosen.length);
  for (const n of held.values()) if (n > cap) return true;
  return false;
}

/**
 * `select(request)` with its picks spread over operators. `proxiesOf` lists the ids of the given
 * operators' proxies: read only after MAX_SPREAD_ROUNDS rounds that each excluded only the picks
 * refused before (an operator owning most of the top ranks), so a request costs at most that many
 * selections plus one walk of the fleet.
 */
export function spreadOverOperators<P extends ProxyLoad>(
  request: SelectionRequest,
  select: (request: SelectionRequest) => P[],
  proxiesOf: (operators: ReadonlySet<string>) => Iterable<string>,
): P[] {
  const first = select(request);
  const cap = operatorCap(request.count);
  const held = new Map<string, number>();
  const dropped: P[] = [];
  const roomFor = (p: P) => {
    const n = held.get(operatorKey(p)) ?? 0;
    if (n >= cap) {
      dropped.push(p);
      return false;
    }
    held.set(operatorKey(p), n + 1);
    return true;
  };
  // The last place is rule 5's random one (when drawn): it is counted first, so it stays.
  const last = first.length >= 2 ? first[first.length - 1] : undefined;
  const lastKept = last !== undefined && roomFor(last);
  const kept = first.slice(0, last !== undefined ? -1 : undefined).filter(roomFor);
  if (lastKept) kept.push(last);
  if (dropped.length === 0) return first;
  const exclude = new Set([...(request.exclude ?? []), ...first.map((p) => p.proxyId)]);
  for (let round = 0; kept.length < first.length && round <= MAX_SPREAD_ROUNDS; round++) {
    if (round === MAX_SPREAD_ROUNDS) {
      const full = new Set([...held].filter(([, n]) => n >= cap).map(([operator]) => operator));
      for (const id of proxiesOf(full)) exclude.add(id);
    }
    const more = select({ ...request, count: first.length - kept.length, exclude: [...exclude] });
    if (more.length === 0) break;
    for (const p of more) {
      exclude.add(p.proxyId);
      if (roomFor(p)) kept.push(p);
    }
  }
  // No other operator's proxy to take: the refused ones, best first, rather than fewer sources.
  for (const p of dropped) if (kept.length < first.length) kept.push(p);
  return kept;
}
