/**
 * An origin far away, in front of the local one (origin.ts): every request waits `firstByteMs`
 * before it is passed on (a long round trip plus the origin's own time to first byte), and each
 * response is paced to `bytesPerSecond` (one origin connection's throughput). What makes an
 * origin fetch cost what it costs in a deployment, so a bench can see what hides it
 * (bench-cli-pipeline.ts: ranges staged ahead). Loopback only; the request log stays the inner
 * origin's.
 */
import { createServer, IncomingMessage, request, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface DistantOrigin {
  url: string;
  close(): Promise<void>;
}

export interface DistanceOptions {
  firstByteMs: number;
  /** Per response; 0: as fast as the inner origin. */
  bytesPerSecond: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function startDistantOrigin(innerUrl: string, o: DistanceOptions): Promise<DistantOrigin> {
  const inner = new URL(innerUrl);
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void relay(req, res);
  });
  const relay = async (req: IncomingMessage, res: ServerResponse) => {
    await sleep(o.firstByteMs);
    const upstream = request(
      { host: inner.hostname, port: inner.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        void pace(answer, res, o.bytesPerSecond);
      },
    );
    upstream.on('error', () => res.destroy());
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Copies `from` to `to` no faster than `bytesPerSecond` (measured from the first byte). */
async function pace(from: IncomingMessage, to: ServerResponse, bytesPerSecond: number): Promise<void> {
  const started = performance.now();
  let sent = 0;
  try {
    for await (const chunk of from as AsyncIterable<Buffer>) {
      if (!to.write(chunk)) await new Promise((r) => to.once('drain', r));
      sent += chunk.length;
      if (bytesPerSecond > 0) {
        const dueMs = (sent / bytesPerSecond) * 1000 - (performance.now() - started);
        if (dueMs > 1) await sleep(dueMs);
      }
    }
    to.end();
  } catch {
    to.destroy();
  }
}
