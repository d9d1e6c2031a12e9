/**
 * A stand-in for origo's proxy endpoint (ws, 127.0.0.1): validates every proxy frame with the
 * shared schemas, registers proxies that know the secret (error 'unauthorized' otherwise), and
 * lets a test talk to the proxy as origo would (relay signals, close connections, restart).
 */
import type { AddressInfo } from 'node:net';
import { OrigoToProxy, parseSignal, ProxyToOrigo, proxyToOrigo } from '@mutp/shared';
import WebSocket, { WebSocketServer } from 'ws';

export interface FakeOrigo {
  url: string;
  /** Every valid frame from proxies, in order. */
  received: ProxyToOrigo[];
  invalid: string[];
  connections: number;
  /** Registrations in order (proxyId asked for, or undefined). */
  registrations: { proxyId?: string; name: string }[];
  send(message: OrigoToProxy | string): void;
  /** Drops every proxy socket and stops listening; start() listens again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
  /** Called on each valid frame. */
  onFrame?: (m: ProxyToOrigo) => void;
}

export async function startFakeOrigo(secret: string, heartbeatIntervalMs = 200): Promise<FakeOrigo> {
  let wss: WebSocketServer | undefined;
  let port = 0;
  let sockets = new Set<WebSocket>();
  let nextId = 1;
  const origo: FakeOrigo = {
    url: '',
    received: [],
    invalid: [],
    connections: 0,
    registrations: [],
    send(message) {
      const text = typeof message === 'string' ? message : JSON.stringify(message);
      for (const ws of sockets) if (ws.readyState === WebSocket.OPEN) ws.send(text);
    },
    async start() {
      const server = new WebSocketServer({ host: '127.0.0.1', port, path: '/v1/proxy' });
      await new Promise<void>((resolve, reject) => {
        server.once('listening', resolve);
        server.once('error', reject);
      });
      port = (server.address() as AddressInfo).port;
      origo.url = `ws://127.0.0.1:${port}/v1/proxy`;
      wss = server;
      server.on('connection', (ws) => {
        origo.connections++;
        sockets.add(ws);
        ws.on('close', () => sockets.delete(ws));
        ws.on('message', (data) => {
          const parsed = parseSignal(proxyToOrigo, data.toString());
          if (!parsed.ok) {
            origo.invalid.push(parsed.error);
            return;
          }
          const m = parsed.value;
          origo.received.push(m);
          if (m.type === 'register') {
            origo.registrations.push({ proxyId: m.proxyId, name: m.name });
            if (m.secret !== secret) {
              ws.send(JSON.stringify({ type: 'error', code: 'unauthorized', message: 'bad secret' }));
              ws.close(4001, 'unauthorized');
              return;
            }
            const proxyId = m.proxyId ?? `proxy-${nextId++}`;
            ws.send(
              JSON.stringify({
                type: 'registered',
                proxyId,
                heartbeatIntervalMs,
                tokenKey: { kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' },
              }),
            );
          }
          origo.onFrame?.(m);
        });
      });
    },
    async stop() {
      const server = wss;
      wss = undefined;
      for (const ws of sockets) ws.terminate();
      sockets = new Set();
      if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
    close: () => origo.stop(),
  };
  await origo.start();
  return origo;
}
