/**
 * Objects fetched from origins, kept in a byte-bounded LRU with their SHA-256 (the digest MUTP's
 * META reports) and the encoders their transfers share. Concurrent requests for one URL share one
 * origin fetch, and that fetch lives exactly as long as someone waits for it: when the last
 * waiter withdraws (a STOP, a closed peer, an aborted HTTP request) the origin request is
 * aborted. Fetches under way are capped in number, and the bytes they buffer are charged to the
 * proxy's memory budget. Failures are not cached (the next request tries the origin again).
 *
 * Memory outside the LRU is charged to the budget too: an object evicted while transfers still
 * send it stays charged until the last of them lets go.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { LayoutDigests, MemoryBudget, SharedEncoders } from '@mutp/shared';
import { cachePolicy } from './cache-policy';
import { ServeError } from './errors';

export interface CachedObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes. */
  digest: Uint8Array;
  contentType?: string;
  /** Encoders shared by the transfers of this object (one codec copy per layout). */
  encoders: SharedEncoders;
  /** Integrity digests per layout, computed once for all transfers of this object. */
  digests: LayoutDigests;
  /** Whether the LRU accounts for the bytes (an object larger than the cache is served, not kept). */
  readonly cached: boolean;
  /** Marks one user (a transfer) of the bytes; call the returned function when it is done. */
  hold(): () => void;
}

export interface FetchResult {
  bytes: Uint8Array;
  contentType?: string;
  /** The origin's Cache-Control: no-store / private / no-cache keep it out, max-age bounds it. */
  cacheControl?: string;
}

export interface FetchControl {
  /** Aborted when nobody waits for the fetch any more. */
  signal: AbortSignal;
  /** Called as body bytes arrive; false means the memory budget is full and the fetch must stop. */
  reserve(bytes: number): boolean;
}

export type ObjectFetcher = (url: string, control: FetchControl) => Promise<FetchResult>;

export interface ObjectCacheStats {
  hits: number;
  misses: number;
  /** Requests that joined a fetch already under way. */
  joined: number;
  failures: number;
  /** Origin fetches aborted because their last waiter withdrew. */
  abandoned: number;
  /** Requests refused because `maxConcurrentFetches` fetches were under way. */
  fetchesRefused: number;
  /** Objects served but not stored because the origin's Cache-Control said so. */
  uncacheable: number;
  entries: number;
  bytes: number;
  maxBytes: number;
  inFlight: number;
  /** Bytes of evicted objects that transfers still hold (charged to the memory budget). */
  heldAfterEviction: number;
}

export interface ObjectCacheOptions {
  maxBytes: number;
  fetch: ObjectFetcher;
  /** Budget for fetch buffers, encoders and evicted objects still in use (default: unlimited). */
  budget?: MemoryBudget;
  /** Origin fetches under way at once (default 32). */
  maxConcurrentFetches?: number;
  /** Called once per lookup: 'hit' (cached), 'miss' (fetch started), 'joined' (fetch shared). */
  onLookup?: (outcome: 'hit' | 'miss' | 'joined') => void;
  /** Clock of the max-age lifetimes, ms (tests); default performance.now. */
  now?: () => number;
}

export const DEFAULT_MAX_CONCURRENT_FETCHES = 32;

export function sha256(bytes: Uint8Array): Uint8Array {
  const digest = createHash('sha256').update(bytes).digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

/** A cache entry and its users; `evicted` once the LRU dropped it. */
class Entry implements CachedObject {
  users = 0;
  evicted = false;
  cached = false;
  constructor(
    readonly bytes: Uint8Array,
    readonly digest: Uint8Array,
    readonly contentType: string | undefined,
    readonly encoders: SharedEncoders,
    readonly digests: LayoutDigests,
    private readonly heldOutside: (entry: Entry, held: boolean) => void,
  ) {}

  hold(): () => void {
    // Users of an object the LRU no longer accounts for pay for its bytes while they hold it.
    if (this.users++ === 0 && this.evicted) this.heldOutside(this, true);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.users === 0 && this.evicted) this.heldOutside(this, false);
    };
  }
}

interface Fetching {
  promise: Promise<Entry>;
  controller: AbortController;
  /** Waiters with a signal still waiting; the fetch is aborted when they all withdrew. */
  waiters: number;
  /** Some caller waits without a signal: never abort. */
  pinned: boolean;
}

export class ObjectCache {
  private readonly lru: LRUCache<string, Entry> | undefined;
  private readonly inFlight = new Map<string, Fetching>();
  private readonly budget: MemoryBudget;
  private readonly maxConcurrentFetches: number;
  private heldAfterEviction = 0;
  private readonly counters = {
    hits: 0,
    misses: 0,
    joined: 0,
    failures: 0,
    abandoned: 0,
    fetchesRefused: 0,
    uncacheable: 0,
  };

  constructor(private readonly options: ObjectCacheOptions) {
    this.budget = options.budget ?? new MemoryBudget(Number.MAX_SAFE_INTEGER);
    this.maxConcurrentFetches = options.maxConcurrentFetches ?? DEFAULT_MAX_CONCURRENT_FETCHES;
    // A cache of 0 bytes stores nothing (every request goes to the origin, still deduplicated).
    this.lru =
      options.maxBytes > 0
        ? new LRUCache<string, Entry>({
            maxSize: options.maxBytes,
            // Empty objects still take a slot: count them as one byte.
            sizeCalculation: (value) => Math.max(1, value.bytes.byteLength),
            perf: options.now ? { now: options.now } : undefined,
            // Read the clock on every check (a lookup per transfer, not per datagram).
            ttlResolution: 0,
            // Evicted, expired, replaced or deleted: the LRU no longer accounts for it.
            dispose: (entry) => this.evicted(entry),
          })
        : undefined;
  }

  /**
   * The object at `url` (the cache key as given: callers pass a normalised href). With a signal,
   * the caller may withdraw: its promise rejects, and the origin fetch stops if nobody else waits.
   */
  get(url: string, signal?: AbortSignal): Promise<CachedObject> {
    if (signal?.aborted) return Promise.reject(withdrawn());
    const cached = this.lru?.get(url);
    if (cached) {
      this.counters.hits++;
      this.options.onLookup?.('hit');
      return Promise.resolve(cached);
    }
    let fetching = this.inFlight.get(url);
    if (fetching) {
      this.counters.joined++;
      this.options.onLookup?.('joined');
    } else {
      if (this.inFlight.size >= this.maxConcurrentFetches) {
        this.counters.fetchesRefused++;
        return Promise.reject(
          new ServeError('overloaded', `proxy at its limit of ${this.maxConcurrentFetches} origin fetches`),
        );
      }
      this.counters.misses++;
      this.options.onLookup?.('miss');
      const controller = new AbortController();
      fetching = { promise: this.load(url, controller), controller, waiters: 0, pinned: false };
      this.inFlight.set(url, fetching);
    }
    return this.wait(fetching, signal);
  }

  private wait(fetching: Fetching, signal?: AbortSignal): Promise<CachedObject> {
    if (!signal) {
      fetching.pinned = true;
      return fetching.promise;
    }
    fetching.waiters++;
    return new Promise<CachedObject>((resolve, reject) => {
      let waiting = true;
      const leave = () => {
        if (!waiting) return;
        waiting = false;
        signal.removeEventListener('abort', onAbort);
        fetching.waiters--;
      };
      const onAbort = () => {
        leave();
        reject(withdrawn());
        if (fetching.waiters === 0 && !fetching.pinned && !fetching.controller.signal.aborted) {
          this.counters.abandoned++;
          fetching.controller.abort();
        }
      };
      signal.addEventListener('abort', onAbort);
      fetching.promise.then(
        (entry) => {
          leave();
          resolve(entry);
        },
        (e: unknown) => {
          leave();
          reject(e);
        },
      );
    });
  }

  private async load(url: string, controller: AbortController): Promise<Entry> {
    let buffered = 0;
    const reserve = (bytes: number) => {
      if (!this.budget.tryTake(bytes)) return false;
      buffered += bytes;
      return true;
    };
    try {
      const fetched = await this.options.fetch(url, { signal: controller.signal, reserve });
      const entry = new Entry(
        fetched.bytes,
        sha256(fetched.bytes),
        fetched.contentType,
        new SharedEncoders(fetched.bytes, this.budget),
        new LayoutDigests(fetched.bytes, sha256),
        (e, held) => this.heldOutside(e, held),
      );
      // An object larger than the whole cache is served but not stored (lru-cache skips it), as
      // is one the origin marked uncacheable.
      const policy = cachePolicy(fetched.cacheControl);
      if (policy.store) {
        this.lru?.set(url, entry, { ttl: policy.ttlMs });
        entry.cached = this.lru?.get(url) === entry;
      } else this.counters.uncacheable++;
      return entry;
    } catch (e) {
      this.counters.failures++;
      throw e;
    } finally {
      this.budget.give(buffered);
      this.inFlight.delete(url);
    }
  }

  /** The LRU dropped an entry: transfers still sending it keep it charged to the budget. */
  private evicted(entry: Entry): void {
    if (entry.evicted || !entry.cached) return;
    entry.evicted = true;
    if (entry.users > 0) this.heldOutside(entry, true);
  }

  /**
   * Charges (or gives back) an evicted object's bytes. Charged even past the budget's limit: the
   * bytes exist whether or not the budget likes it, and new admissions wait until they are gone.
   */
  private heldOutside(entry: Entry, held: boolean): void {
    const n = entry.bytes.byteLength;
    if (held) this.budget.takeAnyway(n);
    else this.budget.give(n);
    this.heldAfterEviction += held ? n : -n;
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
      heldAfterEviction: this.heldAfterEviction,
    };
  }

  clear(): void {
    this.lru?.clear();
  }
}

function withdrawn(): ServeError {
  return new ServeError('internal', 'request withdrawn');
}
