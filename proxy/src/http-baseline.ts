/**
 * The Parallel HTTP baseline (the paper's comparison): `GET /v1/http?url=<encoded>` answers with
 * the same object MUTP would serve, through the same cache, SSRF guard, limits and upload shaping,
 * with Content-Length and Content-Type. Origin failures answer 404 / 413 / 502 / 403 with a JSON
 * error body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Admission } from '@mutp/shared';
import { asServeError, httpStatus } from './errors';
import { ProxyMetrics } from './metrics';
import { ObjectProvider } from './object-source';
import { RateMeter } from './rate-meter';
import { TokenBucket } from './token-bucket';

export interface HttpBaselineDeps {
  objects: ObjectProvider;
  bucket: TokenBucket;
  admission: Admission;
  metrics: ProxyMetrics;
  meter: RateMeter;
  clock?: () => number;
}

/** Write size without an upload limit (with one, writes are half the bucket's burst). */
const UNLIMITED_CHUNK_BYTES = 256 * 1024;

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
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
  const target = query.get('url');
  if (!target) {
    sendJson(res, 400, { error: 'bad-request', message: 'missing url parameter' });
    return 400;
  }
  const slot = deps.admission.tryAcquire(`http:${req.socket.remoteAddress ?? '?'}`);
  if (!slot.ok) {
    sendJson(res, 503, { error: 'overloaded', message: slot.reason });
    return 503;
  }
  deps.metrics.transfersActive.inc({ mode: 'http' });
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
        object = await deps.objects.get(target, withdraw.signal);
      } finally {
        res.off('close', onGone);
      }
    } catch (e) {
      const error = asServeError(e);
      outcome = error.kind;
      const status = httpStatus(error.kind);
      sendJson(res, status, { error: error.kind, message: error.message });
      return status;
    }
    res.writeHead(200, {
      'content-type': object.contentType ?? 'application/octet-stream',
      'content-length': object.bytes.byteLength,
      'cache-control': 'no-store',
      'access-control-allow-origin': '*',
      'access-control-expose-headers': 'content-length, x-mutp-sha256',
      'x-mutp-sha256': Buffer.from(object.digest).toString('hex'),
    });
    const completed = await streamShaped(deps, res, object.bytes);
    if (!completed) outcome = 'aborted';
    return 200;
  } catch (e) {
    outcome = 'internal';
    if (!res.headersSent) sendJson(res, 500, { error: 'internal', message: asServeError(e).message });
    else res.destroy();
    return 500;
  } finally {
    slot.grant.release();
    deps.metrics.transfersActive.dec({ mode: 'http' });
    deps.metrics.transfersTotal.inc({ mode: 'http', outcome });
  }
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
