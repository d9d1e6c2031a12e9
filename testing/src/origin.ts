/**
 * Local HTTP origins for tests that download through a proxy, and the deterministic objects they
 * serve (the same seed gives the same bytes, so a download is checked byte for byte).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { seededRandom } from '@mutp/shared';

/** Deterministic pseudo-random bytes. */
export function makeObject(size: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i += 4) {
    const v = random();
    bytes[i] = v;
    if (i + 1 < size) bytes[i + 1] = v >>> 8;
    if (i + 2 < size) bytes[i + 2] = v >>> 16;
    if (i + 3 < size) bytes[i + 3] = v >>> 24;
  }
  return bytes;
}

export interface TestServer {
  server: Server;
  url: string;
  hits: number;
  close(): Promise<void>;
}

/** An HTTP server on 127.0.0.1, port 0, counting requests; close() drops every connection. */
export async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  const server = createServer((req, res) => {
    result.hits++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const result: TestServer = {
    server,
    url: `http://127.0.0.1:${port}`,
    hits: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return result;
}

/** Origin serving fixed objects by path (others 404). */
export function objectOrigin(objects: Record<string, Uint8Array>, contentType = 'video/mp4'): Promise<TestServer> {
  return startServer((req, res) => {
    const body = objects[req.url ?? ''];
    if (!body) {
      res.writeHead(404).end('not here');
      return;
    }
    res.writeHead(200, { 'content-type': contentType, 'content-length': body.length });
    res.end(body);
  });
}
