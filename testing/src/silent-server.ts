/**
 * A server that accepts TCP connections and never answers: a hung service (no WebSocket or HTTP
 * handshake ever completes). Counts the connections it got, so tests can bound the attempts.
 */
import { createServer, Socket } from 'node:net';

export interface SilentServer {
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Destroys every connection and stops listening. */
  close(): Promise<void>;
}

export async function startSilentServer(): Promise<SilentServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    get accepted() {
      return accepted;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
