/**
 * Recycled WebAssembly instances give memory back: an instance that grew for a large object is
 * dropped once its last encoder or decoder is freed, and the next one starts small.
 */
import { Layout } from '@mutp/shared';
import { RecyclingCodec } from '../src/recycling';
import { loadNodeCodecs } from '../src/node';

const MiB = 1 << 20;

function object(n: number): Uint8Array {
  const bytes = new Uint8Array(n);
  for (let i = 0; i < n; i++) bytes[i] = (i * 37 + 11) & 0xff;
  return bytes;
}

test.each(['rlnc', 'fountain'] as const)(
  '%s: an idle instance above the threshold is replaced by a small one',
  async (mode) => {
    const codecs = await loadNodeCodecs({ recycleAboveBytes: 20 * MiB });
    const codec = codecs[mode] as RecyclingCodec;
    const layout = (n: number) => new Layout(mode, n, 1120, mode === 'rlnc' ? 24 : 1);
    const big = object(24 * MiB);
    const first = codec.createEncoder(big, layout(big.length));
    const second = codec.createEncoder(object(100_000), layout(100_000));
    first.encodeInto(0, 5, new Uint8Array(1120));
    const grown = codec.stats().memoryBytes;
    expect(grown).toBeGreaterThan(24 * MiB);
    first.free();
    // Still in use by `second`: kept.
    expect(codec.stats()).toMatchObject({ recycled: 0, live: 1 });
    const out = new Uint8Array(1120);
    second.encodeInto(0, 5, out);
    second.free();
    expect(codec.stats()).toMatchObject({ recycled: 1, live: 0, memoryBytes: 0 });
    // The next transfer runs on a fresh instance, and decodes what the old one encoded.
    const decoder = codec.createDecoder(layout(100_000));
    expect(codec.stats().memoryBytes).toBeLessThan(grown / 2);
    const encoder = codec.createEncoder(object(100_000), layout(100_000));
    const l = layout(100_000);
    for (let unit = 0; unit < l.unitCount; unit++) {
      for (let key = 0; !decoder.isComplete(unit); key++) {
        // RLNC keys are coefficient seeds, fountain keys block ids.
        const k = mode === 'rlnc' ? Math.imul(key + 1, 2654435761) >>> 0 : key;
        if (encoder.usableKey && !encoder.usableKey(unit, k)) continue;
        const payload = new Uint8Array(1120);
        encoder.encodeInto(unit, k, payload);
        decoder.add(unit, k, payload);
      }
    }
    expect(Buffer.from(decoder.readObject()).equals(Buffer.from(object(100_000)))).toBe(true);
    encoder.free();
    decoder.free();
    // Small instances are kept.
    expect(codec.stats().recycled).toBe(1);
  },
);

test('an instance below the threshold is kept across uses', async () => {
  const codecs = await loadNodeCodecs({ recycleAboveBytes: 256 * MiB });
  const codec = codecs.rlnc as RecyclingCodec;
  for (let i = 0; i < 3; i++) codec.createEncoder(object(MiB), new Layout('rlnc', MiB, 1120, 24)).free();
  expect(codec.stats().recycled).toBe(0);
});
