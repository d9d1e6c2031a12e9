/**
 * The cache's origin fetches under way: admission (a cap on fetches at once, and a share of it per
 * client network), finding one a request can join (the same key, or for a range a larger fetch
 * of the href), and its waiters. A fetch lives exactly as long as someone waits for it: when the
 * last waiter with a signal withdraws, the origin request is aborted.
 */
import { ByteRange, networkShare } from '@mutp/shared';
import type { FetchResult } from '@mutp/origin-fetch';
import type { Entry } from './cache-entry';
import { ServeError } from './errors';

export interface FetchControl {
  /** Aborted when nobody waits for the fetch any more. */
  signal: AbortSignal;
  /** Called as body bytes arrive; false means the memory budget is full and the fetch must stop. */
  reserve(bytes: number): boolean;
  /** The bytes to fetch; absent: the whole resource. */
  range?: ByteRange;
  /**
   * Called with each body chunk as it arrives, after `reserve` accepted it (the raw body: all of
   * the resource when an origin ignores a Range). A shield parent passes it on to its children
   * while the fetch runs (fetch-streams.ts); the fetch's result stays what counts.
   */
  onBody?: (chunk: Uint8Array) => void;
}

/** An origin's answer, or one a shield parent served in its place (shield-fetch.ts). */
export interface FetchedBytes extends FetchResult {
  /** The bytes came from a shield parent (checked against the origin), not from the origin. */
  fromParent?: boolean;
  /**
   * The origin's Repr-Digest header (RFC 9530), when the fetch passes it on: a shield child
   * checks every byte of its parent's copy against it (shield-verify.ts).
   */
  reprDigest?: string;
}

export type ObjectFetcher = (url: string, control: FetchControl) => Promise<FetchedBytes>;

export const DEFAULT_MAX_CONCURRENT_FETCHES = 32;

export interface Fetching {
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

export class OriginFetches {
  private readonly inFlight = new Map<string, Fetching>();
  /** Fetches under way per href, for ranged lookups that can join a larger one. */
  private readonly inFlightByHref = new Map<string, Set<Fetching>>();
  private readonly maxConcurrentFetches: number;
  private readonly networkFetches: number;
  /** Fetches under way per client network that started them. */
  private readonly fetchesByNetwork = new Map<string, number>();
  /** Origin fetches aborted because their last waiter withdrew. */
  abandoned = 0;
  /** Fetches refused because a cap was reached. */
  refused = 0;

  constructor(maxConcurrentFetches = DEFAULT_MAX_CONCURRENT_FETCHES, minNetworks = 1) {
    this.maxConcurrentFetches = maxConcurrentFetches;
    this.networkFetches = networkShare(maxConcurrentFetches, minNetworks);
  }

  /** Fetches under way. */
  get size(): number {
    return this.inFlight.size;
  }

  /**
   * Starts a fetch for `key` unless a cap refuses it (the refusal is returned): `load` runs it,
   * and must call `finished` when it settles, whatever the outcome.
   */
  start(
    key: string,
    href: string,
    range: ByteRange | undefined,
    network: string | undefined,
    load: (fetching: Fetching) => Promise<Entry>,
  ): Fetching | ServeError {
    if (this.inFlight.size >= this.maxConcurrentFetches) {
      this.refused++;
      return new ServeError('overloaded', `proxy at its limit of ${this.maxConcurrentFetches} origin fetches`);
    }
    const byNetwork = network === undefined ? 0 : (this.fetchesByNetwork.get(network) ?? 0);
    if (network !== undefined && byNetwork >= this.networkFetches) {
      this.refused++;
      return new ServeError('overloaded', `client network at its share of ${this.networkFetches} origin fetches`);
    }
    if (network !== undefined) this.fetchesByNetwork.set(network, byNetwork + 1);
    const fetching: Fetching = {
      key,
      href,
      range,
      promise: undefined as unknown as Promise<Entry>,
      controller: new AbortController(),
      waiters: 0,
      pinned: false,
      network,
    };
    this.inFlight.set(key, fetching);
    let byHref = this.inFlightByHref.get(href);
    if (!byHref) this.inFlightByHref.set(href, (byHref = new Set()));
    byHref.add(fetching);
    fetching.promise = load(fetching);
    return fetching;
  }

  /** A fetch under way that will hold what is asked: the same key, or for a range a larger fetch. */
  joinable(key: string, url: string, range: ByteRange | undefined): Fetching | undefined {
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

  /** Waits for the fetch; with a signal the caller may withdraw, and the last one to do so aborts it. */
  wait(fetching: Fetching, signal?: AbortSignal): Promise<Entry> {
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
          this.abandoned++;
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

  /** The fetch settled: it no longer counts against the caps nor can be joined. */
  finished(fetching: Fetching): void {
    if (this.inFlight.get(fetching.key) === fetching) this.inFlight.delete(fetching.key);
    if (fetching.network !== undefined) {
      const left = (this.fetchesByNetwork.get(fetching.network) ?? 1) - 1;
      if (left > 0) this.fetchesByNetwork.set(fetching.network, left);
      else this.fetchesByNetwork.delete(fetching.network);
    }
    const byHref = this.inFlightByHref.get(fetching.href);
    byHref?.delete(fetching);
    if (byHref?.size === 0) this.inFlightByHref.delete(fetching.href);
  }
}

export function withdrawn(): ServeError {
  return new ServeError('internal', 'request withdrawn');
}
