import { createHash } from 'node:crypto';
import { PassThrough, Writable } from 'node:stream';
import { StreamSink, StreamSinkError } from '../src/stream-sink';

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
