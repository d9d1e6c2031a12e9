/**
 * The Parallel HTTP baseline (the paper's comparison): `GET /v1/http?url=<encoded>` answers with
 * the same object MUTP would serve, through the same cache, SSRF guard, limits and upload shaping,
 * with Content-Length and Content-Type. Origin failures answer 404 / 413 / 502 / 403 with a JSON
 * error body of fixed texts (no upstream detail: the endpoint must not work as a port scanner).
 *
 * It is not an open proxy: every request carries origo's client token as
 * `Authorization: Bearer <token>` (header only: our callers, the Node client and the extension,
 * use fetch and can set it, and a token in the query would end up in logs). The per-client
 * limits key on the token's subject, plus a cap per remote address. CORS is granted only to
 * browser extensions and the configured page origins; the content type is passed on only when
 * it is a media or manifest type, and never sniffed.
 *
 * Optional `start` and `length` parameters ask for bytes start .. start + length - 1 of the
 * object, served through the same cache as MUTP's ranged REQUESTs: 200 with those bytes (fewer
 * only at the end of the resource), `x-mutp-range-start` and, when the origin said it,
 * `x-mutp-complete-length`; 416 when the range starts past the end.
 *
 * Every answer states its bytes' SHA-256 (`x-mutp-sha256`) and, once the proxy has its assertion
 * key, a META signed with it (`x-mutp-meta`, base64; shared `signHttpAnswer`): for this URL and
 * range, these bytes, this Content-Type, from the origin at this time and validator. A client
 * holding two that disagree holds evidence origo can judge against the origin. It is a header, not
 * a trailer: the proxy holds the whole object before it answers, so the digest is known up front
 * (no buffering for it), and browsers' fetch never exposes trailers (the extension reads headers).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { addressPrefix, Admission, AssertionProvenance, ByteRange, Layout, ObjectAttributes } from '@mutp/shared';
import { bearerToken, ClientTokenVerifier } from './client-tokens';
import type { HintLedger } from './hint-ledger';
import { asServeError, httpStatus, ServeErrorKind } from './errors';
import { ProxyMetrics } from './metrics';
import type { CachedObject } from './object-cache';
import { ObjectProvider } from './object-source';
import { parseRangeQuery } from './range-query';
import { RateMeter } from './rate-meter';
import { TokenBucket } from './token-bucket';

export interface HttpBaselineDeps {
  objects: ObjectProvider;
  bucket: TokenBucket;
  admission: Admission;
  metrics: ProxyMetrics;
  meter: RateMeter;
  tokens: ClientTokenVerifier;
  /** Page origins allowed cross-origin besides extensions (chrome-extension://, moz-extension://). */
  corsOrigins: readonly string[];
  /** Concurrent /v1/http requests per remote address. */
  maxPerAddress: number;
  /** Completed downloads are credited to their network here (what its staging hints may cost). */
  hints?: HintLedger;
  /** Signs what an answer asserts (the proxy's assertion key); unsigned without it (no origo). */
  signAnswer?: SignAnswer;
  clock?: () => number;
}

/** What a signed answer asserts (shared `AnsweredObject`). */
export interface HttpAnswer {
  bytes: Uint8Array;
  digest: Uint8Array;
  attributes: ObjectAttributes;
  provenance?: AssertionProvenance;
  unitDigests?: (layout: Layout) => Uint8Array;
}

/** The signed META of an answer to `request` (shared `signHttpAnswer` with the proxy's key). */
export type SignAnswer = (answer: HttpAnswer, request: { url: string; range?: ByteRange }) => Uint8Array;

/** Concurrent requests per remote address (entries leave at 0). */
const inFlightByAddress = new WeakMap<HttpBaselineDeps, Map<string, number>>();

/** Content types passed on as the origin sent them; anything else becomes application/octet-stream. */
const PASSED_TYPES =
  /^(video|audio)\/[a-z0-9.+-]+$|^application\/(dash\+xml|vnd\.apple\.mpegurl|x-mpegurl|mp4|octet-stream)$|^text\/vtt$/;

export function safeContentType(contentType: string | undefined): string {
  const essence = (contentType ?? '').split(';')[0].trim().toLowerCase();
  return PASSED_TYPES.test(essence) ? essence : 'application/octet-stream';
}

/** The CORS headers for this request's Origin: none unless an extension or a configured origin. */
export function corsHeaders(origin: string | undefined, allowed: readonly string[]): Record<string, string> {
  if (origin === undefined) return {};
  const extension = /^(chrome-extension|moz-extension):\/\/[a-z0-9-]{1,64}$/i.test(origin);
  if (!extension && !allowed.includes(origin)) return { vary: 'origin' };
  return {
    'access-control-allow-origin': origin,
    'access-control-expose-headers':
      'content-length, x-mutp-sha256, x-mutp-meta, x-mutp-range-start, x-mutp-complete-length',
    vary: 'origin',
  };
}

/** Answers a CORS preflight of /v1/http (the Authorization header makes one necessary). */
export function servePreflight(deps: HttpBaselineDeps, req: IncomingMessage, res: ServerResponse): number {
  const cors = corsHeaders(req.headers.origin, deps.corsOrigins);
  if (cors['access-control-allow-origin'] === undefined) {
    res.writeHead(403, { vary: 'origin', 'content-length': 0 });
    res.end();
    return 403;
  }
  res.writeHead(204, {
    ...cors,
    'access-control-allow-methods': 'GET',
    'access-control-allow-headers': 'authorization',
    'access-control-max-age': '600',
  });
  res.end();
  return 204;
}

/** Fixed texts per failure: nothing of the origin's answer or the network error reaches the caller. */
const PUBLIC_MESSAGES: Record<ServeErrorKind, string> = {
  'not-found': 'the origin has no such object',
  'origin-error': 'the origin could not be fetched',
  timeout: 'the origin could not be fetched',
  'too-large': 'the object is larger than this proxy serves',
  'range-not-satisfiable': 'the range starts past the end of the object',
  refused: 'this URL is not served by this proxy',
  overloaded: 'the proxy is busy',
  unsupported: 'not supported',
  internal: 'internal error',
};

/** Write size without an upload limit (with one, writes are half the bucket's burst). */
const UNLIMITED_CHUNK_BYTES = 256 * 1024;

export function sendJson(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

export async function serveHttpBaseline(
  deps: HttpBaselineDeps,
  req: IncomingMessage,
  res: ServerResponse,
  query: URLSearchParams,
): Promise<number> {
  const cors = corsHeaders(req.headers.origin, deps.corsOrigins);
  const fail = (status: number, error: string, message: string, extra: Record<string, string> = {}) => {
    for (const [k, v] of Object.entries({ ...cors, ...extra })) res.setHeader(k, v);
    sendJson(res, status, { error, message });
    return status;
  };
  const check = await deps.tokens.verify(bearerToken(req.headers.authorization));
  if (!check.ok) {
    const message =
      check.reason === 'no-key' ? 'the proxy has no key from origo yet' : 'a valid origo client token is required';
    return fail(check.reason === 'no-key' ? 503 : 401, 'unauthorized', message, {
      'www-authenticate': 'Bearer realm="mutp"',
    });
  }
  const target = query.get('url');
  if (!target) return fail(400, 'bad-request', 'missing url parameter');
  const ranged = parseRangeQuery(query);
  if (!ranged.ok) return fail(400, 'bad-request', ranged.message);
  const address = req.socket.remoteAddress ?? '?';
  let inFlight = inFlightByAddress.get(deps);
  if (inFlight === undefined) inFlightByAddress.set(deps, (inFlight = new Map()));
  const fromAddress = inFlight.get(address) ?? 0;
  if (fromAddress >= deps.maxPerAddress) return fail(503, 'overloaded', PUBLIC_MESSAGES.overloaded);
  // The same per-client key as the client's WebRTC transfers: one budget per token subject, and
  // one share per network (origo's word in the token, else the address's own network).
  const network = check.network ?? addressPrefix(address);
  const slot = deps.admission.tryAcquire(check.clientId, 0, network);
  if (!slot.ok) return fail(503, 'overloaded', PUBLIC_MESSAGES.overloaded);
  inFlight.set(address, fromAddress + 1);
  deps.metrics.transfersActive.inc({ mode: 'http' });
  const transferTimer = deps.metrics.transferSeconds.startTimer({ mode: 'http' });
  const firstByteTimer = deps.metrics.firstByteSeconds.startTimer({ mode: 'http' });
  let outcome = 'done';
  try {
    let object;
    try {
      // A client that hangs up while the origin is fetched withdraws its wait (and the fetch, if
      // nobody else waits for it).
      const withdraw = new AbortController();
      const onGone = () => withdraw.abort();
      res.once('close', onGone);
      try {
        object = await deps.objects.get(target, withdraw.signal, ranged.range, network);
      } finally {
        res.off('close', onGone);
      }
    } catch (e) {
      const error = asServeError(e);
      outcome = error.kind;
      // timeout and origin-error look the same from outside: no telling a filtered port from a closed one.
      const kind = error.kind === 'timeout' ? 'origin-error' : error.kind;
      return fail(httpStatus(kind), kind, PUBLIC_MESSAGES[kind]);
    }
    const contentType = safeContentType(object.contentType);
    res.writeHead(200, {
      ...cors,
      'content-type': contentType,
      'x-content-type-options': 'nosniff',
      'content-length': object.bytes.byteLength,
      'cache-control': 'no-store',
      'x-mutp-sha256': Buffer.from(object.digest).toString('hex'),
      ...signedMetaHeader(deps.signAnswer, object, contentType, {
        url: target,
        ...(ranged.range ? { range: ranged.range } : {}),
      }),
      ...rangeHeaders(object.range),
    });
    firstByteTimer();
    const completed = await streamShaped(deps, res, object.bytes);
    if (!completed) outcome = 'aborted';
    else
      deps.hints?.creditCompleted(
        network,
        object.bytes.byteLength,
        (deps.clock ?? performance.now.bind(performance))(),
      );
    return 200;
  } catch {
    outcome = 'internal';
    if (!res.headersSent) fail(500, 'internal', PUBLIC_MESSAGES.internal);
    else res.destroy();
    return 500;
  } finally {
    const left = (inFlight.get(address) ?? 1) - 1;
    if (left > 0) inFlight.set(address, left);
    else inFlight.delete(address);
    slot.grant.release();
    deps.metrics.transfersActive.dec({ mode: 'http' });
    transferTimer();
    deps.metrics.transfersTotal.inc({ mode: 'http', outcome });
  }
}

/** `x-mutp-meta`: the signed statement of what this answer sends (nothing without a key). */
function signedMetaHeader(
  sign: SignAnswer | undefined,
  object: CachedObject,
  contentType: string,
  request: { url: string; range?: ByteRange },
): Record<string, string> {
  if (!sign) return {};
  const range = object.range && {
    start: object.range.start,
    ...(object.range.completeLength !== undefined ? { completeLength: object.range.completeLength } : {}),
  };
  const answer: HttpAnswer = {
    bytes: object.bytes,
    digest: object.digest,
    // What the headers say, signed: the Content-Type as served and, when asked, the range.
    attributes: { contentType, ...(request.range && range ? { range } : {}) },
    provenance: object.provenance,
    unitDigests: (layout) => object.digests.of(layout),
  };
  return { 'x-mutp-meta': Buffer.from(sign(answer, request)).toString('base64') };
}

/** Where a ranged answer's bytes sit in the resource (nothing for a whole object). */
function rangeHeaders(range: { start: number; completeLength?: number } | undefined): Record<string, string> {
  if (!range) return {};
  const headers: Record<string, string> = { 'x-mutp-range-start': String(range.start) };
  if (range.completeLength !== undefined) headers['x-mutp-complete-length'] = String(range.completeLength);
  return headers;
}

/** Writes the body under the token bucket and the socket's back-pressure; false if the client left. */
async function streamShaped(deps: HttpBaselineDeps, res: ServerResponse, bytes: Uint8Array): Promise<boolean> {
  const clock = deps.clock ?? (() => performance.now());
  const { bucket } = deps;
  // Half the burst: tokens keep accruing while a late timer wakes us, instead of overflowing.
  const chunkBytes = bucket.unlimited ? UNLIMITED_CHUNK_BYTES : Math.max(1, Math.floor(bucket.burstBytes / 2));
  let closed = false;
  const onClose = () => {
    closed = true;
  };
  res.on('close', onClose);
  try {
    let offset = 0;
    while (offset < bytes.byteLength) {
      if (closed || res.destroyed) return false;
      const size = Math.min(chunkBytes, bytes.byteLength - offset);
      const wait = bucket.waitTime(size, clock());
      if (wait > 0) {
        deps.metrics.uploadWaits.inc();
        await sleep(wait);
        continue;
      }
      if (!bucket.take(size, clock())) continue;
      const ok = res.write(bytes.subarray(offset, offset + size));
      offset += size;
      deps.meter.add(size);
      deps.metrics.bytesSent.inc({ kind: 'http' }, size);
      if (!ok) await drained(res);
    }
    if (closed || res.destroyed) return false;
    await new Promise<void>((resolve) => res.end(resolve));
    return true;
  } finally {
    res.off('close', onClose);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.ceil(ms))));
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
