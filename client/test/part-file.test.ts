import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { controlPath, PartFile, PartFileError, partPath, readControl } from '../src/part-file';

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'mutp-part-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 0xff);
const sha = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
};

test('written ranges are committed to the control file, and the file takes its name at the end', async () => {
  const file = join(dir, 'video.mp4');
  const part = PartFile.create(file, { url: 'https://o.example/video.mp4', start: 0 });
  expect(readControl(file)).toMatchObject({ nextOffset: 0 });
  const [a, b] = [bytes(1000, 1), bytes(500, 2)];
  await part.write(0, a);
  await part.commit({ nextOffset: 1000, completeLength: 1500 });
  expect(readControl(file)).toEqual({
    format: 1,
    url: 'https://o.example/video.mp4',
    start: 0,
    nextOffset: 1000,
    completeLength: 1500,
  });
  await part.write(1000, b);
  await part.commit({ nextOffset: 1500, completeLength: 1500 });
  expect(part.digest()).toBe(sha(a, b));
  part.finish();
  expect(readFileSync(file)).toEqual(Buffer.concat([a, b]));
  expect(existsSync(partPath(file)) || existsSync(controlPath(file))).toBe(false);
});

test('resume cuts the part file back to what the control file vouches for and hashes that prefix', async () => {
  const file = join(dir, 'x.bin');
  const identity = { url: 'https://o.example/x.bin', start: 100, end: 2099 };
  const first = PartFile.create(file, identity);
  const a = bytes(1000, 3);
  await first.write(100, a);
  await first.commit({ nextOffset: 1100 });
  // Bytes written after the last commit (a crash before the control file moved) are not trusted.
  await first.write(1100, bytes(300, 9));
  first.close();

  const resumed = PartFile.resume(file, identity, readControl(file)!);
  expect(resumed.resumeFrom).toEqual({ nextOffset: 1100 });
  expect(resumed.verifiedBytes).toBe(1000);
  const b = bytes(1000, 4);
  await resumed.write(1100, b);
  await resumed.commit({ nextOffset: 2100 });
  expect(resumed.digest()).toBe(sha(a, b));
  resumed.finish();
  expect(readFileSync(file)).toEqual(Buffer.concat([a, b]));
});

test('a control file of another URL or range, a missing or short part file, or garbage: refused by name', async () => {
  const file = join(dir, 'y.bin');
  const identity = { url: 'https://o.example/y.bin', start: 0 };
  const part = PartFile.create(file, identity);
  await part.write(0, bytes(100, 5));
  await part.commit({ nextOffset: 100 });
  part.close();
  const control = readControl(file)!;
  expect(() => PartFile.resume(file, { ...identity, url: 'https://o.example/z' }, control)).toThrow(/another URL/);
  expect(() => PartFile.resume(file, { ...identity, start: 5 }, control)).toThrow(/another range/);
  truncateSync(partPath(file), 50);
  expect(() => PartFile.resume(file, identity, control)).toThrow(/shorter than its control file says/);
  rmSync(partPath(file));
  expect(() => PartFile.resume(file, identity, control)).toThrow(/missing/);
  writeFileSync(controlPath(file), '{"format": 1, "url": 3}');
  expect(() => readControl(file)).toThrow(PartFileError);
  writeFileSync(controlPath(file), 'not json');
  expect(() => readControl(file)).toThrow(/is not a control file/);
});

test('an out-of-order write is refused; discard leaves nothing', async () => {
  const file = join(dir, 'w.bin');
  const part = PartFile.create(file, { url: 'https://o.example/w', start: 0 });
  await expect(part.write(10, bytes(10, 1))).rejects.toThrow(/expected 0/);
  part.discard();
  expect(existsSync(partPath(file)) || existsSync(controlPath(file))).toBe(false);
});
