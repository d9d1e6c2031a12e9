import { createHash } from 'node:crypto';
import { loadSha256, Sha256 } from '../src/downloader/sha256';

let sha256: Sha256;
beforeAll(async () => {
  sha256 = await loadSha256();
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const reference = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

test('FIPS 180-4 examples', () => {
  expect(hex(sha256(new Uint8Array(0)))).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  expect(hex(sha256(new TextEncoder().encode('abc')))).toBe(
    'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
  );
  expect(hex(sha256(new TextEncoder().encode('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq')))).toBe(
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1',
  );
});

test('every length around the padding boundaries, and subarrays, match node:crypto', () => {
  const data = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 2654435761) >>> 24);
  for (let n = 0; n <= 200; n++) expect(hex(sha256(data.subarray(0, n)))).toBe(reference(data.subarray(0, n)));
  for (const n of [1000, 4095, 4096, 65_536, 70_000])
    expect(hex(sha256(data.subarray(0, n)))).toBe(reference(data.subarray(0, n)));
  // Not at the buffer's start (the core hashes units of a larger object in place).
  expect(hex(sha256(data.subarray(13, 13 + 5000)))).toBe(reference(data.subarray(13, 13 + 5000)));
});

test('calls do not share state: each digest is its own array', () => {
  const a = sha256(new Uint8Array([1]));
  const b = sha256(new Uint8Array([2]));
  expect(hex(a)).toBe(reference(new Uint8Array([1])));
  expect(hex(b)).toBe(reference(new Uint8Array([2])));
});
