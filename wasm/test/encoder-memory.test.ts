/**
 * What the codecs say an encoder holds (Codec.encoderBytes, charged to a proxy's memory budget)
 * against what it really allocates in wasm memory. An estimate below the truth would let a proxy
 * exceed its budget; one far above would refuse transfers it could serve.
 */
import { Layout } from '@mutp/shared';
import { fountainCodec, fountainEncoderBytes } from '../src/fountain';
import { loadRlncCodecNode } from '../src/rlnc-node';
import { loadWirehairNode } from '../src/wirehair-node';

const SIZES = [3 * 1120, 100_000, 1 << 20, 4 << 20];

function object(n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 131 + 7) & 0xff;
  return bytes;
}

test.each(SIZES)('a fountain encoder of %d bytes allocates at most what fountainEncoderBytes charges', async (n) => {
  const wirehair = await loadWirehairNode();
  const codec = fountainCodec(wirehair);
  const before = wirehair.allocatedBytes();
  const encoder = codec.createEncoder(object(n), new Layout('fountain', n, 1120, 1));
  // Wirehair builds its code on the first block asked for.
  encoder.encodeInto(0, 3, new Uint8Array(1120));
  const allocated = wirehair.allocatedBytes() - before;
  encoder.free();
  expect(allocated).toBeGreaterThan(n); // the message is copied, and more
  expect(allocated).toBeLessThanOrEqual(fountainEncoderBytes(n));
  expect(codec.encoderBytes?.(n)).toBe(fountainEncoderBytes(n));
  // Not so pessimistic that a proxy refuses what it could serve: within 1.3x (+ the fixed part).
  expect(fountainEncoderBytes(n)).toBeLessThan(allocated * 1.3 + 256 * 1024);
});

test.each(SIZES)('an RLNC encoder of %d bytes allocates at most what encoderBytes charges', async (n) => {
  const codec = await loadRlncCodecNode();
  const before = codec.module.allocatedBytes();
  const encoder = codec.createEncoder(object(n), new Layout('rlnc', n, 1120, 24));
  encoder.encodeInto(0, 12345, new Uint8Array(1120));
  const allocated = codec.module.allocatedBytes() - before;
  encoder.free();
  expect(allocated).toBeGreaterThanOrEqual(n);
  expect(allocated).toBeLessThanOrEqual(codec.encoderBytes(n));
});
