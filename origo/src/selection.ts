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
 */
import { Random, randomBelow } from '@mutp/shared';

export type SelectableMode = 'uncoded' | 'rlnc' | 'fountain';

/** What selection needs to know about a proxy. */
export interface ProxyLoad {
  proxyId: string;
  modes: ReadonlySet<SelectableMode>;
  capacityBps: number;
  /** Throughput clients measured (bytes/s), when enough of them reported. */
  measuredBps?: number;
  uploadBps: number;
  activeTransfers: number;
  maxTransfers: number;
  /** The proxy is shutting down (its heartbeat said so): never offered. */
  draining?: boolean;
  /**
   * Offers of this proxy since its last heartbeat, by every origo instance: counted like
   * transfers in the score (not in eligibility, as offers need not become transfers), so clients
   * asking between two heartbeats spread over near-equal proxies instead of piling onto one.
   */
  recentPicks?: number;
}

export interface SelectionRequest {
  count: number;
  mode?: SelectableMode;
  exclude?: readonly string[];
}

/** Scores within this fraction of a group's best count as equal and are shuffled together. */
export const NEAR_EQUAL_FRACTION = 0.1;

export function selectProxies<P extends ProxyLoad>(
  proxies: Iterable<P>,
  request: SelectionRequest,
  random: Random,
): P[] {
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

  const known = eligible.filter((p) => p.capacityBps > 0).map(freeCapacity);
  const unknownFree = known.length > 0 ? median(known) : 1;
  const measured = eligible.flatMap((p) => (p.measuredBps !== undefined ? [p.measuredBps] : []));
  const priorCap = measured.length > 0 ? median(measured) : Infinity;
  const scored = eligible.map((proxy) => {
    const claimed = Math.min(priorCap, proxy.capacityBps > 0 ? freeCapacity(proxy) : unknownFree);
    const capacity = proxy.measuredBps ?? claimed;
    return { proxy, score: capacity / (1 + proxy.activeTransfers + (proxy.recentPicks ?? 0)) };
  });
  scored.sort((a, b) => b.score - a.score);

  // With several places asked for and more eligible, the last one is drawn below (rule 5).
  const drawn = request.count >= 2 && scored.length > request.count;
  const ranked = drawn ? request.count - 1 : request.count;
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

function freeCapacity(p: ProxyLoad): number {
  return Math.max(0, p.capacityBps - p.uploadBps);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
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
