/**
 * Proxy selection policy (docs/signalling.md, "Selection policy"):
 *
 * 1. Eligible: supports the requested mode (any proxy when none is asked), not in `exclude`,
 *    activeTransfers < maxTransfers (a full proxy is never offered), and not draining.
 * 2. Capacity is what clients *measured* (measuredBps, the median over recent clients' download
 *    records, throughput.ts) when known. Otherwise the proxy's claim is only a prior: free claimed
 *    capacity = capacityBps − uploadBps (never below 0), a proxy of unknown capacity (capacityBps
 *    0) ranks as the median free capacity of the eligible proxies that claim one, and the prior
 *    is capped at the median measured capacity of the eligible measured proxies, so an inflated
 *    claim at most ties a typical measured proxy until it is measured itself.
 * 3. Score = free capacity / (1 + activeTransfers + recentPicks): the share of the spare upload a
 *    new transfer could expect, so more spare capacity and fewer transfers both rank higher;
 *    offers made since the proxy's last heartbeat count as transfers it will soon have.
 * 4. Sorted by score, proxies are grouped: a group starts at the best remaining score and takes
 *    every proxy scoring within 10 % of it. Each group is shuffled, then the first `count` are
 *    returned. Near-equals are thus picked at random (clients spread over them between
 *    heartbeats) while a clearly better proxy always comes first.
 * 5. One pick is independent of the scores: when two or more proxies are asked for and more are
 *    eligible, the last place goes to a proxy drawn uniformly from those not already chosen.
 *    Whatever moves the scores (forged records, inflated claims, a burst of heartbeats), it
 *    cannot pick every source of a download: a download's sources must all agree on the object
 *    (the client's quorum), so a rogue pair ranked first still meets a source nobody chose.
 * 6. Locality (issue 34): with the client's region known (clientRegion below), rules 2-5 run over
 *    the eligible proxies of that region, and those that declared none (a mixed fleet: their
 *    region is unknown, so they are near everyone). When these cannot fill the request, every one
 *    of them is taken and the rest is chosen from the other proxies by rules 2-5: a download then
 *    still has a source no score chose (the near ones are taken whatever their scores).
 * 7. Operators (issue 31, operator-spread.ts): no operator holds more than ceil(count/2) of the
 *    proxies offered while other operators' eligible proxies exist; the places its surplus held
 *    are chosen again by rules 1-6 without them. A proxy of no named operator is its own.
 *
 * This module is the reference: the rules in their plainest form, read by tests and by
 * selection-bench. What origo runs is selection-index.ts (with offer-index.ts and prefix-table.ts),
 * which implements the same rules without walking the fleet per request. A rule changed here
 * must change there too; origo/test/selection-index.test.ts compares the two's choices
 * statistically on seeded fleets and fails when they drift apart.
 */
import ipaddr from 'ipaddr.js';
import { Random, randomBelow } from '@mutp/shared';
import { operatorKey, spreadOverOperators } from './operator-spread';
import type { ProxyLoad, SelectionRequest } from './selection-types';

export type { ProxyLoad, SelectableMode, SelectionRequest } from './selection-types';

/** Eligible proxies a hinted region needs before the hint counts (SelectionRequest.regionHint). */
export const MIN_HINTED_REGION_PROXIES = 3;

/** Scores within this fraction of a group's best count as equal and are shuffled together. */
export const NEAR_EQUAL_FRACTION = 0.1;

export function selectProxies<P extends ProxyLoad>(
  proxies: Iterable<P>,
  request: SelectionRequest,
  random: Random,
): P[] {
  const fleet = [...proxies];
  return spreadOverOperators(
    request,
    (r) => selectByLoad(fleet, r, random),
    (operators) => fleet.filter((p) => operators.has(operatorKey(p))).map((p) => p.proxyId),
  );
}

/** Rules 1-6. */
function selectByLoad<P extends ProxyLoad>(proxies: readonly P[], request: SelectionRequest, random: Random): P[] {
  const excluded = new Set(request.exclude ?? []);
  const eligible: P[] = [];
  for (const p of proxies) {
    if (excluded.has(p.proxyId)) continue;
    if (request.mode !== undefined && !p.modes.has(request.mode)) continue;
    if (p.activeTransfers >= p.maxTransfers) continue;
    if (p.draining === true) continue;
    eligible.push(p);
  }
  if (eligible.length === 0 || request.count <= 0) return [];
  const region = request.region ?? hintedRegion(eligible, request.regionHint);
  if (region === undefined) return rank(eligible, request.count, random);
  const near: P[] = [];
  const far: P[] = [];
  for (const p of eligible) (p.region === undefined || p.region === region ? near : far).push(p);
  if (near.length >= request.count || far.length === 0) return rank(near, request.count, random);
  // The region cannot fill the request: all of it (ranked, best first), then the best of the rest.
  return [...rank(near, near.length, random), ...rank(far, request.count - near.length, random)];
}

/** Rules 2-5 over `eligible` (non-empty): the `count` proxies offered, best first. */
function rank<P extends ProxyLoad>(eligible: P[], count: number, random: Random): P[] {
  if (eligible.length === 0 || count <= 0) return [];
  const known = eligible.filter((p) => p.capacityBps > 0).map(freeCapacity);
  const unknownFree = known.length > 0 ? median(known) : 1;
  const measured = eligible.flatMap((p) => (p.measuredBps !== undefined ? [p.measuredBps] : []));
  const priorCap = measured.length > 0 ? median(measured) : Infinity;
  const scores = new Float64Array(eligible.length);
  let best = -Infinity;
  eligible.forEach((proxy, i) => {
    const claimed = Math.min(priorCap, proxy.capacityBps > 0 ? freeCapacity(proxy) : unknownFree);
    const capacity = proxy.measuredBps ?? claimed;
    scores[i] = capacity / (1 + proxy.activeTransfers + (proxy.recentPicks ?? 0));
    if (scores[i] > best) best = scores[i];
  });
  // With several places asked for and more eligible, the last one is drawn below (rule 5).
  const drawn = count >= 2 && eligible.length > count;
  const ranked = drawn ? count - 1 : count;
  // The first group (rule 4) alone fills the ranked places: a random ordered sample of it is what
  // shuffling it and taking the first would give, without sorting every eligible proxy.
  const floor = best * (1 - NEAR_EQUAL_FRACTION);
  const first: number[] = [];
  for (let i = 0; i < scores.length; i++) if (scores[i] >= floor) first.push(i);
  if (first.length >= ranked) {
    for (let i = 0; i < ranked; i++) {
      const j = i + randomBelow(random, first.length - i);
      [first[i], first[j]] = [first[j], first[i]];
    }
    const top = first.slice(0, ranked).map((i) => eligible[i]);
    if (!drawn) return top;
    for (;;) {
      const pick = eligible[randomBelow(random, eligible.length)];
      if (!top.includes(pick)) return [...top, pick];
    }
  }
  const scored = eligible.map((proxy, i) => ({ proxy, score: scores[i] }));
  scored.sort((a, b) => b.score - a.score);
  const ordered: P[] = [];
  let start = 0;
  while (start < scored.length && ordered.length < ranked) {
    const floor = scored[start].score * (1 - NEAR_EQUAL_FRACTION);
    let end = start + 1;
    while (end < scored.length && scored[end].score >= floor) end++;
    const group = scored.slice(start, end).map((s) => s.proxy);
    shuffle(group, random);
    ordered.push(...group);
    start = end;
  }
  const top = ordered.slice(0, ranked);
  if (!drawn) return top;
  // Uniform over the eligible proxies not ranked in: draw until one is not taken (at most
  // count - 1 of more than count are, so this ends fast).
  for (;;) {
    const pick = scored[randomBelow(random, scored.length)].proxy;
    if (!top.includes(pick)) return [...top, pick];
  }
}

function hintedRegion(eligible: readonly ProxyLoad[], hint: string | undefined): string | undefined {
  if (hint === undefined) return undefined;
  let declared = 0;
  for (const p of eligible) if (p.region === hint) declared++;
  return declared >= MIN_HINTED_REGION_PROXIES ? hint : undefined;
}

export type Prefix = [ipaddr.IPv4 | ipaddr.IPv6, number];
/** Each declared prefix list parsed once (a remote proxy's list is a new array per registry read). */
const parsed = new WeakMap<readonly string[], Prefix[]>();

/**
 * The client's region from its address: the region of the longest declared prefix that holds it
 * (rule 6). Two regions declaring that same longest prefix: none (origo does not guess). An
 * address in no declared prefix (or not an IP address): none.
 */
export function clientRegion(proxies: Iterable<ProxyLoad>, address: string): string | undefined {
  const client = parseAddress(address);
  if (client === undefined) return undefined;
  let longest = -1;
  let region: string | undefined;
  for (const p of proxies) {
    if (p.region === undefined || p.prefixes === undefined || p.prefixes.length === 0) continue;
    for (const [range, bits] of prefixesOf(p.prefixes)) {
      if (bits < longest || range.kind() !== client.kind() || !client.match(range, bits)) continue;
      if (bits > longest) region = p.region;
      else if (region !== p.region) region = undefined;
      longest = bits;
    }
  }
  return region;
}

/** A declared prefix list parsed (invalid entries left out), once per list object. */
export function prefixesOf(list: readonly string[]): Prefix[] {
  let prefixes = parsed.get(list);
  if (prefixes === undefined) {
    prefixes = list.flatMap((cidr) => {
      try {
        return [ipaddr.parseCIDR(cidr)];
      } catch {
        return [];
      }
    });
    parsed.set(list, prefixes);
  }
  return prefixes;
}

/** A client address as selection reads it (zone dropped, IPv4-mapped as IPv4), or undefined. */
export function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const bare = address.split('%')[0];
  return ipaddr.isValid(bare) ? unmapped(ipaddr.parse(bare)) : undefined;
}

/** An IPv4-mapped IPv6 address (a dual-stack socket's view of an IPv4 client) as IPv4. */
function unmapped(a: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress() ? (a as ipaddr.IPv6).toIPv4Address() : a;
}

function freeCapacity(p: ProxyLoad): number {
  return Math.max(0, p.capacityBps - p.uploadBps);
}

function median(values: number[]): number {
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Fisher–Yates, in place. */
function shuffle<T>(items: T[], random: Random): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = randomBelow(random, i + 1);
    [items[i], items[j]] = [items[j], items[i]];
  }
}
