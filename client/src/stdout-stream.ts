/**
 * The stream `mutp get -o -` writes to: fd 1, written without ever blocking the event loop.
 *
 * Node writes process.stdout synchronously when fd 1 is a file or (on POSIX) a terminal (Node's
 * "A note on process I/O"): a slow disk or terminal would then hold the loop, and with it every
 * proxy session, for as long as each write takes. There fd 1 is written by libuv's thread pool
 * instead (fs.WriteStream), and the sink awaits each write as before. Pipes and sockets stay
 * process.stdout: Node writes them asynchronously on POSIX already (libuv makes the fd
 * non-blocking and waits for it to be writable), and a thread-pool write to that non-blocking fd
 * would fail with EAGAIN when the pipe is full.
 */
import { createWriteStream, fstatSync } from 'node:fs';
import type { Writable } from 'node:stream';

export function stdoutForDownload(): Writable {
  const fd1 = fstatSync(1);
  if (fd1.isFIFO() || fd1.isSocket()) return process.stdout;
  // autoClose false: fd 1 stays open for the summary and whatever else writes to it later.
  return createWriteStream('', { fd: 1, autoClose: false });
}
