/**
 * The browser tests' local origin on 127.0.0.1: test pages, the harness bundle, and the test
 * objects (objects.ts) with Range support. Every object response carries `x-from: network`, which
 * an answer served through the (fake) downloader never has.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { objectFor } from '../harness/objects';

export interface TestServer {
  url: string;
  /** Requests the server saw, as "METHOD path?query". */
  log: string[];
  close(): Promise<void>;
}

const STATIC_TYPES: Record<string, string> = {
  '.m3u8': 'application/vnd.apple.mpegurl',
  '.mpd': 'application/dash+xml',
  '.m4s': 'video/iso.segment',
  '.mp4': 'video/mp4',
  '.ts': 'video/mp2t',
  '.js': 'text/javascript',
};

/** A file under `dir` for a `/static/...` path (served like the objects: x-from, Range). */
function staticObject(dir: string | undefined, path: string): { bytes: Uint8Array; contentType: string } | undefined {
  if (!dir || !path.startsWith('/static/')) return undefined;
  const file = normalize(join(dir, decodeURIComponent(path.slice('/static/'.length))));
  if (!file.startsWith(normalize(dir)) || !existsSync(file) || !statSync(file).isFile()) return undefined;
  return { bytes: readFileSync(file), contentType: STATIC_TYPES[extname(file)] ?? 'application/octet-stream' };
}

export function startTestServer(
  pages: Record<string, { body: string | Uint8Array; type: string }>,
  staticDir?: string,
): Promise<TestServer> {
  const log: string[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    log.push(`${req.method} ${url.pathname}${url.search}`);
    const page = pages[url.pathname];
    if (page) {
      res.writeHead(200, { 'content-type': page.type, 'cache-control': 'no-store' });
      res.end(page.body);
      return;
    }
    const obj = objectFor(url.pathname) ?? staticObject(staticDir, url.pathname);
    if (!obj) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    const headers: Record<string, string> = {
      'content-type': obj.contentType,
      'cache-control': 'no-store',
      'accept-ranges': 'bytes',
      'x-from': 'network',
      'access-control-allow-origin': '*',
      'access-control-expose-headers': 'x-from, content-range',
    };
    const total = obj.bytes.length;
    const range = /^bytes=(\d*)-(\d*)$/.exec(String(req.headers.range ?? ''));
    if (range) {
      let start = range[1] === '' ? Math.max(0, total - Number(range[2])) : Number(range[1]);
      let end = range[1] === '' ? total - 1 : range[2] === '' ? total - 1 : Math.min(Number(range[2]), total - 1);
      if (start >= total) {
        res.writeHead(416, { ...headers, 'content-range': `bytes */${total}` });
        res.end();
        return;
      }
      start = Math.max(0, start);
      end = Math.max(start, end);
      res.writeHead(206, {
        ...headers,
        'content-range': `bytes ${start}-${end}/${total}`,
        'content-length': String(end - start + 1),
      });
      res.end(obj.bytes.subarray(start, end + 1));
      return;
    }
    res.writeHead(200, { ...headers, 'content-length': String(total) });
    res.end(req.method === 'HEAD' ? undefined : obj.bytes);
  };
  const server: Server = createServer(handler);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        log,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
