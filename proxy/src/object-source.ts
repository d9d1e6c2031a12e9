/**
 * Where MUTP transfers and the HTTP baseline get objects: the URL policy and the range first
 * (cheap, no network), then the cache, which fetches from the origin through the SSRF guard on a
 * miss.
 */
import { ByteRange, rangeProblem } from '@mutp/shared';
import { checkUrl, OriginPolicy } from '@mutp/origin-fetch';
import { asServeError, ServeError } from './errors';
import { FetchStreams, type BodyStream } from './fetch-streams';
import { CachedObject, ObjectCache } from './object-cache';
import type { ObjectFetcher } from './origin-fetches';

export interface ObjectProvider {
  /**
   * The object at `url`, or with `range` those bytes of it (CachedObject.range says where they
   * sit); rejects with a ServeError. Aborting `signal` withdraws this request. `network` is the
   * asking client's network: an origin fetch it starts counts against its share.
   */
  get(url: string, signal?: AbortSignal, range?: ByteRange, network?: string): Promise<CachedObject>;
  /**
   * The body of the fetch under way for exactly `url` (and `range`) as it arrives, if there is
   * one and the provider streams fetches (streamFetches).
   */
  streaming?(url: string, range?: ByteRange): BodyStream | undefined;
}

type FetcherWrap = (origin: ObjectFetcher) => ObjectFetcher;

export class ObjectSource implements ObjectProvider {
  private shield: FetcherWrap | undefined;
  private streams: FetchStreams | undefined;

  constructor(
    private readonly policy: OriginPolicy,
    private readonly cache: ObjectCache,
    private readonly onRefused?: (error: ServeError) => void,
  ) {}

  /** Misses go through `wrap(origin fetch)` from now on (origin shielding: ObjectCache.shieldWith). */
  shieldWith(wrap: FetcherWrap): void {
    this.shield = wrap;
    this.rewrap();
  }

  /** From now on the bodies of fetches under way can be read as they arrive (streaming). */
  streamFetches(): void {
    this.streams ??= new FetchStreams();
    this.rewrap();
  }

  streaming(url: string, range?: ByteRange): BodyStream | undefined {
    if (!this.streams) return undefined;
    try {
      return this.streams.of(checkUrl(url, this.policy).href, range);
    } catch {
      return undefined;
    }
  }

  /** The cache's fetcher: the origin's, in the shield (a child), its body streamed (a parent). */
  private rewrap(): void {
    const { shield, streams } = this;
    this.cache.shieldWith((origin) => {
      const fetcher = shield ? shield(origin) : origin;
      return streams ? streams.tap(fetcher) : fetcher;
    });
  }

  /** How many lookups returned `object` so far (staging: whether anyone asked for it since). */
  lookupsOf(object: CachedObject): number {
    return this.cache.lookupsOf(object);
  }

  /** Drops `object` from the cache when no lookup returned it since `lookupsThen` (a staged object nobody asked for). */
  dropIfUnrequested(object: CachedObject, lookupsThen: number): boolean {
    return this.cache.dropIfUnrequested(object, lookupsThen);
  }

  /** Whether the object (or exactly that range of it) is in the cache; false for a URL the policy refuses. */
  isCached(url: string, range?: ByteRange): boolean {
    try {
      return this.cache.has(checkUrl(url, this.policy).href, range);
    } catch {
      return false;
    }
  }

  async get(url: string, signal?: AbortSignal, range?: ByteRange, network?: string): Promise<CachedObject> {
    let href: string;
    try {
      href = checkUrl(url, this.policy).href;
      const problem = range && rangeProblem(range);
      if (problem) throw new ServeError('refused', problem);
    } catch (e) {
      const error = asServeError(e);
      this.onRefused?.(error);
      throw error;
    }
    try {
      return await this.cache.get(href, signal, range, network);
    } catch (e) {
      throw asServeError(e);
    }
  }
}
