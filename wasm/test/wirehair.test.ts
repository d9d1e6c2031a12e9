import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  blockLength,
  isUsableBlockId,
  loadWirehairSync,
  Wirehair,
  WirehairDecoder,
  WirehairEncoder,
  WirehairError,
  WirehairErrorCode,
  wirehairParams,
  WIREHAIR_MAX_BLOCK_BYTES,
  WIREHAIR_MAX_MESSAGE_BYTES,
} from '../src/wirehair';
import { loadWirehairNodeSync, readWirehairWasm } from '../src/wirehair-node';

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');

/** xorshift32 (13, 17, 5), as in wasm/wirehair/tests/common/mod.rs. */
class XorShift32 {
  constructor(private x: number) {}
  next(): number {
    let x = this.x;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    this.x = x >>> 0;
    return this.x;
  }
  /** true with probability p */
  chance(p: number): boolean {
    return this.next() < p * 0x1_0000_0000;
  }
  below(n: number): number {
    return Math.floor((this.next() / 0x1_0000_0000) * n);
  }
}

/** The vectors' message: byte i = top 8 bits of the (i+1)-th xorshift32 output, seed 0x9E3779B9 ^ length. */
function testMessage(length: number): Uint8Array {
  const rng = new XorShift32((0x9e3779b9 ^ length) >>> 0);
  const out = new Uint8Array(length);
  for (let i = 0; i < length; i++) out[i] = rng.next() >>> 24;
  return out;
}

interface VectorCase {
  messageBytes: number;
  blockBytes: number;
  blockCount: number;
  messageSha256: string;
  blocks: { id: number; bytes: number; sha256: string }[];
}
const vectors = JSON.parse(readFileSync(join(__dirname, '..', 'wirehair', 'tests', 'vectors.json'), 'utf8')) as {
  cases: VectorCase[];
};

function expectWirehairError(f: () => unknown, code: WirehairErrorCode): void {
  let thrown: unknown;
  try {
    f();
  } catch (e) {
    thrown = e;
  }
  expect(thrown).toBeInstanceOf(WirehairError);
  expect((thrown as WirehairError).code).toBe(code);
}

/** Sends ids upward from `firstId` through a lossy channel until the decoder completes. */
function feed(
  encoder: WirehairEncoder,
  decoder: WirehairDecoder,
  loss: number,
  rng: XorShift32,
  firstId = 0,
  maxSent = 100_000,
): number {
  let sent = 0;
  for (let id = firstId; sent < maxSent; id++) {
    if (!isUsableBlockId(encoder.params, id)) continue;
    sent++;
    if (rng.chance(loss)) continue;
    if (decoder.decode(id, encoder.encode(id)) === 'complete') return sent;
  }
  throw new Error(`no completion after ${sent} blocks`);
}

let wh: Wirehair;
beforeAll(() => {
  wh = loadWirehairNodeSync();
});

describe('wirehair wasm', () => {
  test('blocks are byte-identical to the native vectors', () => {
    expect(vectors.cases.length).toBeGreaterThanOrEqual(5);
    for (const c of vectors.cases) {
      const message = testMessage(c.messageBytes);
      expect(sha256(message)).toBe(c.messageSha256);
      const encoder = wh.createEncoder(message, c.blockBytes);
      expect(encoder.params.blockCount).toBe(c.blockCount);
      for (const b of c.blocks) {
        const block = encoder.encode(b.id);
        expect({ id: b.id, bytes: block.length, sha256: sha256(block) }).toEqual(b);
        expect(sha256(encoder.encodeView(b.id))).toBe(b.sha256);
      }
      encoder.free();
    }
  });

  const sizes: [number, number][] = [
    [100_000, 1200], // short last block
    [1_048_576, 1200],
    [120_000, 1200], // full last block
    [2_401, 1200], // N = 3, last block 1 byte
    [2_000, 1000], // N = 2
    [65_536, 64], // N = 1024
  ];
  test.each(sizes)('round trip of %i bytes in %i-byte blocks with 0%, 10% and 50% loss', (messageBytes, blockBytes) => {
    const message = testMessage(messageBytes);
    const encoder = wh.createEncoder(message, blockBytes);
    const n = encoder.params.blockCount;
    for (const [i, loss] of [0, 0.1, 0.5].entries()) {
      const decoder = wh.createDecoder(messageBytes, blockBytes);
      feed(encoder, decoder, loss, new XorShift32(0x5eed + i * 7919 + messageBytes));
      expect(decoder.complete).toBe(true);
      expect(decoder.received - n).toBeLessThanOrEqual(5);
      expect(Buffer.from(decoder.recover()).equals(Buffer.from(message))).toBe(true);
      expect(sha256(decoder.recoverView())).toBe(sha256(message));
      decoder.free();
    }
    encoder.free();
  });

  test('blocks in any order, with duplicates, and extra blocks after completion', () => {
    const message = testMessage(50_000);
    const encoder = wh.createEncoder(message, 1000);
    const n = encoder.params.blockCount;
    const rng = new XorShift32(42);
    const ids = Array.from({ length: n + 20 }, (_, i) => (i < n / 2 ? i : 5000 + i));
    for (let i = ids.length - 1; i > 0; i--) {
      const j = rng.below(i + 1);
      [ids[i], ids[j]] = [ids[j], ids[i]];
    }
    const decoder = wh.createDecoder(50_000, 1000);
    const delivered: number[] = [];
    let result = 'need-more';
    for (const id of ids) {
      result = decoder.decode(id, encoder.encode(id));
      delivered.push(id);
      if (result === 'complete') break;
      // Re-deliver an earlier block now and then.
      if (rng.chance(0.3)) {
        const again = delivered[rng.below(delivered.length)];
        result = decoder.decode(again, encoder.encode(again));
        if (result === 'complete') break;
      }
    }
    expect(result).toBe('complete');
    expect(decoder.received).toBe(new Set(delivered).size);
    expect(decoder.decode(ids[0], encoder.encode(ids[0]))).toBe('complete');
    expect(decoder.decode(999_999, encoder.encode(999_999))).toBe('complete');
    expect(sha256(decoder.recover())).toBe(sha256(message));
    decoder.free();
    encoder.free();
  });

  test('two sources with their own encoders and disjoint id ranges', () => {
    const message = testMessage(300_000);
    const a = wh.createEncoder(message, 1200); // sends the message, then repair from N
    const b = wh.createEncoder(message, 1200); // sends repair blocks from 2^31
    const n = a.params.blockCount;
    const decoder = wh.createDecoder(300_000, 1200);
    const rng = new XorShift32(7);
    let idA = 0;
    let idB = 0x8000_0000;
    let result = 'need-more';
    while (result !== 'complete') {
      expect(idA).toBeLessThan(4 * n);
      const fromA = a.encode(idA);
      if (!rng.chance(0.3)) result = decoder.decode(idA, fromA);
      idA++;
      if (result === 'complete') break;
      const fromB = b.encode(idB);
      if (!rng.chance(0.3)) result = decoder.decode(idB, fromB);
      idB++;
    }
    expect(idB - 0x8000_0000).toBeGreaterThan(n / 4);
    expect(sha256(decoder.recover())).toBe(sha256(message));
    for (const c of [a, b, decoder]) c.free();
  });

  test('bad parameters throw WirehairError', () => {
    expectWirehairError(() => wh.createEncoder(new Uint8Array(0), 1200), 'invalid-params');
    expectWirehairError(() => wh.createEncoder(testMessage(5000), 0), 'invalid-params');
    expectWirehairError(() => wh.createEncoder(testMessage(5000), 12.5), 'invalid-params');
    expectWirehairError(() => wh.createEncoder(testMessage(5000), WIREHAIR_MAX_BLOCK_BYTES + 1), 'invalid-params');
    expectWirehairError(() => wh.createEncoder(testMessage(1200), 1200), 'too-few-blocks');
    expectWirehairError(() => wh.createEncoder(testMessage(64_001), 1), 'too-many-blocks');
    expectWirehairError(() => wh.createDecoder(0, 1200), 'invalid-params');
    expectWirehairError(() => wh.createDecoder(WIREHAIR_MAX_MESSAGE_BYTES + 1, 65_536), 'invalid-params');
    expectWirehairError(() => wh.createDecoder(5000, -1), 'invalid-params');
    expectWirehairError(() => wh.createDecoder(1, 1), 'too-few-blocks');
    expectWirehairError(() => wh.createDecoder(65_537, 1), 'too-many-blocks');
    expect(wh.liveCodecs()).toBe(0);

    const params = wirehairParams(1001, 100);
    expect(params).toEqual({ messageBytes: 1001, blockBytes: 100, blockCount: 11, finalBlockBytes: 1 });
    expect(blockLength(params, 10)).toBe(1);
    expect(blockLength(params, 11)).toBe(100);
    expect(isUsableBlockId(params, 65_536 + 10)).toBe(false);
    expect(isUsableBlockId(wirehairParams(1100, 100), 65_536 + 10)).toBe(true);

    const encoder = wh.createEncoder(testMessage(1001), 100);
    for (const id of [-1, 1.5, 2 ** 32, 65_536 + 10, NaN])
      expectWirehairError(() => encoder.encode(id), 'bad-block-id');
    expectWirehairError(() => encoder.encode(0, new Uint8Array(99)), 'bad-length');
    expect(encoder.encode(0, new Uint8Array(150)).length).toBe(100);
    expect(encoder.encode(10).length).toBe(1);
    expect(encoder.encode(2 ** 32 - 1).length).toBe(100);
    const decoder = wh.createDecoder(1001, 100);
    expectWirehairError(() => decoder.recover(), 'not-complete');
    expectWirehairError(() => decoder.recoverView(), 'not-complete');
    expect(decoder.decode(65_536 + 10, new Uint8Array(100))).toBe('invalid');
    expect(decoder.decode(-3, new Uint8Array(100))).toBe('invalid');

    encoder.free();
    decoder.free();
    expect(encoder.freed && decoder.freed).toBe(true);
    encoder.free(); // double free: no-op
    decoder.free();
    expectWirehairError(() => encoder.encode(0), 'freed');
    expectWirehairError(() => encoder.encodeView(0), 'freed');
    expectWirehairError(() => decoder.decode(0, new Uint8Array(100)), 'freed');
    expectWirehairError(() => decoder.recover(), 'freed');
    expectWirehairError(() => decoder.inputView(), 'freed');
    expect(wh.liveCodecs()).toBe(0);
  });

  test('wrong lengths are invalid, corrupted blocks give a digest mismatch, nothing traps', () => {
    const message = testMessage(20_000);
    const encoder = wh.createEncoder(message, 1000);
    const decoder = wh.createDecoder(20_000, 1000);
    expect(decoder.decode(0, encoder.encode(0).subarray(0, 999))).toBe('invalid');
    expect(decoder.decode(0, new Uint8Array(1001))).toBe('invalid');
    expect(decoder.decode(0, new Uint8Array(0))).toBe('invalid');
    expect(decoder.decode(25, new Uint8Array(10))).toBe('invalid');
    expect(decoder.received).toBe(0);
    // Last block (id 19, 1000 bytes here since 20000 = 20·1000) and a short-last-block message:
    const shortDecoder = wh.createDecoder(19_500, 1000);
    expect(shortDecoder.decode(19, new Uint8Array(499))).toBe('invalid');
    expect(shortDecoder.decode(19, new Uint8Array(1000))).toBe('need-more'); // zero-padded is fine
    shortDecoder.free();

    const rng = new XorShift32(3);
    let result = 'need-more';
    for (let id = 0; result !== 'complete'; id++) {
      if (rng.chance(0.2)) continue;
      const block = encoder.encode(id);
      if (id === 3 || id === 21) block[17] ^= 0x40; // corrupt one systematic and one repair block
      result = decoder.decode(id, block);
    }
    expect(sha256(decoder.recover())).not.toBe(sha256(message));
    decoder.free();

    // Random garbage with random ids: decode never throws.
    for (let round = 0; round < 20; round++) {
      const d = wh.createDecoder(20_000, 1000);
      for (let i = 0; i < 60 && !d.complete; i++) {
        const len = rng.chance(0.8) ? 1000 : rng.below(1200);
        const data = new Uint8Array(len).map(() => rng.next() & 0xff);
        const id = round % 2 ? rng.next() : rng.below(40);
        expect(['need-more', 'complete', 'invalid']).toContain(d.decode(id, data));
      }
      if (d.complete) expect(d.recover().length).toBe(20_000);
      d.free();
    }

    // Still healthy afterwards.
    const d = wh.createDecoder(20_000, 1000);
    feed(encoder, d, 0.3, new XorShift32(11));
    expect(sha256(d.recover())).toBe(sha256(message));
    d.free();
    encoder.free();
  });

  test('views into wasm memory, the zero-copy input, and memory growth', () => {
    const own = loadWirehairSync(readWirehairWasm());
    const message = testMessage(30_000);
    const encoder = own.createEncoder(message, 1000);
    const decoder = own.createDecoder(30_000, 1000);
    const rng = new XorShift32(5);
    let result = 'need-more';
    for (let id = 0; result !== 'complete'; id++) {
      if (rng.chance(0.25)) continue;
      const input = decoder.inputView();
      input.set(encoder.encodeView(id));
      result = decoder.decode(id, input.subarray(0, encoder.params.blockBytes));
    }
    const view = decoder.recoverView();
    expect(sha256(view)).toBe(sha256(message));
    const before = own.allocatedBytes();
    // A large decoder grows the memory: old views are detached, new ones work.
    const big = own.createDecoder(64 << 20, 60_000);
    expect(own.allocatedBytes()).toBeGreaterThan(before + (64 << 20));
    expect(view.length).toBe(0);
    expect(sha256(decoder.recoverView())).toBe(sha256(message));
    expect(sha256(encoder.encodeView(0))).toBe(sha256(message.subarray(0, 1000)));
    big.free();
    decoder.free();
    encoder.free();
    expect(own.liveCodecs()).toBe(0);
  });

  test('heap returns to its baseline after 10,000 encoder and decoder lifetimes', () => {
    const message = testMessage(4096);
    const lifetime = (i: number) => {
      const encoder = wh.createEncoder(message, 256);
      const decoder = wh.createDecoder(4096, 256);
      const rng = new XorShift32(i + 1);
      for (let id = 0; !decoder.complete; id++) {
        if (!rng.chance(0.1)) decoder.decode(id, encoder.encodeView(id));
      }
      decoder.recover();
      if (i % 3 === 0) decoder.recoverView();
      encoder.free();
      decoder.free();
    };
    lifetime(0); // warm-up: the handle table and the allocator's own state
    const baseline = wh.allocatedBytes();
    expect(baseline).toBeGreaterThan(0);
    for (let i = 1; i <= 10_000; i++) lifetime(i);
    expect(wh.liveCodecs()).toBe(0);
    expect(wh.allocatedBytes()).toBe(baseline);
  });

  test('the Node loader explains a missing module', () => {
    expectWirehairError(() => loadWirehairNodeSync('/nonexistent/mutp-wirehair.wasm'), 'module');
    expect(() => loadWirehairNodeSync('/nonexistent/mutp-wirehair.wasm')).toThrow(/bash scripts\/setup\.sh/);
  });
});
