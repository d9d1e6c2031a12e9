/**
 * Fetches one object from its origin: an anonymous HTTP(S) GET (no cookies, no client headers,
 * `accept-encoding: identity`), connecting only to an address the SSRF guard checked, with
 * timeouts, a size cap and manual redirects (each hop checked again). Failures are ServeErrors:
 * 404/410 and unknown hosts 'not-found', other statuses and network failures 'origin-error',
 * 'timeout', 'too-large', and 'refused' for what the policy forbids.
 *
 * With a range it asks for just those bytes (`Range`) and checks what comes back: a 206 must
 * carry exactly the asked bytes (shorter only at the end of the resource), a 200 (the origin
 * ignores Range) is taken only when the whole resource fits the size cap and is sliced here, a
 * 416 is 'range-not-satisfiable'. The cap applies to what is buffered, never to the resource, so
 * a file of any size can be served range by range.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { LookupFunction } from 'node:net';
import { ByteRange, MAX_OBJECT_BYTES, validContentType } from '@mutp/shared';
import { checkUrl, LookupAll, OriginPolicy, resolveChecked } from './address-policy';
import { ServeError } from './serve-error';
import { parseContentRange, partialProblem, rangeHeader, sliceOfWhole } from './range-response';

export interface OriginFetchOptions extends OriginPolicy {
  /** Largest object accepted, bytes (at most MAX_OBJECT_BYTES). */
  maxBytes: number;
  /** Connecting and receiving the response headers, per request (redirect hop). */
  headersTimeoutMs: number;
  /** The whole fetch: every hop and the body. */
  totalTimeoutMs: number;
  /** Redirects followed at most (default 5). */
  maxRedirects?: number;
  /** Resolver (tests inject one); default getaddrinfo. */
  lookup?: LookupAll;
  userAgent?: string;
  /** Aborts the fetch (proxy shutting down, nobody waits for the object any more). */
  signal?: AbortSignal;
  /** Charges body bytes to a memory budget as they arrive; false stops the fetch ('overloaded'). */
  reserve?: (bytes: number) => boolean;
  /**
   * Called with each body chunk of the final response as it arrives, after `reserve` took it
   * (the raw body: the whole resource when the origin ignored a Range). The chunk is the one the
   * fetch keeps: read it, do not change it. A shield parent streams it on to its children.
   */
  onBody?: (chunk: Uint8Array) => void;
  /** Fetch only these bytes of the resource (at most maxBytes of them). */
  range?: ByteRange;
}

/**
 * An origin's answer: the body and the response headers a cache keeps. What the proxy's cache
 * takes from a fetcher (tests and other fetchers need not follow redirects).
 */
export interface FetchResult {
  bytes: Uint8Array;
  /** The origin's Content-Type, only when validContentType accepts it. */
  contentType?: string;
  /** The origin's Cache-Control, Expires and Date, for the cache's policy (cache-policy.ts). */
  cacheControl?: string;
  expires?: string;
  date?: string;
  /** Validators, to tell whether two responses are of the same version of the resource. */
  etag?: string;
  lastModified?: string;
  /**
   * The origin's Repr-Digest (RFC 9530), at most MAX_REPR_DIGEST_CHARS: the digest of the whole
   * representation, also on a 206 (a shield child checks its parent's copy against it).
   */
  reprDigest?: string;
  /** For a ranged fetch: where `bytes` sit in the resource (completeLength undefined: unknown). */
  range?: { start: number; completeLength?: number };
  /** The origin ignored Range and sent the whole resource: `bytes` is a view into it. */
  wholeBody?: Uint8Array;
}

/** What fetchOrigin returns: the origin's answer and where it was found. */
export interface FetchedObject extends FetchResult {
  /** The URL the body came from, after redirects. */
  finalUrl: string;
  redirects: number;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
export const DEFAULT_MAX_REDIRECTS = 5;

/** Longest ETag / Last-Modified kept; a longer one is dropped (cut, two could compare equal). */
export const MAX_VALIDATOR_CHARS = 256;
/** Longest Repr-Digest kept (a few algorithms' digests); a longer one is dropped. */
export const MAX_REPR_DIGEST_CHARS = 1024;

type Hop = { kind: 'redirect'; location: string } | { kind: 'body'; body: FetchResult };

export async function fetchOrigin(rawUrl: string, options: OriginFetchOptions): Promise<FetchedObject> {
  const maxBytes = Math.min(options.maxBytes, MAX_OBJECT_BYTES);
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const deadline = performance.now() + options.totalTimeoutMs;
  let url = checkUrl(rawUrl, options);
  if (options.range && options.range.length > maxBytes)
    throw new ServeError('too-large', `range of ${options.range.length} bytes exceeds the limit of ${maxBytes}`);
  for (let redirects = 0; ; redirects++) {
    const target = await withDeadline(resolveChecked(url, options, options.lookup), deadline, options.signal);
    const hop = await requestOnce(url, target, { ...options, maxBytes }, deadline);
    if (hop.kind === 'body') return { ...hop.body, finalUrl: url.href, redirects };
    if (redirects >= maxRedirects) throw new ServeError('origin-error', `more than ${maxRedirects} redirects`);
    let next: URL;
    try {
      next = new URL(hop.location, url);
    } catch {
      throw new ServeError('origin-error', 'redirect with an invalid Location');
    }
    url = checkUrl(next, options);
  }
}

/** Rejects with 'timeout' at the deadline (the resolver has no timeout of its own). */
function withDeadline<T>(promise: Promise<T>, deadline: number, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) {
      reject(new ServeError('internal', 'fetch aborted'));
      return;
    }
    const timer = setTimeout(
      () => reject(new ServeError('timeout', 'origin did not answer in time (DNS)')),
      Math.max(0, deadline - performance.now()),
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

function requestOnce(
  url: URL,
  target: { address: string; family: 4 | 6 },
  options: OriginFetchOptions,
  deadline: number,
): Promise<Hop> {
  return new Promise<Hop>((resolve, reject) => {
    let settled = false;
    const finish = (error: ServeError | null, hop?: Hop) => {
      if (settled) return;
      settled = true;
      clearTimeout(headersTimer);
      clearTimeout(totalTimer);
      options.signal?.removeEventListener('abort', onAbort);
      if (error) {
        req.destroy();
        reject(error);
      } else resolve(hop!);
    };
    const onAbort = () => finish(new ServeError('internal', 'fetch aborted'));

    // The connection goes only to the address checked above, whatever DNS says now.
    const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
      if ((lookupOptions as { all?: boolean }).all)
        (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [
          { address: target.address, family: target.family },
        ]);
      else callback(null, target.address, target.family);
    };
    const requestOptions: http.RequestOptions = {
      method: 'GET',
      host: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      // Anonymous: nothing of the client's (cookies, authorization, referer) is ever forwarded.
      headers: {
        accept: '*/*',
        'accept-encoding': 'identity',
        'user-agent': options.userAgent ?? 'mutp-proxy/0.1',
        ...(options.range ? { range: rangeHeader(options.range) } : {}),
      },
      agent: false,
      lookup: pinned,
    };
    const req = url.protocol === 'https:' ? https.request(requestOptions) : http.request(requestOptions);

    const remaining = () => Math.max(0, deadline - performance.now());
    // Declared after finish(), which only runs from events and timers, when both exist.
    const headersTimer = setTimeout(
      () => finish(new ServeError('timeout', `origin sent no response headers within ${options.headersTimeoutMs} ms`)),
      Math.min(options.headersTimeoutMs, remaining()),
    );
    const totalTimer = setTimeout(
      () => finish(new ServeError('timeout', `origin did not deliver the object within ${options.totalTimeoutMs} ms`)),
      remaining(),
    );
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort);

    req.on('error', (e: NodeJS.ErrnoException) =>
      finish(new ServeError('origin-error', `cannot reach origin: ${e.code ?? e.message}`)),
    );
    req.on('response', (res) => {
      clearTimeout(headersTimer);
      const status = res.statusCode ?? 0;
      if (REDIRECT_STATUSES.has(status)) {
        const location = res.headers.location;
        if (!location) finish(new ServeError('origin-error', `redirect ${status} without Location`));
        else finish(null, { kind: 'redirect', location });
        res.destroy();
        return;
      }
      if (status === 404 || status === 410) {
        finish(new ServeError('not-found', `origin answered ${status}`));
        return;
      }
      if (status === 416 && options.range) {
        finish(new ServeError('range-not-satisfiable', `origin answered 416 to ${rangeHeader(options.range)}`));
        return;
      }
      if (status < 200 || status > 299) {
        finish(new ServeError('origin-error', `origin answered ${status}`));
        return;
      }
      const encoding = res.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
        finish(new ServeError('origin-error', `origin sent content-encoding ${encoding}`));
        return;
      }
      const expectation = expectBody(status, res.headers, options);
      if (!expectation.ok) {
        finish(expectation.error);
        return;
      }
      const { limit, overLimit, expected } = expectation;
      const chunks: Buffer[] = [];
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        received += chunk.length;
        if (received > limit) {
          finish(overLimit());
          return;
        }
        if (options.reserve && !options.reserve(chunk.length)) {
          finish(new ServeError('overloaded', 'proxy memory budget is full'));
          return;
        }
        chunks.push(chunk);
        options.onBody?.(chunk);
      });
      res.on('end', () => {
        if (expected !== undefined && received !== expected) {
          finish(new ServeError('origin-error', `body of ${received} bytes, expected ${expected}`));
          return;
        }
        // The joined body is a second copy while the chunks await collection: charge it too.
        if (options.reserve && !options.reserve(received)) {
          finish(new ServeError('overloaded', 'proxy memory budget is full'));
          return;
        }
        const joined = Buffer.concat(chunks, received);
        const body = new Uint8Array(joined.buffer, joined.byteOffset, joined.byteLength);
        const shaped = shapeBody(body, expectation.served, options.range);
        if (shaped instanceof ServeError) finish(shaped);
        else finish(null, { kind: 'body', body: { ...shaped, ...describe(res.headers) } });
      });
      res.on('error', (e: NodeJS.ErrnoException) =>
        finish(new ServeError('origin-error', `origin connection failed: ${e.code ?? e.message}`)),
      );
      res.on('close', () => {
        if (!res.complete) finish(new ServeError('origin-error', 'origin closed the connection before the end'));
      });
    });
    req.end();
  });
}

type Expectation =
  | { ok: false; error: ServeError }
  | {
      ok: true;
      /** Most body bytes accepted; past it the fetch stops with overLimit(). */
      limit: number;
      overLimit: () => ServeError;
      /** Exact body length the headers promise, when they do. */
      expected?: number;
      /** What a 206 says it carries; undefined for a whole body. */
      served?: { first: number; completeLength?: number };
    };

/** What body to accept, from the status and headers, before any of it is read. */
function expectBody(status: number, headers: http.IncomingHttpHeaders, options: OriginFetchOptions): Expectation {
  const fail = (message: string): Expectation => ({ ok: false, error: new ServeError('origin-error', message) });
  const lengthHeader = headers['content-length'];
  if (lengthHeader !== undefined && !/^\d{1,16}$/.test(lengthHeader)) return fail('invalid Content-Length');
  const declared = lengthHeader === undefined ? undefined : Number(lengthHeader);
  const { range, maxBytes } = options;
  if (!range) {
    if (status === 206) return fail('origin answered 206 to a request without Range');
    if (declared !== undefined && declared > maxBytes)
      return {
        ok: false,
        error: new ServeError('too-large', `object of ${declared} bytes exceeds the limit of ${maxBytes}`),
      };
    const overLimit = () => new ServeError('too-large', `object exceeds the limit of ${maxBytes} bytes`);
    return { ok: true, limit: maxBytes, overLimit, expected: declared };
  }
  if (status === 206) {
    const served = parseContentRange(headers['content-range']);
    if (!served) return fail('206 without a valid single Content-Range');
    const problem = partialProblem(range, served);
    if (problem) return fail(problem);
    const length = served.last - served.first + 1;
    if (declared !== undefined && declared !== length)
      return fail(`Content-Length ${declared} does not match Content-Range of ${length} bytes`);
    const overLimit = () => new ServeError('origin-error', 'origin sent more bytes than its Content-Range');
    return { ok: true, limit: length, overLimit, expected: length, served };
  }
  if (status === 200) {
    // The origin ignores Range: only a whole resource that fits the cap is taken (and sliced).
    const tooLarge = () =>
      new ServeError('origin-error', `origin ignores Range and the resource is larger than ${maxBytes} bytes`);
    if (declared !== undefined && declared > maxBytes) return { ok: false, error: tooLarge() };
    return { ok: true, limit: maxBytes, overLimit: tooLarge, expected: declared };
  }
  return fail(`origin answered ${status} to a Range request`);
}

/** The object from a complete body: as is, as the 206 placed it, or sliced out of a whole resource. */
function shapeBody(
  body: Uint8Array,
  served: { first: number; completeLength?: number } | undefined,
  range: ByteRange | undefined,
): Pick<FetchResult, 'bytes' | 'range' | 'wholeBody'> | ServeError {
  if (!range) return { bytes: body };
  if (served) return { bytes: body, range: { start: served.first, completeLength: served.completeLength } };
  const part = sliceOfWhole(body, range);
  if (!part)
    return new ServeError(
      'range-not-satisfiable',
      `range starts at ${range.start}, the resource has ${body.byteLength} bytes`,
    );
  return { bytes: part, range: { start: range.start, completeLength: body.byteLength }, wholeBody: body };
}

function bounded(value: string | string[] | undefined, max: number): string | undefined {
  return typeof value === 'string' && value.length > 0 && value.length <= max ? value : undefined;
}

/** The response headers the proxy keeps: a valid Content-Type, Cache-Control and validators. */
function describe(
  headers: http.IncomingHttpHeaders,
): Pick<FetchResult, 'contentType' | 'cacheControl' | 'expires' | 'date' | 'etag' | 'lastModified' | 'reprDigest'> {
  const contentType = headers['content-type'];
  const validator = (value: string | undefined) =>
    value !== undefined && value.length > 0 && value.length <= MAX_VALIDATOR_CHARS ? value : undefined;
  return {
    contentType: contentType !== undefined && validContentType(contentType) ? contentType : undefined,
    cacheControl: headers['cache-control'],
    expires: validator(headers.expires),
    date: validator(headers.date),
    etag: validator(headers.etag),
    lastModified: validator(headers['last-modified']),
    reprDigest: bounded(headers['repr-digest'], MAX_REPR_DIGEST_CHARS),
  };
}
