import { LRUCache } from 'lru-cache';

/** Token bucket: `ratePerSecond` tokens refill continuously up to `burst`; each message takes one (or `n`). */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.last = now();
  }

  /** Takes `n` tokens; false (taking none) when fewer are left (the caller drops or refuses). */
  take(n = 1): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.ratePerSecond);
    this.last = t;
    if (this.tokens < n) return false;
    this.tokens -= n;
    return true;
  }
}

/**
 * Token buckets by key (a client id, an address), created on first use at the given rate. The
 * buckets outlive sockets (a client reconnecting keeps its budget); the least recently used are
 * forgotten past `max` keys.
 */
export class BudgetBook {
  private readonly buckets: LRUCache<string, TokenBucket>;

  constructor(max = 100_000) {
    this.buckets = new LRUCache<string, TokenBucket>({ max });
  }

  /** Takes `n` tokens from `key`'s bucket; false when fewer are left. */
  take(key: string, ratePerSecond: number, burst: number, n = 1): boolean {
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = new TokenBucket(ratePerSecond, burst);
      this.buckets.set(key, bucket);
    }
    return bucket.take(n);
  }
}
