/**
 * A local origin for the demo, tests and benchmarks: serves the generated streams
 * (e2e/media/out) and synthetic objects over plain HTTP, with byte ranges and CORS, and counts
 * requests and the body bytes sent for each (bench:ranges compares what the proxies fetched with
 * what the page got). Fault paths for tests: /status/<code>, /hang, /big/<bytes>; any file also
 * under /fresh/<tag>/<path>, a URL no cache has seen. /large/<bytes>/<seed> is a synthetic object
 * of up to 4 GiB made block by block on demand (ranges of a file larger than memory).
 * /object/ answers carry a Repr-Digest (RFC 9530). `/_bytes?path=<p>&path=...` answers what it
 * sent for those paths (a bench whose origin runs in another process reads it there).
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { extname, join, normalize, sep } from 'node:path';

export const MEDIA_DIR = join(__dirname, '..', 'media', 'out');

const CONTENT_TYPES: Record<string, string> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.mpd': 'application/dash+xml',
  '.ts': 'video/mp2t',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.bin': 'application/octet-stream',
};

export interface OriginRequest {
  method: string;
  path: string;
  userAgent: string;
  range?: string;
  /** Body bytes handed to the connection so far (a response cut short counts what was sent). */
  bytes: number;
}

export interface Origin {
  url: string;
  /** Requests served per path (for "every segment went through MUTP" checks). */
  requests: Map<string, number>;
  /** Every request in arrival order, with the client's User-Agent (browser or proxy). */
  log: OriginRequest[];
  /** `/changing/<bytes>/<seed>` now serves its next version (other bytes, another strong ETag). */
  change(path: string): void;
  close(): Promise<void>;
}

/**
 * Resolves once `path` has had no request for `quietMs` (fetches a killed client's proxies still
 * had under way have reached the origin); rejects after `timeoutMs`.
 */
export async function originQuiet(origin: Origin, path: string, quietMs = 1000, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = origin.requests.get(path) ?? 0;
  let quietSince = Date.now();
  while (Date.now() - quietSince < quietMs) {
    if (Date.now() > deadline) throw new Error(`${path} still requested after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
    const now = origin.requests.get(path) ?? 0;
    if (now !== seen) [seen, quietSince] = [now, Date.now()];
  }
}

/** Deterministic bytes for /object/<bytes>/<seed>: the same on every run. */
export function syntheticObject(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < bytes; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x >>> 24;
  }
  return out;
}

const MAX_SYNTHETIC_BYTES = 256 * 1024 * 1024;

/**
 * /object/ bodies made lately, with their Repr-Digest (RFC 9530): a ranged request (a shield
 * child's check, a player's range) does not make the whole object again on the event loop the
 * bench's client shares. Bounded by SYNTHETIC_CACHE_BYTES, oldest out first.
 */
const synthetic = new Map<string, { bytes: Buffer; reprDigest: string }>();
let syntheticBytes = 0;
const SYNTHETIC_CACHE_BYTES = 64 * 1024 * 1024;

function madeObject(size: number, seed: number): { bytes: Buffer; reprDigest: string } {
  const key = `${size}/${seed}`;
  const kept = synthetic.get(key);
  if (kept) return kept;
  const bytes = Buffer.from(syntheticObject(size, seed));
  const made = { bytes, reprDigest: `sha-256=:${createHash('sha256').update(bytes).digest('base64')}:` };
  if (size > SYNTHETIC_CACHE_BYTES) return made;
  for (const [k, v] of synthetic) {
    if (syntheticBytes + size <= SYNTHETIC_CACHE_BYTES) break;
    synthetic.delete(k);
    syntheticBytes -= v.bytes.length;
  }
  synthetic.set(key, made);
  syntheticBytes += size;
  return made;
}

/** /large/ objects are made of these blocks, each from its own seed, so any range costs its own bytes only. */
export const LARGE_BLOCK_BYTES = 64 * 1024;
const MAX_LARGE_BYTES = 4 * 1024 ** 3;

/** Bytes start..end-1 of /large/<total>/<seed> (block k is the synthetic object of seed*1000003 + k + 1). */
export function largeObjectSlice(total: number, seed: number, start: number, end: number): Uint8Array {
  const out = new Uint8Array(Math.max(0, Math.min(end, total) - start));
  for (let at = start; at < start + out.length;) {
    const block = Math.floor(at / LARGE_BLOCK_BYTES);
    const blockStart = block * LARGE_BLOCK_BYTES;
    const bytes = syntheticObject(Math.min(LARGE_BLOCK_BYTES, total - blockStart), (seed * 1000003 + block + 1) >>> 0);
    const from = at - blockStart;
    const n = Math.min(bytes.length - from, start + out.length - at);
    out.set(bytes.subarray(from, from + n), at - start);
    at += n;
  }
  return out;
}

/** `/fresh/<tag>/` in front of a media path (see route()). */
export const FRESH_ALIAS = /^\/fresh\/[\w-]{1,64}\//;

export function startOrigin(options: { port?: number; host?: string; root?: string } = {}): Promise<Origin> {
  const root = options.root ?? MEDIA_DIR;
  const requests = new Map<string, number>();
  const log: OriginRequest[] = [];
  const versions = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent((req.url ?? '/').split('?')[0]);
    // What the origin sent for some paths, for a bench whose origin is another process.
    if (path === '/_bytes') return void sendJsonOf(res, bytesSentFor(log, req.url ?? ''));
    requests.set(path, (requests.get(path) ?? 0) + 1);
    if (log.length >= 100_000) log.shift();
    const entry: OriginRequest = {
      method: req.method ?? '?',
      path,
      userAgent: String(req.headers['user-agent'] ?? ''),
      ...(req.headers.range ? { range: String(req.headers.range) } : {}),
      bytes: 0,
    };
    log.push(entry);
    countBodyBytes(res, entry);
    res.setHeader('access-control-allow-origin', '*');
    res.setHeader('access-control-expose-headers', 'content-length, content-range, content-type');
    if (req.method === 'OPTIONS') {
      res.setHeader('access-control-allow-headers', 'range');
      res.writeHead(204).end();
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return;
    }
    route(req, res, path, root, versions);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://${options.host ?? '127.0.0.1'}:${port}`,
        requests,
        log,
        change: (path) => versions.set(path, (versions.get(path) ?? 0) + 1),
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

/** `/_bytes?path=a&path=b`: the body bytes sent and the requests answered for those paths. */
function bytesSentFor(log: readonly OriginRequest[], url: string): { bytes: number; requests: number } {
  const paths = new Set(new URL(url, 'http://origin.invalid').searchParams.getAll('path'));
  let [bytes, requests] = [0, 0];
  for (const r of log) if (paths.has(r.path)) [bytes, requests] = [bytes + r.bytes, requests + 1];
  return { bytes, requests };
}

function sendJsonOf(res: ServerResponse, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/** Adds every body chunk written to `res` to `entry.bytes`. */
function countBodyBytes(res: ServerResponse, entry: OriginRequest): void {
  const size = (chunk: unknown) =>
    typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk instanceof Uint8Array ? chunk.byteLength : 0;
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    entry.bytes += size(chunk);
    return write(chunk, ...rest);
  }) as ServerResponse['write'];
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    if (typeof chunk !== 'function') entry.bytes += size(chunk);
    return end(chunk, ...rest);
  }) as ServerResponse['end'];
}

function route(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  root: string,
  versions: ReadonlyMap<string, number>,
): void {
  const status = /^\/status\/(\d{3})$/.exec(path);
  if (status) {
    res.writeHead(Number(status[1]), { 'content-type': 'text/plain' }).end(`status ${status[1]}\n`);
    return;
  }
  if (path === '/hang') return; // never answers: the proxies' origin timeout must fire
  const object = /^\/object\/(\d+)\/(\d+)$/.exec(path);
  if (object) {
    const bytes = Number(object[1]);
    if (bytes > MAX_SYNTHETIC_BYTES) {
      res.writeHead(413).end();
      return;
    }
    // A strong ETag as static servers send one: proxies sign it into META, origo judges by it.
    const etag = `"${bytes}-${Number(object[2])}"`;
    const made = madeObject(bytes, Number(object[2]));
    sendBytes(req, res, made.bytes, 'application/octet-stream', etag, made.reprDigest);
    return;
  }
  const changing = /^\/changing\/(\d+)\/(\d+)$/.exec(path);
  if (changing) {
    // An object whose content changes when the test says so (Origin.change): version v is the
    // synthetic object of seed + 1000 v, under its own strong ETag.
    const bytes = Math.min(Number(changing[1]), MAX_SYNTHETIC_BYTES);
    const version = versions.get(path) ?? 0;
    const seed = Number(changing[2]) + 1000 * version;
    sendBytes(req, res, Buffer.from(syntheticObject(bytes, seed)), 'application/octet-stream', `"${seed}-v${version}"`);
    return;
  }
  const large = /^\/large\/(\d+)\/(\d+)$/.exec(path);
  if (large) {
    sendLarge(req, res, Number(large[1]), Number(large[2]));
    return;
  }
  const big = /^\/big\/(\d+)$/.exec(path);
  if (big) {
    // Chunked, no Content-Length: the size cap must hold while streaming.
    const total = Math.min(Number(big[1]), MAX_SYNTHETIC_BYTES);
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const chunk = Buffer.alloc(64 * 1024, 7);
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        const n = Math.min(chunk.length, total - sent);
        sent += n;
        if (!res.write(chunk.subarray(0, n))) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
    return;
  }
  // /fresh/<tag>/<path> is <path> under another URL: a cold object for every cache on the way
  // (proxies, the extension), so each benchmark play pays its origin fetches.
  const file = normalize(join(root, path.replace(FRESH_ALIAS, '/')));
  if (!file.startsWith(root + sep) || !existsSync(file) || !statSync(file).isFile()) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    return;
  }
  const type = CONTENT_TYPES[extname(file)] ?? 'application/octet-stream';
  sendFile(req, res, file, statSync(file).size, type);
}

function parseRange(header: string | undefined, size: number): [number, number] | null | 'invalid' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return 'invalid';
  let start = m[1] === '' ? size - Number(m[2]) : Number(m[1]);
  let end = m[1] === '' || m[2] === '' ? size - 1 : Number(m[2]);
  start = Math.max(0, start);
  end = Math.min(size - 1, end);
  return start > end ? 'invalid' : [start, end];
}

function sendFile(req: IncomingMessage, res: ServerResponse, file: string, size: number, type: string): void {
  const range = parseRange(req.headers.range, size);
  if (range === 'invalid') {
    res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
    return;
  }
  const [start, end] = range ?? [0, size - 1];
  const headers = { 'content-type': type, 'content-length': String(end - start + 1), 'accept-ranges': 'bytes' };
  if (range) res.writeHead(206, { ...headers, 'content-range': `bytes ${start}-${end}/${size}` });
  else res.writeHead(200, headers);
  if (req.method === 'HEAD' || size === 0) {
    res.end();
    return;
  }
  createReadStream(file, { start, end }).pipe(res);
}

function sendBytes(
  req: IncomingMessage,
  res: ServerResponse,
  bytes: Buffer,
  type: string,
  etag?: string,
  reprDigest?: string,
): void {
  const range = parseRange(req.headers.range, bytes.length);
  if (range === 'invalid') {
    res.writeHead(416, { 'content-range': `bytes */${bytes.length}` }).end();
    return;
  }
  const [start, end] = range ?? [0, bytes.length - 1];
  const headers = {
    'content-type': type,
    'content-length': String(end - start + 1),
    'accept-ranges': 'bytes',
    ...(etag ? { etag } : {}),
    ...(reprDigest ? { 'repr-digest': reprDigest } : {}),
  };
  if (range) res.writeHead(206, { ...headers, 'content-range': `bytes ${start}-${end}/${bytes.length}` });
  else res.writeHead(200, headers);
  res.end(req.method === 'HEAD' ? undefined : bytes.subarray(start, end + 1));
}

/** A /large/ object (or a range of it) streamed block by block, with a strong ETag. */
function sendLarge(req: IncomingMessage, res: ServerResponse, total: number, seed: number): void {
  if (total < 1 || total > MAX_LARGE_BYTES) {
    res.writeHead(413).end();
    return;
  }
  const range = parseRange(req.headers.range, total);
  if (range === 'invalid') {
    res.writeHead(416, { 'content-range': `bytes */${total}` }).end();
    return;
  }
  const [start, end] = range ?? [0, total - 1];
  const headers = {
    'content-type': 'application/octet-stream',
    'content-length': String(end - start + 1),
    'accept-ranges': 'bytes',
    etag: `"large-${total}-${seed}"`,
  };
  if (range) res.writeHead(206, { ...headers, 'content-range': `bytes ${start}-${end}/${total}` });
  else res.writeHead(200, headers);
  if (req.method === 'HEAD') return void res.end();
  let at = start;
  const pump = () => {
    while (at <= end) {
      const next = Math.min(end + 1, (Math.floor(at / LARGE_BLOCK_BYTES) + 1) * LARGE_BLOCK_BYTES);
      const slice = largeObjectSlice(total, seed, at, next);
      at = next;
      if (!res.write(slice)) return void res.once('drain', pump);
    }
    res.end();
  };
  res.once('close', () => (at = end + 1));
  pump();
}
