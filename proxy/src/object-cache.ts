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
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import {
  AssertionProvenance,
  ByteRange,
  IdleEncoders,
  LayoutDigests,
  MemoryBudget,
  networkShare,
  servedRangeProblem,
  SharedEncoders,
  validValidator,
} from '@mutp/shared';
import type { FetchResult } from '@mutp/origin-fetch';
import { cachePolicy } from './cache-policy';
import { ServeError } from './errors';
import { locateRange, rangeKey, ResourceExtent, sameVersion, Validators } from './range-cache';

export interface CachedObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes. */
  digest: Uint8Array;
  contentType?: string;
  /** For a ranged lookup: where the bytes sit in the resource (completeLength undefined: unknown). */
  range?: { start: number; completeLength?: number };
  /** Encoders shared by the transfers of this object (one codec copy per layout). */
  encoders: SharedEncoders;
  /** Integrity digests per layout, computed once for all transfers of this object. */
  digests: LayoutDigests;
  /** Whether the LRU accounts for the bytes (an object larger than the cache is served, not kept). */
  readonly cached: boolean;
  /** Marks one user (a transfer) of the bytes; call the returned function when it is done. */
  hold(): () => void;
  /** When the origin sent the bytes, and its validator: what a signed META asserts of them. */
  readonly provenance: AssertionProvenance;
}

export interface FetchControl {
  /** Aborted when nobody waits for the fetch any more. */
  signal: AbortSignal;
  /** Called as body bytes arrive; false means the memory budget is full and the fetch must stop. */
  reserve(bytes: number): boolean;
  /** The bytes to fetch; absent: the whole resource. */
  range?: ByteRange;
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
  /** Called when an origin fetch completes, with the network that started it and the bytes it pulled. */
  onOriginBytes?: (network: string | undefined, bytes: number) => void;
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

export const DEFAULT_MAX_CONCURRENT_FETCHES = 32;
/**
 * What a ranged entry costs the LRU besides its bytes (keys, digests, bookkeeping), so that a
 * flood of tiny ranges fills the cache after a bounded number of entries.
 */
export const RANGE_ENTRY_OVERHEAD_BYTES = 1024;
/** Ranged entries kept per href; past it the oldest goes (bounds the containment scan). */
export const MAX_RANGE_ENTRIES_PER_HREF = 1024;
/** Slices memoised per entry; past it the oldest is forgotten (its users keep it). */
const MAX_SLICES_PER_ENTRY = 32;

export function sha256(bytes: Uint8Array): Uint8Array {
  const digest = createHash('sha256').update(bytes).digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

interface EntryFacts {
  /** The cache key: the href, or the href and the range the entry was fetched for. */
  key: string;
  href: string;
  contentType?: string;
  range?: { start: number; completeLength?: number };
  /** Where the bytes sit in the resource (a whole object: from 0, complete). */
  extent: ResourceExtent;
  validators: Validators;
  /** When the origin's answer arrived (ms since the epoch). */
  fetchedAt: number;
}

/** A cache entry (or a slice of one) and its users; `evicted` once the LRU dropped it. */
class Entry implements CachedObject {
  users = 0;
  evicted = false;
  cached = false;
  /** Lookups that returned this entry (staging: whether anyone asked for it after the hint). */
  lookups = 0;
  /** Slices served from this entry, by range key. */
  readonly slices = new Map<string, Entry>();
  readonly contentType: string | undefined;
  readonly range: { start: number; completeLength?: number } | undefined;
  readonly provenance: AssertionProvenance;

  constructor(
    readonly bytes: Uint8Array,
    readonly facts: EntryFacts,
    readonly digest: Uint8Array,
    readonly encoders: SharedEncoders,
    readonly digests: LayoutDigests,
    private readonly heldOutside: (entry: Entry, held: boolean) => void,
    /** A slice's bytes are its parent's: holding the slice holds the parent. */
    readonly parent?: Entry,
  ) {
    this.contentType = facts.contentType;
    this.range = facts.range;
    this.provenance = provenanceOf(facts);
  }

  hold(): () => void {
    const releaseParent = this.parent?.hold();
    // Users of an object the LRU no longer accounts for pay for its bytes while they hold it.
    if (this.users++ === 0 && this.evicted) this.heldOutside(this, true);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.users === 0 && this.evicted) this.heldOutside(this, false);
      releaseParent?.();
    };
  }
}

interface Fetching {
  key: string;
  href: string;
  /** The range fetched; undefined: the whole resource. */
  range?: ByteRange;
  promise: Promise<Entry>;
  controller: AbortController;
  /** Waiters with a signal still waiting; the fetch is aborted when they all withdrew. */
  waiters: number;
  /** Some caller waits without a signal: never abort. */
  pinned: boolean;
  /** The client network that started it (its share is charged until the fetch ends). */
  network?: string;
}

export class ObjectCache {
  private readonly lru: LRUCache<string, Entry> | undefined;
  private readonly inFlight = new Map<string, Fetching>();
  /** Fetches under way per href, for ranged lookups that can join a larger one. */
  private readonly inFlightByHref = new Map<string, Set<Fetching>>();
  /** Entries in the LRU per href (insertion order), for containment. */
  private readonly entriesByHref = new Map<string, Set<Entry>>();
  private readonly budget: MemoryBudget;
  private readonly idleEncoders: IdleEncoders | undefined;
  private readonly maxConcurrentFetches: number;
  private readonly networkFetches: number;
  /** Fetches under way per client network that started them. */
  private readonly fetchesByNetwork = new Map<string, number>();
  private heldAfterEviction = 0;
  private readonly counters = {
    hits: 0,
    misses: 0,
    joined: 0,
    failures: 0,
    abandoned: 0,
    fetchesRefused: 0,
    uncacheable: 0,
    sliced: 0,
    staleDropped: 0,
    conflictDropped: 0,
    unrequestedDropped: 0,
    originBytes: 0,
  };

  constructor(private readonly options: ObjectCacheOptions) {
    this.budget = options.budget ?? new MemoryBudget(Number.MAX_SAFE_INTEGER);
    const idleBytes = options.idleEncoderBytes ?? DEFAULT_IDLE_ENCODER_BYTES;
    this.idleEncoders = idleBytes > 0 ? new IdleEncoders(this.budget, idleBytes) : undefined;
    this.maxConcurrentFetches = options.maxConcurrentFetches ?? DEFAULT_MAX_CONCURRENT_FETCHES;
    this.networkFetches = networkShare(this.maxConcurrentFetches, options.minNetworks ?? 1);
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
              this.evicted(entry);
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
    const joinable = this.joinable(key, url, range);
    if (joinable) {
      this.counters.joined++;
      this.options.onLookup?.('joined');
      const waited = this.wait(joinable, signal);
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
    if (this.inFlight.size >= this.maxConcurrentFetches) {
      this.counters.fetchesRefused++;
      return Promise.reject(
        new ServeError('overloaded', `proxy at its limit of ${this.maxConcurrentFetches} origin fetches`),
      );
    }
    const byNetwork = network === undefined ? 0 : (this.fetchesByNetwork.get(network) ?? 0);
    if (network !== undefined && byNetwork >= this.networkFetches) {
      this.counters.fetchesRefused++;
      return Promise.reject(
        new ServeError('overloaded', `client network at its share of ${this.networkFetches} origin fetches`),
      );
    }
    if (network !== undefined) this.fetchesByNetwork.set(network, byNetwork + 1);
    this.counters.misses++;
    this.options.onLookup?.('miss');
    const controller = new AbortController();
    const fetching: Fetching = {
      key,
      href: url,
      range,
      promise: undefined as unknown as Promise<Entry>,
      controller,
      waiters: 0,
      pinned: false,
      network,
    };
    this.inFlight.set(key, fetching);
    let byHref = this.inFlightByHref.get(url);
    if (!byHref) this.inFlightByHref.set(url, (byHref = new Set()));
    byHref.add(fetching);
    fetching.promise = this.load(fetching);
    const waited = this.wait(fetching, signal);
    if (!range) return waited;
    return waited.then((entry) => this.servedFrom(entry, url, range, signal, false));
  }

  /** A fetch under way that will hold what is asked: the same key, or for a range a larger fetch. */
  private joinable(key: string, url: string, range: ByteRange | undefined): Fetching | undefined {
    const live = (f: Fetching | undefined) => (f && !f.controller.signal.aborted ? f : undefined);
    const same = live(this.inFlight.get(key));
    if (same || !range) return same;
    for (const f of this.inFlightByHref.get(url) ?? []) {
      if (!live(f)) continue;
      if (f.range === undefined) return f;
      if (f.range.start <= range.start && f.range.start + f.range.length >= range.start + range.length) return f;
    }
    return undefined;
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
    return this.slice(entry, range, place.offset, place.length);
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

  /** A slice of `parent` for `range`, memoised on the parent so a range asked twice shares its state. */
  private slice(parent: Entry, range: ByteRange, offset: number, length: number): Entry {
    const key = rangeKey('', range);
    const known = parent.slices.get(key);
    this.counters.sliced++;
    if (known) return known;
    // A cached parent's bytes are accounted for (and stay charged while a slice holds them after
    // eviction); an uncached one's are not, so a slice of it copies rather than keep it all alive.
    const shared = parent.cached;
    const bytes = shared ? parent.bytes.subarray(offset, offset + length) : parent.bytes.slice(offset, offset + length);
    const { completeLength } = parent.facts.extent;
    const slice = this.newEntry(
      bytes,
      {
        key: rangeKey(parent.facts.href, range),
        href: parent.facts.href,
        contentType: parent.facts.contentType,
        range: { start: range.start, completeLength },
        extent: { start: range.start, completeLength },
        validators: parent.facts.validators,
        fetchedAt: parent.facts.fetchedAt,
      },
      shared ? parent : undefined,
    );
    slice.cached = shared;
    if (shared && !parent.evicted) slice.encoders.keepIdleIn(this.idleEncoders);
    if (parent.slices.size >= MAX_SLICES_PER_ENTRY) {
      const oldest = parent.slices.keys().next().value!;
      parent.slices.get(oldest)?.encoders.keepIdleIn(undefined);
      parent.slices.delete(oldest);
    }
    parent.slices.set(key, slice);
    return slice;
  }

  private newEntry(bytes: Uint8Array, facts: EntryFacts, parent?: Entry): Entry {
    return new Entry(
      bytes,
      facts,
      sha256(bytes),
      new SharedEncoders(bytes, this.budget),
      new LayoutDigests(bytes, sha256),
      (e, held) => this.heldOutside(e, held),
      parent,
    );
  }

  private wait(fetching: Fetching, signal?: AbortSignal): Promise<Entry> {
    if (!signal) {
      fetching.pinned = true;
      return fetching.promise;
    }
    fetching.waiters++;
    return new Promise<Entry>((resolve, reject) => {
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

  private async load(fetching: Fetching): Promise<Entry> {
    const { href, range, controller } = fetching;
    let buffered = 0;
    const reserve = (bytes: number) => {
      if (!this.budget.tryTake(bytes)) return false;
      buffered += bytes;
      return true;
    };
    try {
      const fetched = await this.options.fetch(href, {
        signal: controller.signal,
        reserve,
        ...(range ? { range } : {}),
      });
      // Without a range (asked or answered) the body is the whole resource.
      const whole = fetched.wholeBody ?? (range && fetched.range ? undefined : fetched.bytes);
      this.counters.originBytes += (whole ?? fetched.bytes).byteLength;
      this.options.onOriginBytes?.(fetching.network, (whole ?? fetched.bytes).byteLength);
      if (range && !whole && fetched.range) {
        const problem = servedRangeProblem(range, fetched.range, fetched.bytes.byteLength);
        if (problem) throw new ServeError('origin-error', problem);
      }
      const validators: Validators = { etag: fetched.etag, lastModified: fetched.lastModified };
      const fetchedAt = Date.now();
      this.dropStale(href, validators);
      // An origin that sent the whole resource (ignoring Range) gives the cache the whole object.
      const entry = whole
        ? this.newEntry(whole, {
            key: href,
            href,
            contentType: fetched.contentType,
            extent: { start: 0, completeLength: whole.byteLength },
            validators,
            fetchedAt,
          })
        : this.newEntry(fetched.bytes, {
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
      if (this.inFlight.get(fetching.key) === fetching) this.inFlight.delete(fetching.key);
      if (fetching.network !== undefined) {
        const left = (this.fetchesByNetwork.get(fetching.network) ?? 1) - 1;
        if (left > 0) this.fetchesByNetwork.set(fetching.network, left);
        else this.fetchesByNetwork.delete(fetching.network);
      }
      const byHref = this.inFlightByHref.get(href);
      byHref?.delete(fetching);
      if (byHref?.size === 0) this.inFlightByHref.delete(href);
    }
  }

  private store(entry: Entry, ttlMs: number | undefined): void {
    if (!this.lru) return;
    const { key, href } = entry.facts;
    this.lru.set(key, entry, { ttl: ttlMs });
    entry.cached = this.lru.get(key) === entry;
    if (!entry.cached) return;
    entry.encoders.keepIdleIn(this.idleEncoders);
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

  /** The LRU dropped an entry: transfers still sending it keep it charged to the budget. */
  private evicted(entry: Entry): void {
    // Encoders are kept idle only for objects the cache holds.
    entry.encoders.keepIdleIn(undefined);
    for (const slice of entry.slices.values()) slice.encoders.keepIdleIn(undefined);
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

/**
 * What a signed META says of where the bytes came from: a strong ETag names the version best
 * (a weak one does not promise these bytes), else Last-Modified, else nothing.
 */
function provenanceOf(facts: EntryFacts): AssertionProvenance {
  const { etag, lastModified } = facts.validators;
  if (etag !== undefined && !etag.startsWith('W/') && validValidator(etag))
    return { fetchedAt: facts.fetchedAt, validator: { kind: 'etag', value: etag } };
  if (lastModified !== undefined && validValidator(lastModified))
    return { fetchedAt: facts.fetchedAt, validator: { kind: 'last-modified', value: lastModified } };
  return { fetchedAt: facts.fetchedAt };
}
