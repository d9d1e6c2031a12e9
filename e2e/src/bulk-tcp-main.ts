/**
 * A bulk TCP sender for bench:fairness: `--host H --port P` listens and streams bytes to every
 * connection as fast as TCP takes them, until the peer closes. It prints `{"port":P}` once
 * listening. The sender's congestion control is its namespace's (`net.ipv4.tcp_congestion_control`,
 * set by the bench): the point is one ordinary loss-based flow beside MUTP.
 */
import { createServer, Socket } from 'node:net';
import { Command } from 'commander';

const opts = new Command()
  .name('bulk-tcp')
  .requiredOption('--host <address>', 'address to listen on')
  .option('--port <n>', 'port (0: any)', (v) => Number(v), 0)
  .parse()
  .opts<{ host: string; port: number }>();

/** 64 KiB per write: large enough that the event loop is not the limit at tens of MB/s. */
const CHUNK = Buffer.alloc(64 * 1024, 0x5a);

function stream(socket: Socket): void {
  socket.on('error', () => socket.destroy());
  const pump = () => {
    while (!socket.destroyed && socket.write(CHUNK));
  };
  socket.on('drain', pump);
  pump();
}

const server = createServer(stream);
server.listen(opts.port, opts.host, () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
// Its connections never end by themselves: a stop ends them with the process.
process.on('SIGTERM', () => process.exit(0));
