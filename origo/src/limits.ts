import { LRUCache } from 'lru-cache';

/** Token bucket: `ratePerSecond` tokens refill continuously up to `burst`; each message takes one. */
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

  /** Takes one token; false when the bucket is empty (the caller drops or refuses). */
  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.ratePerSecond);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
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

  /** Takes one token from `key`'s bucket; false when it is empty. */
  take(key: string, ratePerSecond: number, burst: number): boolean {
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = new TokenBucket(ratePerSecond, burst);
      this.buckets.set(key, bucket);
    }
    return bucket.take();
  }
}
