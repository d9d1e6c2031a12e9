/**
 * Objects fetched from origins, kept in a byte-bounded LRU with their SHA-256 (the digest MUTP's
 * META reports). Concurrent requests for one URL share one origin fetch; failures are not cached
 * (the next request tries the origin again).
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export interface CachedObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes. */
  digest: Uint8Array;
  contentType?: string;
}

export interface FetchResult {
  bytes: Uint8Array;
  contentType?: string;
}

export type ObjectFetcher = (url: string) => Promise<FetchResult>;

export interface ObjectCacheStats {
  hits: number;
  misses: number;
  /** Requests that joined a fetch already under way. */
  joined: number;
  failures: number;
  entries: number;
  bytes: number;
  maxBytes: number;
  inFlight: number;
}

export interface ObjectCacheOptions {
  maxBytes: number;
  fetch: ObjectFetcher;
  /** Called once per lookup: 'hit' (cached), 'miss' (fetch started), 'joined' (fetch shared). */
  onLookup?: (outcome: 'hit' | 'miss' | 'joined') => void;
}

export function sha256(bytes: Uint8Array): Uint8Array {
  const digest = createHash('sha256').update(bytes).digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

export class ObjectCache {
  private readonly lru: LRUCache<string, CachedObject> | undefined;
  private readonly inFlight = new Map<string, Promise<CachedObject>>();
  private readonly counters = { hits: 0, misses: 0, joined: 0, failures: 0 };

  constructor(private readonly options: ObjectCacheOptions) {
    // A cache of 0 bytes stores nothing (every request goes to the origin, still deduplicated).
    this.lru =
      options.maxBytes > 0
        ? new LRUCache<string, CachedObject>({
            maxSize: options.maxBytes,
            // Empty objects still take a slot: count them as one byte.
            sizeCalculation: (value) => Math.max(1, value.bytes.byteLength),
          })
        : undefined;
  }

  /** The object at `url` (the cache key as given: callers pass a normalised href). */
  get(url: string): Promise<CachedObject> {
    const cached = this.lru?.get(url);
    if (cached) {
      this.counters.hits++;
      this.options.onLookup?.('hit');
      return Promise.resolve(cached);
    }
    const pending = this.inFlight.get(url);
    if (pending) {
      this.counters.joined++;
      this.options.onLookup?.('joined');
      return pending;
    }
    this.counters.misses++;
    this.options.onLookup?.('miss');
    const fetching = this.load(url);
    this.inFlight.set(url, fetching);
    return fetching;
  }

  private async load(url: string): Promise<CachedObject> {
    try {
      const fetched = await this.options.fetch(url);
      const entry: CachedObject = {
        bytes: fetched.bytes,
        digest: sha256(fetched.bytes),
        contentType: fetched.contentType,
      };
      // An object larger than the whole cache is served but not stored (lru-cache skips it).
      this.lru?.set(url, entry);
      return entry;
    } catch (e) {
      this.counters.failures++;
      throw e;
    } finally {
      this.inFlight.delete(url);
    }
  }

  has(url: string): boolean {
    return this.lru?.has(url) ?? false;
  }

  stats(): ObjectCacheStats {
    return {
      ...this.counters,
      entries: this.lru?.size ?? 0,
      bytes: this.lru?.calculatedSize ?? 0,
      maxBytes: this.options.maxBytes,
      inFlight: this.inFlight.size,
    };
  }

  clear(): void {
    this.lru?.clear();
  }
}
