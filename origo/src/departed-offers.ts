/**
 * The proxies origo offered clients whose session ended, for a while: a client that comes back
 * with its token (after a disconnection, its old socket may close at origo before the new one
 * says hello) keeps the right to stage at, report and record the proxies it holds, instead of
 * having every hint refused `not-offered`. Bounded: the most recent ids per client, the most
 * recent clients, and only for `ttlMs`.
 */
export interface DepartedOffersLimits {
  /** Clients remembered at once (the oldest goes first). */
  maxClients: number;
  /** Ids kept per client (its most recent offers; a set is at most 32 proxies). */
  maxIdsPerClient: number;
  ttlMs: number;
}

export const DEFAULT_DEPARTED_OFFERS: DepartedOffersLimits = {
  maxClients: 4096,
  maxIdsPerClient: 32,
  ttlMs: 10 * 60_000,
};

export class DepartedOffers {
  private readonly byClient = new Map<string, { ids: string[]; at: number }>();

  constructor(private readonly limits: DepartedOffersLimits = DEFAULT_DEPARTED_OFFERS) {}

  /** `clientId`'s session ended at `now`; `offered` in insertion order (the most recent last). */
  remember(clientId: string, offered: Iterable<string>, now: number): void {
    const ids = [...offered].slice(-this.limits.maxIdsPerClient);
    this.byClient.delete(clientId);
    if (ids.length === 0) return;
    this.byClient.set(clientId, { ids, at: now });
    while (this.byClient.size > this.limits.maxClients) this.byClient.delete(this.byClient.keys().next().value!);
  }

  /** What `clientId` was offered before its session ended, if that was within the TTL; forgotten here. */
  take(clientId: string, now: number): string[] {
    const entry = this.byClient.get(clientId);
    this.byClient.delete(clientId);
    return entry !== undefined && now - entry.at <= this.limits.ttlMs ? entry.ids : [];
  }

  get size(): number {
    return this.byClient.size;
  }
}
