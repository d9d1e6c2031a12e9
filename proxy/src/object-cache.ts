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
 *
 * Byte ranges: entries are keyed by (href, range). A ranged lookup is served by the entry of
 * exactly that range, else by slicing any cached entry of the href that holds the range (a whole
 * object holds all of them), else by joining a fetch under way that will hold it, else by a new
 * origin fetch of exactly that range. So a player reading a file range by range, or twice, costs
 * the origin each byte once. A slice shares its parent's bytes (it holds the parent while used)
 * with its own digest, encoders and unit digests, memoised on the parent. Entries keep the
 * origin's validators (ETag, Last-Modified): a response of another version of the href drops the
 * entries of the old one, so slices are never cut from a resource that has changed.
 *
 * Here: lookups, ranges, the LRU and its index by href, loading an origin's answer. In their own
 * modules: one entry (cache-entry.ts), what entries cost the memory budget (entry-memory.ts), the
 * fetches under way (origin-fetches.ts), the range arithmetic (range-cache.ts).
 */
import { LRUCache } from 'lru-cache';
import { ByteRange, IdleEncoders, MemoryBudget, servedRangeProblem } from '@mutp/shared';
import { cachePolicy } from './cache-policy';
import { CachedObject, Entry } from './cache-entry';
import { EntryMemory } from './entry-memory';
import { ServeError } from './errors';
import { Fetching, ObjectFetcher, OriginFetches, withdrawn } from './origin-fetches';
import { locateRange, rangeKey, sameVersion, Validators } from './range-cache';

// What the cache hands out, for its users to import with it.
export { sha256 } from './cache-entry';
export type { CachedObject } from './cache-entry';

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
  /** Ranged requests served by slicing a larger object (cached or just fetched). */
  sliced: number;
  /** Entries dropped because a newer response of their href carried other validators. */
  staleDropped: number;
  /** Entries dropped because origo found their version stale in a conflict (dropVersion). */
  conflictDropped: number;
  /** Staged objects dropped because nobody asked for them in time (dropIfUnrequested). */
  unrequestedDropped: number;
  /** Body bytes received from origins (the whole body when an origin ignored a Range). */
  originBytes: number;
  /** Body bytes received from a shield parent instead of the origin (shield-fetch.ts). */
  parentBytes: number;
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
  /**
   * The fewest client networks that can have every origin fetch under way: a network starts at
   * most 1/n of maxConcurrentFetches (joining a fetch under way costs the origin nothing and is
   * not counted). Default 1.
   */
  minNetworks?: number;
  /**
   * Called when an origin fetch completes, with the network that started it and the bytes it
   * pulled and where from (the origin, or a shield parent in its place: a network's staging costs
   * the fleet either way).
   */
  onOriginBytes?: (network: string | undefined, bytes: number, source: 'origin' | 'parent') => void;
  /** Called once per lookup: 'hit' (cached), 'miss' (fetch started), 'joined' (fetch shared). */
  onLookup?: (outcome: 'hit' | 'miss' | 'joined') => void;
  /** Clock of the max-age lifetimes, ms (tests); default performance.now. */
  now?: () => number;
  /**
   * Bytes of encoders kept for the next transfer of a cached object after its last transfer
   * ended (shared/src/endpoint/idle-encoders.ts); they yield to any other use of the budget.
   * Default DEFAULT_IDLE_ENCODER_BYTES; 0 frees each encoder when its last transfer ends.
   */
  idleEncoderBytes?: number;
}

export const DEFAULT_IDLE_ENCODER_BYTES = 64 << 20;

/**
 * What a ranged entry costs the LRU besides its bytes (keys, digests, bookkeeping), so that a
 * flood of tiny ranges fills the cache after a bounded number of entries.
 */
export const RANGE_ENTRY_OVERHEAD_BYTES = 1024;
/** Ranged entries kept per href; past it the oldest goes (bounds the containment scan). */
export const MAX_RANGE_ENTRIES_PER_HREF = 1024;

export class ObjectCache {
  private readonly lru: LRUCache<string, Entry> | undefined;
  private readonly fetches: OriginFetches;
  /** Entries in the LRU per href (insertion order), for containment. */
  private readonly entriesByHref = new Map<string, Set<Entry>>();
  private readonly budget: MemoryBudget;
  private readonly memory: EntryMemory;
  private readonly counters = {
    hits: 0,
    misses: 0,
    joined: 0,
    failures: 0,
    uncacheable: 0,
    sliced: 0,
    staleDropped: 0,
    conflictDropped: 0,
    unrequestedDropped: 0,
    originBytes: 0,
    parentBytes: 0,
  };
  /** How misses are fetched: the origin fetch, or a shield around it (shieldWith). */
  private fetcher: ObjectFetcher;

  constructor(private readonly options: ObjectCacheOptions) {
    this.fetcher = options.fetch;
    this.budget = options.budget ?? new MemoryBudget(Number.MAX_SAFE_INTEGER);
    const idleBytes = options.idleEncoderBytes ?? DEFAULT_IDLE_ENCODER_BYTES;
    this.memory = new EntryMemory(this.budget, idleBytes > 0 ? new IdleEncoders(this.budget, idleBytes) : undefined);
    this.fetches = new OriginFetches(options.maxConcurrentFetches, options.minNetworks);
    // A cache of 0 bytes stores nothing (every request goes to the origin, still deduplicated).
    this.lru =
      options.maxBytes > 0
        ? new LRUCache<string, Entry>({
            maxSize: options.maxBytes,
            // Empty objects still take a slot: count them as one byte.
            sizeCalculation: (value) =>
              Math.max(1, value.bytes.byteLength) + (value.range ? RANGE_ENTRY_OVERHEAD_BYTES : 0),
            perf: options.now ? { now: options.now } : undefined,
            // Read the clock on every check (a lookup per transfer, not per datagram).
            ttlResolution: 0,
            // Evicted, expired, replaced or deleted: the LRU no longer accounts for it.
            dispose: (entry) => {
              this.unindex(entry);
              this.memory.evicted(entry);
            },
          })
        : undefined;
  }

  /**
   * The object at `url` (the cache key as given: callers pass a normalised href), or with
   * `range` those bytes of it (callers check the range with rangeProblem). With a signal, the
   * caller may withdraw: its promise rejects, and the origin fetch stops if nobody else waits.
   * `network` is the client network asking: a new origin fetch counts against its share.
   */
  get(url: string, signal?: AbortSignal, range?: ByteRange, network?: string): Promise<CachedObject> {
    return this.lookup(url, signal, range, network).then((entry) => {
      (entry as Entry).lookups++;
      return entry;
    });
  }

  /**
   * Misses are fetched through `wrap(origin fetch)` from now on: origin shielding (shield-fetch.ts)
   * asks a parent proxy and checks its bytes against the origin, which it still reaches through
   * the fetch it is given.
   */
  shieldWith(wrap: (origin: ObjectFetcher) => ObjectFetcher): void {
    this.fetcher = wrap(this.options.fetch);
  }

  /**
   * Drops `object` from the cache when no lookup returned it since `lookupsThen` (a staged object
   * nobody asked for: its bytes go to objects someone wants). A slice, or an entry the LRU no
   * longer holds, is left alone. Whether it was dropped.
   */
  dropIfUnrequested(object: CachedObject, lookupsThen: number): boolean {
    const entry = object as Entry;
    if (entry.parent !== undefined || entry.lookups !== lookupsThen || this.lru?.peek(entry.facts.key) !== entry)
      return false;
    this.lru.delete(entry.facts.key);
    this.counters.unrequestedDropped++;
    return true;
  }

  /** How many lookups returned `object` so far (see dropIfUnrequested). */
  lookupsOf(object: CachedObject): number {
    return (object as Entry).lookups;
  }

  private lookup(url: string, signal?: AbortSignal, range?: ByteRange, network?: string): Promise<CachedObject> {
    if (signal?.aborted) return Promise.reject(withdrawn());
    const key = rangeKey(url, range);
    const cached = this.lru?.get(key);
    if (cached) return this.hit(cached);
    if (range) {
      const held = this.fromCached(url, range);
      if (held instanceof ServeError) {
        this.counters.hits++;
        this.options.onLookup?.('hit');
        return Promise.reject(held);
      }
      if (held) return this.hit(held);
    }
    const joinable = this.fetches.joinable(key, url, range);
    if (joinable) {
      this.counters.joined++;
      this.options.onLookup?.('joined');
      const waited = this.fetches.wait(joinable, signal);
      if (!range) return waited;
      return waited.then(
        (entry) => this.servedFrom(entry, url, range, signal),
        (e: unknown) => {
          // A whole object too large for the proxy may still be served range by range.
          if (joinable.range === undefined && e instanceof ServeError && e.kind === 'too-large')
            return this.lookup(url, signal, range, network);
          throw e;
        },
      );
    }
    return this.fetchNew(key, url, signal, range, network);
  }

  private hit(entry: Entry): Promise<CachedObject> {
    this.counters.hits++;
    this.options.onLookup?.('hit');
    return Promise.resolve(entry);
  }

  /** Starts an origin fetch for exactly `range` (or the whole object) and waits for it. */
  private fetchNew(
    key: string,
    url: string,
    signal: AbortSignal | undefined,
    range?: ByteRange,
    network?: string,
  ): Promise<CachedObject> {
    if (signal?.aborted) return Promise.reject(withdrawn());
    const fetching = this.fetches.start(key, url, range, network, (started) => {
      this.counters.misses++;
      this.options.onLookup?.('miss');
      return this.load(started);
    });
    if (fetching instanceof ServeError) return Promise.reject(fetching);
    const waited = this.fetches.wait(fetching, signal);
    if (!range) return waited;
    return waited.then((entry) => this.servedFrom(entry, url, range, signal, false));
  }

  /** What serves `range` from a fetched (or cached) entry: itself, a slice, a refusal, or nothing. */
  private serve(entry: Entry, url: string, range: ByteRange): Entry | ServeError | undefined {
    if (entry.facts.key === rangeKey(url, range)) return entry;
    const place = locateRange(entry.facts.extent, entry.bytes.byteLength, range);
    if (place === 'past-end')
      return new ServeError(
        'range-not-satisfiable',
        `range starts at ${range.start}, the resource has ${entry.facts.extent.completeLength} bytes`,
      );
    if (!place) return undefined;
    this.counters.sliced++;
    return this.memory.slice(entry, range, place.offset, place.length);
  }

  /** The range from an entry a joined (or own) fetch produced; fetches it anew if it is not there. */
  private servedFrom(
    entry: Entry,
    url: string,
    range: ByteRange,
    signal: AbortSignal | undefined,
    mayRetry = true,
  ): Promise<CachedObject> {
    const served = this.serve(entry, url, range);
    if (served instanceof ServeError) return Promise.reject(served);
    if (served) return Promise.resolve(served);
    // Only an origin contradicting itself gets here (checked answers always hold what was asked).
    if (!mayRetry) return Promise.reject(new ServeError('origin-error', 'origin did not send the range asked for'));
    return this.get(url, signal, range);
  }

  /** A cached entry of the href that holds `range` (sliced), or a refusal when it starts past the end. */
  private fromCached(url: string, range: ByteRange): Entry | ServeError | undefined {
    const entries = this.entriesByHref.get(url);
    if (!entries) return undefined;
    for (const entry of [...entries]) {
      // has() skips an expired entry without making every entry scanned the most recent.
      if (!this.lru?.has(entry.facts.key)) continue;
      const served = this.serve(entry, url, range);
      if (!served) continue;
      this.lru.get(entry.facts.key); // the entry used is now the most recent
      return served;
    }
    return undefined;
  }

  private async load(fetching: Fetching): Promise<Entry> {
    const { href, range, controller } = fetching;
    let buffered = 0;
    const reserve = (bytes: number) => {
      if (!this.budget.tryTake(bytes)) return false;
      buffered += bytes;
      return true;
    };
    try {
      const fetched = await this.fetcher(href, {
        signal: controller.signal,
        reserve,
        ...(range ? { range } : {}),
      });
      // Without a range (asked or answered) the body is the whole resource.
      const whole = fetched.wholeBody ?? (range && fetched.range ? undefined : fetched.bytes);
      if (fetched.fromParent) this.counters.parentBytes += (whole ?? fetched.bytes).byteLength;
      else this.counters.originBytes += (whole ?? fetched.bytes).byteLength;
      this.options.onOriginBytes?.(
        fetching.network,
        (whole ?? fetched.bytes).byteLength,
        fetched.fromParent ? 'parent' : 'origin',
      );
      if (range && !whole && fetched.range) {
        const problem = servedRangeProblem(range, fetched.range, fetched.bytes.byteLength);
        if (problem) throw new ServeError('origin-error', problem);
      }
      const validators: Validators = { etag: fetched.etag, lastModified: fetched.lastModified };
      const fetchedAt = Date.now();
      this.dropStale(href, validators);
      // An origin that sent the whole resource (ignoring Range) gives the cache the whole object.
      const entry = whole
        ? this.memory.entry(whole, {
            key: href,
            href,
            contentType: fetched.contentType,
            extent: { start: 0, completeLength: whole.byteLength },
            validators,
            fetchedAt,
          })
        : this.memory.entry(fetched.bytes, {
            key: fetching.key,
            href,
            contentType: fetched.contentType,
            range: fetched.range,
            extent: { ...fetched.range! },
            validators,
            fetchedAt,
          });
      // An object larger than the whole cache is served but not stored (lru-cache skips it), as
      // is one the origin marked uncacheable.
      const policy = cachePolicy(fetched);
      if (policy.store) this.store(entry, policy.ttlMs);
      else this.counters.uncacheable++;
      return entry;
    } catch (e) {
      this.counters.failures++;
      throw e;
    } finally {
      this.budget.give(buffered);
      this.fetches.finished(fetching);
    }
  }

  private store(entry: Entry, ttlMs: number | undefined): void {
    if (!this.lru) return;
    const { key, href } = entry.facts;
    this.lru.set(key, entry, { ttl: ttlMs });
    entry.cached = this.lru.get(key) === entry;
    if (!entry.cached) return;
    this.memory.stored(entry);
    let entries = this.entriesByHref.get(href);
    if (!entries) this.entriesByHref.set(href, (entries = new Set()));
    entries.add(entry);
    if (entry.range && entries.size > MAX_RANGE_ENTRIES_PER_HREF) {
      const oldest = [...entries].find((e) => e.range !== undefined && e !== entry);
      if (oldest) this.lru.delete(oldest.facts.key);
    }
  }

  /** Drops the href's entries of another version than the response just received. */
  private dropStale(href: string, validators: Validators): void {
    for (const entry of [...(this.entriesByHref.get(href) ?? [])]) {
      if (sameVersion(entry.facts.validators, validators)) continue;
      this.counters.staleDropped++;
      this.lru?.delete(entry.facts.key);
    }
  }

  private unindex(entry: Entry): void {
    const entries = this.entriesByHref.get(entry.facts.href);
    entries?.delete(entry);
    if (entries?.size === 0) this.entriesByHref.delete(entry.facts.href);
  }

  /**
   * Origo judged a conflict and the origin serves other bytes than this proxy stated for `url`
   * (and `range`): drops that version of the href (every entry with the same validators as the one
   * that served it), so the next request fetches what the origin serves now. Only while the entry
   * for that request still has `digest`: a version fetched since is left alone. How many entries
   * were dropped (transfers sending them keep their bytes until they end).
   */
  dropVersion(url: string, range: ByteRange | undefined, digest: Uint8Array): number {
    const key = rangeKey(url, range);
    let served = this.lru?.peek(key);
    if (!served && range)
      for (const entry of this.entriesByHref.get(url) ?? []) served ??= entry.slices.get(rangeKey('', range));
    if (!served || !Buffer.from(served.digest).equals(digest)) return 0;
    const version = (served.parent ?? served).facts.validators;
    let dropped = 0;
    for (const entry of [...(this.entriesByHref.get(url) ?? [])]) {
      if (!sameVersion(entry.facts.validators, version)) continue;
      this.lru?.delete(entry.facts.key);
      dropped++;
    }
    this.counters.conflictDropped += dropped;
    return dropped;
  }

  /** Whether the object (or exactly that range of it) is cached under its own key. */
  has(url: string, range?: ByteRange): boolean {
    return this.lru?.has(rangeKey(url, range)) ?? false;
  }

  stats(): ObjectCacheStats {
    return {
      ...this.counters,
      abandoned: this.fetches.abandoned,
      fetchesRefused: this.fetches.refused,
      entries: this.lru?.size ?? 0,
      bytes: this.lru?.calculatedSize ?? 0,
      maxBytes: this.options.maxBytes,
      inFlight: this.fetches.size,
      heldAfterEviction: this.memory.heldAfterEviction,
    };
  }

  clear(): void {
    this.lru?.clear();
  }
}
