/**
 * The Node host's WebSocket gives up on a close handshake origo does not answer (the peer's
 * address is gone after a network change) within CLOSE_HANDSHAKE_MS, instead of ws's 30 s that
 * held `mutp` open after its last download.
 */
import { once } from 'node:events';
import { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { CLOSE_HANDSHAKE_MS, createNodeHost } from '../src/node-host';

/** Far beyond CLOSE_HANDSHAKE_MS, far below ws's 30 s default. */
const WAIT_MS = CLOSE_HANDSHAKE_MS + 6000;

test(
  'a close the peer never answers ends within CLOSE_HANDSHAKE_MS, not ws 30 s',
  async () => {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(server, 'listening');
    // The server side stops reading once the connection is up: the client's close frame is never
    // seen, never answered (as when the client's old address is gone).
    server.on('connection', (ws) => (ws as unknown as { _socket: { pause(): void } })._socket.pause());
    const host = createNodeHost();
    const socket = host.webSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      await new Promise<void>((resolve, reject) => {
        socket.onopen = () => resolve();
        socket.onerror = reject;
      });
      let timer: NodeJS.Timeout | undefined;
      const closed = new Promise<number | string>((resolve) => {
        socket.onclose = (e) => resolve(e.code);
        timer = setTimeout(
          () => resolve(`no close event ${WAIT_MS} ms after close() (ws's default waits 30 s)`),
          WAIT_MS,
        );
      });
      socket.close(1000, 'bye');
      // 1006: dropped without the peer's close frame.
      expect(await closed).toBe(1006);
      clearTimeout(timer);
    } finally {
      for (const client of server.clients) client.terminate();
      server.close();
    }
  },
  WAIT_MS + 5000,
);
