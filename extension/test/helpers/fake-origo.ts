/**
 * A stand-in origo for the extension's browser tests: a WebSocket server on 127.0.0.1 that
 * welcomes every client and answers each proxy request with the proxies it is given (at most the
 * count asked for). It speaks just enough of docs/signalling.md for a connection check.
 */
import { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export interface FakeProxy {
  proxyId: string;
  name: string;
  httpUrl: string;
}

export interface FakeOrigo {
  /** ws://127.0.0.1:<port>/v1/client */
  clientUrl: string;
  /** Every message clients sent, parsed. */
  received: Record<string, unknown>[];
  close(): Promise<void>;
}

export async function startFakeOrigo(proxies: FakeProxy[]): Promise<FakeOrigo> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/client' });
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const received: Record<string, unknown>[] = [];
  let clients = 0;
  server.on('connection', (socket) => {
    const clientId = `client-${++clients}`;
    socket.on('message', (data) => {
      let m: Record<string, unknown>;
      try {
        m = JSON.parse(String(data)) as Record<string, unknown>;
      } catch {
        return;
      }
      received.push(m);
      if (m.type === 'hello') {
        socket.send(
          JSON.stringify({ type: 'welcome', clientId, token: 'e30.e30.c2ln', expiresAt: Date.now() + 3_600_000 }),
        );
      } else if (m.type === 'request-proxies') {
        const offered = proxies.slice(0, Number(m.count)).map((p) => ({ ...p, capacityBps: 1_000_000 }));
        socket.send(JSON.stringify({ type: 'proxies', requestId: m.requestId, proxies: offered }));
      }
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    clientUrl: `ws://127.0.0.1:${port}/v1/client`,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of server.clients) client.terminate();
        server.close(() => resolve());
      }),
  };
}
