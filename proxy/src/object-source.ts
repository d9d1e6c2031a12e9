/**
 * Where MUTP transfers and the HTTP baseline get objects: the URL policy and the range first
 * (cheap, no network), then the cache, which fetches from the origin through the SSRF guard on a
 * miss.
 */
import { ByteRange, rangeProblem } from '@mutp/shared';
import { checkUrl, OriginPolicy } from '@mutp/origin-fetch';
import { asServeError, ServeError } from './errors';
import { CachedObject, ObjectCache } from './object-cache';

export interface ObjectProvider {
  /**
   * The object at `url`, or with `range` those bytes of it (CachedObject.range says where they
   * sit); rejects with a ServeError. Aborting `signal` withdraws this request. `network` is the
   * asking client's network: an origin fetch it starts counts against its share.
   */
  get(url: string, signal?: AbortSignal, range?: ByteRange, network?: string): Promise<CachedObject>;
}

export class ObjectSource implements ObjectProvider {
  constructor(
    private readonly policy: OriginPolicy,
    private readonly cache: ObjectCache,
    private readonly onRefused?: (error: ServeError) => void,
  ) {}

  /** Misses go through `wrap(origin fetch)` from now on (origin shielding: ObjectCache.shieldWith). */
  shieldWith(wrap: Parameters<ObjectCache['shieldWith']>[0]): void {
    this.cache.shieldWith(wrap);
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
