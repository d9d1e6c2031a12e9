/**
 * Fetches one object from its origin: an anonymous HTTP(S) GET (no cookies, no client headers,
 * `accept-encoding: identity`), connecting only to an address the SSRF guard checked, with
 * timeouts, a size cap and manual redirects (each hop checked again). Failures are ServeErrors:
 * 404/410 and unknown hosts 'not-found', other statuses and network failures 'origin-error',
 * 'timeout', 'too-large', and 'refused' for what the policy forbids.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { LookupFunction } from 'node:net';
import { MAX_OBJECT_BYTES } from '@mutp/shared';
import { checkUrl, LookupAll, OriginPolicy, resolveChecked } from './address-policy';
import { ServeError } from './errors';

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
}

export interface FetchedObject {
  bytes: Uint8Array;
  contentType?: string;
  /** The origin's Cache-Control, for the cache's policy. */
  cacheControl?: string;
  /** The URL the body came from, after redirects. */
  finalUrl: string;
  redirects: number;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
export const DEFAULT_MAX_REDIRECTS = 5;

type Hop =
  | { kind: 'redirect'; location: string }
  | { kind: 'body'; bytes: Uint8Array; contentType?: string; cacheControl?: string };

export async function fetchOrigin(rawUrl: string, options: OriginFetchOptions): Promise<FetchedObject> {
  const maxBytes = Math.min(options.maxBytes, MAX_OBJECT_BYTES);
  const maxRedirects = options.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const deadline = performance.now() + options.totalTimeoutMs;
  let url = checkUrl(rawUrl, options);
  for (let redirects = 0; ; redirects++) {
    const target = await withDeadline(resolveChecked(url, options, options.lookup), deadline, options.signal);
    const hop = await requestOnce(url, target, { ...options, maxBytes }, deadline);
    if (hop.kind === 'body') {
      const { bytes, contentType, cacheControl } = hop;
      return { bytes, contentType, cacheControl, finalUrl: url.href, redirects };
    }
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
      if (status < 200 || status > 299) {
        finish(new ServeError('origin-error', `origin answered ${status}`));
        return;
      }
      const encoding = res.headers['content-encoding'];
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
        finish(new ServeError('origin-error', `origin sent content-encoding ${encoding}`));
        return;
      }
      const lengthHeader = res.headers['content-length'];
      let expected: number | undefined;
      if (lengthHeader !== undefined) {
        if (!/^\d+$/.test(lengthHeader)) {
          finish(new ServeError('origin-error', 'invalid Content-Length'));
          return;
        }
        expected = Number(lengthHeader);
        if (expected > options.maxBytes) {
          finish(new ServeError('too-large', `object of ${expected} bytes exceeds the limit of ${options.maxBytes}`));
          return;
        }
      }
      const chunks: Buffer[] = [];
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        received += chunk.length;
        if (received > options.maxBytes) {
          finish(new ServeError('too-large', `object exceeds the limit of ${options.maxBytes} bytes`));
          return;
        }
        if (options.reserve && !options.reserve(chunk.length)) {
          finish(new ServeError('overloaded', 'proxy memory budget is full'));
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => {
        if (expected !== undefined && received !== expected) {
          finish(new ServeError('origin-error', `body of ${received} bytes, Content-Length said ${expected}`));
          return;
        }
        // The joined body is a second copy while the chunks await collection: charge it too.
        if (options.reserve && !options.reserve(received)) {
          finish(new ServeError('overloaded', 'proxy memory budget is full'));
          return;
        }
        const body = Buffer.concat(chunks, received);
        const bytes = new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
        const contentType = res.headers['content-type'];
        finish(null, { kind: 'body', bytes, contentType, cacheControl: res.headers['cache-control'] });
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
