import { ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable, Writable } from 'node:stream';
import { StreamSink, StreamSinkError } from '../src/stream-sink';
import { patternByte, TOTAL } from './fixtures/stdout-sink-child';

test('ranges reach the stream in order, hashed; a write out of order is refused', async () => {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  const sink = new StreamSink(out, 100);
  await sink.write(100, Uint8Array.of(1, 2, 3));
  await sink.commit({ nextOffset: 103 });
  await sink.write(103, Uint8Array.of(4));
  await expect(sink.write(200, Uint8Array.of(5))).rejects.toThrow(/write at 200, expected 104/);
  sink.close();
  expect(Buffer.concat(chunks)).toEqual(Buffer.from([1, 2, 3, 4]));
  expect(sink.verifiedBytes).toBe(4);
  expect(sink.digest()).toBe(
    createHash('sha256')
      .update(Buffer.from([1, 2, 3, 4]))
      .digest('hex'),
  );
});

test('a reader that went away fails the write (no crash), and every later one', async () => {
  const broken = new Writable({ write: (_chunk, _encoding, done) => done(new Error('EPIPE: broken pipe')) });
  const sink = new StreamSink(broken, 0);
  await expect(sink.write(0, Uint8Array.of(1))).rejects.toThrow(StreamSinkError);
  await expect(sink.write(1, Uint8Array.of(2))).rejects.toThrow(/cannot write to the output: EPIPE/);
  sink.close();
});

test('each wait for the reader goes through the hook (the --timeout clock stops meanwhile)', async () => {
  let taken: (() => void) | undefined;
  const slow = new Writable({ write: (_chunk, _encoding, done) => (taken = () => done()) });
  const waits: Promise<void>[] = [];
  const sink = new StreamSink(slow, 0, (flushed) => (waits.push(flushed), flushed));
  const written = sink.write(0, Uint8Array.of(1, 2));
  await new Promise(setImmediate);
  expect(waits).toHaveLength(1);
  taken!();
  await written;
  sink.close();
});

/**
 * `-o -` with a reader that pauses: the sink's process keeps running its timers while a write
 * waits for the reader (a blocked event loop would starve every proxy session), and every byte
 * arrives, in order, once the reader reads again. A child process writes through the sink
 * (fixtures/stdout-sink-child.ts); fd 3 reports the timer ticks that found a write waiting.
 */
describe('stdout for -o - never blocks the event loop', () => {
  const CHILD = join(__dirname, 'fixtures', 'stdout-sink-child.ts');
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  });

  /** Runs the child with fd 1 given by `launch`; resolves with what the reader got. */
  async function pausedReader(launch: (childArgs: string[]) => ChildProcess): Promise<Buffer> {
    const child = launch([process.execPath, '--import', 'tsx', CHILD, 'download']);
    children.push(child);
    const stdout = child.stdout!;
    const control = child.stdio[3] as Readable;
    stdout.pause(); // nothing is read until the child has shown that its loop turns
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    let pendingTicks = 0;
    await new Promise<void>((resolve, reject) => {
      const bound = setTimeout(
        () =>
          reject(new Error(`no timer tick while a write waited for the paused reader (${pendingTicks} seen in 20 s)`)),
        20_000,
      );
      control.on('data', (chunk: Buffer) => {
        pendingTicks += chunk.toString().split('p').length - 1;
        if (pendingTicks >= 20) {
          clearTimeout(bound);
          resolve();
        }
      });
    });
    const chunks: Buffer[] = [];
    stdout.on('data', (c: Buffer) => chunks.push(c));
    stdout.resume();
    await new Promise((resolve) => stdout.once('end', resolve));
    expect(await exited).toBe(0);
    return Buffer.concat(chunks);
  }

  const expected = () => Buffer.from(Array.from({ length: TOTAL }, (_, i) => patternByte(i)));

  test('a terminal (Node writes a TTY synchronously): written from the thread pool', async () => {
    // script(1) runs the child on a pseudo-terminal in raw mode (no newline translation) and
    // copies the terminal's output to its stdout: pausing that pauses the terminal's reader.
    const got = await pausedReader((args) =>
      spawn('script', ['-qfec', `stty raw -echo; exec ${args.map((a) => `'${a}'`).join(' ')}`, '/dev/null'], {
        cwd: join(__dirname, '..'),
        stdio: ['ignore', 'pipe', 'inherit', 'pipe'],
      }),
    );
    expect(got.length).toBe(TOTAL);
    expect(got.equals(expected())).toBe(true);
  }, 60_000);

  test('a pipe: written by libuv as it drains', async () => {
    const got = await pausedReader(([node, ...args]) =>
      spawn(node, args, { cwd: join(__dirname, '..'), stdio: ['ignore', 'pipe', 'inherit', 'pipe'] }),
    );
    expect(got.length).toBe(TOTAL);
    expect(got.equals(expected())).toBe(true);
  }, 60_000);

  test('a file (Node writes a file synchronously): every byte lands, in order', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mutp-stdout-'));
    try {
      const out = openSync(join(dir, 'out'), 'w');
      const child = spawn(process.execPath, ['--import', 'tsx', CHILD, 'download'], {
        cwd: join(__dirname, '..'),
        stdio: ['ignore', out, 'inherit', 'pipe'],
      });
      children.push(child);
      (child.stdio[3] as Readable).resume();
      closeSync(out);
      expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(0);
      expect(readFileSync(join(dir, 'out')).equals(expected())).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
