/**
 * The WebAssembly RLNC codecs (SIMD128 and scalar builds of wasm/rlnc) against the pure-TypeScript
 * reference `rlncCodec`: byte-identical packets, cross decoding both ways with seeded loss and
 * duplicates, identical innovative/redundant decisions, every generation size decoded from at most
 * g + 2 seeded packets, typed errors without traps, explicit lifetimes without leaks, and the
 * packet vectors written by the native C build.
 * Needs wasm/dist (bash scripts/setup.sh, or bash wasm/rlnc/build.sh).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AddResult,
  fillCoefficients,
  gfMulAddRegion,
  gfMulRegion,
  Layout,
  randomBelow,
  Random,
  rlncCodec,
  seededRandom,
  UnitDecoder,
  UnitEncoder,
} from '@mutp/shared/internal';
import {
  fetchRlncCodec,
  loadRlncModule,
  loadRlncModuleStreaming,
  loadRlncModuleSync,
  RlncModule,
  RlncWasmError,
  WasmRlncCodec,
  WasmRlncDecoder,
} from '../src/rlnc';
import { loadRlncCodecNode, loadRlncModuleNode, readRlncWasm, rlncWasmPath } from '../src/rlnc-node';
import { simdProbeModule, simdSupported } from '../src/simd';

interface PacketVectors {
  objectBytes: string;
  layouts: {
    name: string;
    objectLength: number;
    symbolSize: number;
    generationSize: number;
    packets: { generation: number; seed: number; sha256: string }[];
  }[];
}

const vectors: PacketVectors = JSON.parse(readFileSync(join(__dirname, '..', 'rlnc', 'test', 'vectors.json'), 'utf8'));

/** The WebAssembly global, typed (the project's TypeScript lib has no DOM types). */
const wasmApi = (globalThis as unknown as { WebAssembly: { validate(bytes: Uint8Array): boolean } }).WebAssembly;

/** Byte equality (toEqual is slow on large typed arrays); on a mismatch, reports where. */
function expectBytes(actual: Uint8Array, expected: Uint8Array): void {
  if (actual.length === expected.length && Buffer.compare(actual, expected) === 0) return;
  let i = 0;
  while (i < actual.length && i < expected.length && actual[i] === expected[i]) i++;
  expect({ length: actual.length, firstDifference: i }).toEqual({ length: expected.length, firstDifference: 'none' });
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function randomObject(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const object = new Uint8Array(length);
  for (let i = 0; i < length; i++) object[i] = random() & 0xff;
  return object;
}

const rlncLayout = (objectLength: number, symbolSize: number, generationSize: number) =>
  new Layout('rlnc', objectLength, symbolSize, generationSize);

/** Layouts: g = 1, 7, 16, 24, 32, 33, 64, 255, short last generation, short last symbol, one byte. */
const LAYOUTS: [string, Layout][] = [
  ['g1, short last symbol', rlncLayout(5000, 1200, 1)],
  ['g16, short last generation', rlncLayout(40000, 1200, 16)],
  ['g24, symbol 1258, short last symbol', rlncLayout(100003, 1258, 24)],
  ['g32, exact multiple', rlncLayout(32 * 1120 * 3, 1120, 32)],
  ['g33, short last generation', rlncLayout(33 * 500 * 2 + 4321, 500, 33)],
  ['g64', rlncLayout(200000, 1120, 64)],
  ['g255', rlncLayout(300001, 1000, 255)],
  ['g7, tiny symbols', rlncLayout(777, 13, 7)],
  ['one byte', rlncLayout(1, 1, 1)],
];

function packetOf(encoder: UnitEncoder, layout: Layout, generation: number, seed: number): Uint8Array {
  const out = new Uint8Array(layout.symbolSize);
  encoder.encodeInto(generation, seed, out);
  return out;
}

/**
 * Sends seeded packets of `encoder` to both decoders, generations interleaved at random, with 25 %
 * loss and 10 % repeats of the previous packet; checks the two decoders decide every packet the
 * same way. Stops when both are complete or after `perGeneration` packets per generation.
 */
function race(
  encoder: UnitEncoder,
  layout: Layout,
  decoders: [UnitDecoder, UnitDecoder],
  random: Random,
  perGeneration: number,
): { innovative: number; redundant: number } {
  const counts = { innovative: 0, redundant: 0 };
  const sent = new Array<number>(layout.unitCount).fill(0);
  let open = Array.from({ length: layout.unitCount }, (_, g) => g);
  let previous: { generation: number; seed: number; payload: Uint8Array } | undefined;
  while (open.length > 0) {
    let packet: { generation: number; seed: number; payload: Uint8Array };
    if (previous && randomBelow(random, 10) === 0) {
      packet = previous;
    } else {
      const generation = open[randomBelow(random, open.length)];
      const seed = random();
      packet = { generation, seed, payload: packetOf(encoder, layout, generation, seed) };
      sent[generation]++;
    }
    if (randomBelow(random, 4) !== 0) {
      const results: AddResult[] = decoders.map((d) => d.add(packet.generation, packet.seed, packet.payload));
      expect(results[0]).toBe(results[1]);
      expect(results[0]).not.toBe('invalid');
      counts[results[0] as 'innovative' | 'redundant']++;
      expect(decoders[0].rank(packet.generation)).toBe(decoders[1].rank(packet.generation));
      previous = packet;
    }
    open = open.filter((g) => !decoders[0].isComplete(g) && sent[g] < perGeneration);
  }
  return counts;
}

const TOTAL_TS = { innovative: 0, redundant: 0 };

describe('simdSupported', () => {
  test('detects SIMD128 in Node 20 with a well-formed probe module', () => {
    expect(simdSupported()).toBe(true);
    const probe = simdProbeModule();
    expect(wasmApi.validate(probe)).toBe(true);
    // The same module with i8x16.splat (0xfd 0x0f) replaced by two nops and an i32 result is
    // plain MVP WebAssembly: the framing is right, and only the SIMD parts can fail elsewhere.
    const mvp = probe.slice();
    mvp[14] = 0x7f; // result i32
    mvp[26] = 0x01; // nop
    mvp[27] = 0x01; // nop
    expect(wasmApi.validate(mvp)).toBe(true);
    const broken = probe.slice();
    broken[27] = 0xff; // no such SIMD opcode
    expect(wasmApi.validate(broken)).toBe(false);
  });
});

describe('loaders', () => {
  const bytes = () => readRlncWasm({ simd: true });
  const wasmResponse = (type: string) => new Response(bytes(), { headers: { 'Content-Type': type } });

  test('Node loader picks SIMD when supported, and says how to build a missing file', async () => {
    expect(rlncWasmPath()).toMatch(/wasm\/dist\/mutp-rlnc-simd\.wasm$/);
    expect(rlncWasmPath({ simd: false })).toMatch(/mutp-rlnc-scalar\.wasm$/);
    expect((await loadRlncCodecNode()).name).toBe('rlnc-wasm-simd');
    expect(() => readRlncWasm({ dir: '/nonexistent' })).toThrow(/run `bash scripts\/setup\.sh` \(builds wasm\/dist\)/);
  });

  test('streaming (fetch) loader, with and without the wasm MIME type', async () => {
    expect((await loadRlncModuleStreaming(wasmResponse('application/wasm'))).simd).toBe(true);
    expect((await loadRlncModuleStreaming(Promise.resolve(wasmResponse('text/plain')))).simd).toBe(true);
    const urls: string[] = [];
    const codec = await fetchRlncCodec('https://example.invalid/wasm', {
      simd: false,
      fetch: async (url) => {
        urls.push(url);
        return new Response(readRlncWasm({ simd: false }), { headers: { 'Content-Type': 'application/wasm' } });
      },
    });
    expect(urls).toEqual(['https://example.invalid/wasm/mutp-rlnc-scalar.wasm']);
    expect(codec.name).toBe('rlnc-wasm-scalar');
  });

  test('synchronous and precompiled loading; other modules are rejected', async () => {
    const compiled = new (
      globalThis as unknown as { WebAssembly: { Module: new (b: Uint8Array) => object } }
    ).WebAssembly.Module(bytes());
    expect(loadRlncModuleSync(compiled).simd).toBe(true);
    expect((await loadRlncModule(compiled)).simd).toBe(true);
    await expect(loadRlncModule(simdProbeModule())).rejects.toThrow(/module: not an RLNC module/);
  });
});

describe.each([
  ['simd', true],
  ['scalar', false],
])('%s module', (_name, simd) => {
  let module: RlncModule;
  let codec: WasmRlncCodec;

  beforeAll(async () => {
    module = await loadRlncModuleNode({ simd });
    codec = new WasmRlncCodec(module);
  });

  test('identifies itself', () => {
    expect(module.simd).toBe(simd);
    expect(codec.mode).toBe('rlnc');
    expect(codec.name).toBe(simd ? 'rlnc-wasm-simd' : 'rlnc-wasm-scalar');
  });

  test('coefficients and the raw kernels match the TypeScript reference', () => {
    const random = seededRandom(11);
    for (const seed of [0, 1, 0x9e3779b9, 0xffffffff, random(), random()]) {
      const want = new Uint8Array(255);
      fillCoefficients(seed, want);
      expectBytes(module.coefficients(seed, 255), want);
    }
    const n = 1201;
    const dst = module.region(n + 3);
    const src = module.region(n + 5);
    for (let c = 0; c < 256; c++) {
      const a = randomObject(n + 3, c);
      const b = randomObject(n + 5, c + 1000);
      dst.bytes.set(a);
      src.bytes.set(b);
      // Every length 0..96 (vector tails) and long odd lengths; bytes past the length stay untouched.
      const length = c < 97 ? c : n - (c % 4);
      module.muladd(dst, src, c, length);
      gfMulAddRegion(a, b, c, length);
      expectBytes(dst.bytes, a);
      module.mul(dst, c ^ 0x5a, length);
      gfMulRegion(a, c ^ 0x5a, length);
      expectBytes(dst.bytes, a);
    }
    dst.free();
    src.free();
    dst.free(); // second free: no-op
    expect(() => dst.bytes).toThrow(RlncWasmError);
  });

  test.each(LAYOUTS)('packets are byte-identical to the reference encoder: %s', (_label, layout) => {
    const object = randomObject(layout.objectLength, layout.symbolSize);
    const reference = rlncCodec.createEncoder(object, layout);
    const encoder = codec.createEncoder(object, layout);
    const random = seededRandom(layout.generationSize);
    for (let g = 0; g < layout.unitCount; g++) {
      for (const seed of [0, 1, 0xffffffff, random(), random()]) {
        expectBytes(packetOf(encoder, layout, g, seed), packetOf(reference, layout, g, seed));
      }
    }
    // Output longer than a symbol: only the first symbolSize bytes are written, as by the reference.
    const long = new Uint8Array(layout.symbolSize + 7).fill(0xee);
    encoder.encodeInto(layout.unitCount - 1, 5, long);
    expectBytes(long.subarray(layout.symbolSize), new Uint8Array(7).fill(0xee));
    encoder.free();
    reference.free();
  });

  test('packets match the vectors written by the native C build', () => {
    for (const v of vectors.layouts) {
      const layout = rlncLayout(v.objectLength, v.symbolSize, v.generationSize);
      const object = new Uint8Array(v.objectLength);
      for (let i = 0; i < object.length; i++) object[i] = ((i * 251) ^ (i >> 7) ^ 0x5a) & 0xff;
      const encoder = codec.createEncoder(object, layout);
      const reference = rlncCodec.createEncoder(object, layout);
      expect(v.packets.length).toBeGreaterThan(0);
      for (const p of v.packets) {
        expect(sha256(packetOf(encoder, layout, p.generation, p.seed))).toBe(p.sha256);
        expect(sha256(packetOf(reference, layout, p.generation, p.seed))).toBe(p.sha256);
      }
      encoder.free();
    }
  });

  test.each(LAYOUTS)('cross decoding with loss and repeats, same decisions as the reference: %s', (_label, layout) => {
    const object = randomObject(layout.objectLength, 77 + layout.generationSize);
    const perGeneration = 4 * layout.generationSize + 64; // never reached: sent only to stop a runaway
    for (const direction of ['ts-to-wasm', 'wasm-to-ts'] as const) {
      const encoder =
        direction === 'ts-to-wasm' ? rlncCodec.createEncoder(object, layout) : codec.createEncoder(object, layout);
      const wasmDecoder = codec.createDecoder(layout);
      const tsDecoder = rlncCodec.createDecoder(layout);
      const counts = race(encoder, layout, [wasmDecoder, tsDecoder], seededRandom(layout.objectLength), perGeneration);
      TOTAL_TS.innovative += counts.innovative;
      TOTAL_TS.redundant += counts.redundant;
      expect(counts.innovative).toBe(layout.totalDof);
      expectBytes(wasmDecoder.readObject(), object);
      expectBytes(tsDecoder.readObject(), object);
      expect(wasmDecoder.completeUnits()).toBe(layout.unitCount);
      encoder.free();
      wasmDecoder.free();
      tsDecoder.free();
    }
  });

  test.each(LAYOUTS)('seeded packets are the definition and decode every generation in g + 2: %s', (_label, layout) => {
    const object = randomObject(layout.objectLength, 5 + layout.generationSize);
    const encoder = codec.createEncoder(object, layout);
    const decoder = codec.createDecoder(layout);
    const random = seededRandom(99);
    const payload = new Uint8Array(layout.symbolSize);
    for (let g = 0; g < layout.unitCount; g++) {
      const size = layout.unitSize(g);
      let sent = 0;
      for (let seed = random(); !decoder.isComplete(g); seed = (seed + 1) >>> 0) {
        expect(sent++).toBeLessThan(size + 2);
        encoder.encodeInto(g, seed, payload);
        // The definition: sum of coefficient * padded symbol, coefficients from the seed.
        if (sent <= 2) {
          const coefficients = new Uint8Array(size);
          fillCoefficients(seed, coefficients);
          const want = new Uint8Array(layout.symbolSize);
          for (let k = 0; k < size; k++) {
            const start = (g * layout.generationSize + k) * layout.symbolSize;
            const symbol = object.subarray(start, Math.min(start + layout.symbolSize, object.length));
            gfMulAddRegion(want, symbol, coefficients[k], symbol.length);
          }
          expectBytes(payload, want);
        }
        expect(decoder.add(g, seed, payload)).not.toBe('invalid');
        expect(decoder.add(g, seed, payload)).toBe('redundant'); // repeat
      }
    }
    expectBytes(decoder.readObject(), object);
    encoder.free();
    decoder.free();
  });

  test('bad parameters throw typed errors from create*', () => {
    const bad: [string, Layout, number?][] = [
      ['g = 0', rlncLayout(1000, 100, 0)],
      ['g = 256', rlncLayout(100000, 100, 256)],
      ['symbol size 0', rlncLayout(1000, 0, 16)],
      ['symbol size 65536', rlncLayout(1000, 65536, 16)],
      ['object over 1 GiB', rlncLayout(2 ** 30 + 1, 1200, 16)],
      ['uncoded layout', new Layout('uncoded', 1000, 100, 16)],
      ['fractional size', rlncLayout(1000, 100.5, 16)],
    ];
    for (const [what, layout] of bad) {
      for (const create of [() => codec.createDecoder(layout), () => codec.createEncoder(new Uint8Array(0), layout)]) {
        let error: unknown;
        try {
          create();
        } catch (e) {
          error = e;
        }
        expect([what, error instanceof RlncWasmError && error.code]).toEqual([what, 'bad-parameter']);
      }
    }
    expect(() => codec.createEncoder(new Uint8Array(10), rlncLayout(11, 4, 2))).toThrow(/bad-parameter: object of 10/);
    // The C core checks on its own too (no trap, a status), bypassing the TypeScript checks.
    const abi = module.abi;
    for (const [len, s, g] of [
      [1000, 100, 0],
      [1000, 100, 256],
      [1000, 0, 4],
      [2 ** 30 + 1, 100, 4],
      [0xffffffff, 1, 1],
    ]) {
      expect(abi.mutp_rlnc_decoder_new(len, s, g)).toBe(0);
      expect(abi.mutp_rlnc_last_error()).toBe(-1);
      expect(abi.mutp_rlnc_encoder_new(8, len, s, g)).toBe(0);
      expect(abi.mutp_rlnc_last_error()).toBe(-1);
    }
    expect(module.allocatedBytes()).toBe(0);
  });

  test('bad packets are invalid, never a trap', () => {
    const layout = rlncLayout(10000, 100, 16); // 100 symbols: generations of 16 .. 4
    const object = randomObject(layout.objectLength, 3);
    const encoder = codec.createEncoder(object, layout);
    const decoder = codec.createDecoder(layout);
    const packet = packetOf(encoder, layout, 6, 1);
    for (const generation of [-1, 7, 1.5, NaN, Infinity, 2 ** 32]) {
      expect(decoder.add(generation, 1, packet)).toBe('invalid');
      expect(decoder.rank(generation)).toBe(0);
      expect(decoder.isComplete(generation)).toBe(false);
      expect(() => encoder.encodeInto(generation, 1, new Uint8Array(100))).toThrow(/out-of-range/);
    }
    for (const length of [0, 1, 99, 101, 5000]) expect(decoder.add(0, 1, new Uint8Array(length))).toBe('invalid');
    expect(() => encoder.encodeInto(0, 1, new Uint8Array(99))).toThrow(/bad-length/);
    expect(decoder.add(6, 1, packet)).toBe('innovative');
    expect(decoder.rank(6)).toBe(1);
    // The raw ABI: statuses, not traps.
    const abi = module.abi;
    const handle = abi.mutp_rlnc_decoder_new(10000, 100, 16);
    const scratch = module.alloc(200);
    expect(abi.mutp_rlnc_decoder_add(handle, 0, 1, scratch, 99)).toBe(-2);
    expect(abi.mutp_rlnc_decoder_add(handle, 7, 1, scratch, 100)).toBe(-3);
    expect(abi.mutp_rlnc_decoder_add(handle, -1, 1, scratch, 100)).toBe(-3);
    expect(abi.mutp_rlnc_decoder_add(handle, 0, 1, 0, 100)).toBe(-1);
    expect(abi.mutp_rlnc_decoder_add(0, 0, 1, scratch, 100)).toBe(-1);
    expect(abi.mutp_rlnc_decoder_rank(handle, 7)).toBe(-3);
    expect(abi.mutp_rlnc_encode(0, 0, 1, scratch)).toBe(-1);
    abi.mutp_rlnc_decoder_free(handle);
    module.free(scratch);
    encoder.free();
    decoder.free();
  });

  test('explicit lifetime: use after free throws, second free is a no-op', () => {
    const layout = rlncLayout(3000, 100, 8);
    const encoder = codec.createEncoder(randomObject(3000, 1), layout);
    const decoder = codec.createDecoder(layout);
    encoder.free();
    decoder.free();
    encoder.free();
    decoder.free();
    const out = new Uint8Array(100);
    expect(() => encoder.encodeInto(0, 1, out)).toThrow(/freed: RLNC encoder used after free/);
    expect(() => decoder.add(0, 1, out)).toThrow(/freed: RLNC decoder used after free/);
    expect(() => decoder.rank(0)).toThrow(RlncWasmError);
    expect(() => decoder.readObject()).toThrow(RlncWasmError);
    expect(module.allocatedBytes()).toBe(0);
  });

  test('10,000 encoder and decoder lifetimes return memory to the baseline', () => {
    const baseline = { bytes: module.allocatedBytes(), blocks: module.liveAllocations() };
    const memoryBefore = module.memoryBytes();
    const random = seededRandom(2024);
    const out = new Uint8Array(1200);
    const pool = randomObject(8000, 1); // objects are slices of it (filling bytes in Jest is slow)
    for (let i = 0; i < 10000; i++) {
      const layout = rlncLayout(
        1 + randomBelow(random, 6000),
        100 + randomBelow(random, 1100),
        1 + randomBelow(random, 32),
      );
      const offset = randomBelow(random, 2000);
      const object = pool.subarray(offset, offset + layout.objectLength);
      const encoder = codec.createEncoder(object, layout);
      const decoder = codec.createDecoder(layout);
      // Complete some generations, leave others partial (their elimination state allocated).
      for (let p = 0; p < 1 + randomBelow(random, 40); p++) {
        const generation = randomBelow(random, layout.unitCount);
        const seed = random();
        const payload = out.subarray(0, layout.symbolSize);
        encoder.encodeInto(generation, seed, payload);
        decoder.add(generation, seed, payload);
      }
      if (decoder.completeUnits() === layout.unitCount) expectBytes(decoder.readObject(), object);
      encoder.free();
      decoder.free();
    }
    expect(module.allocatedBytes()).toBe(baseline.bytes);
    expect(module.liveAllocations()).toBe(baseline.blocks);
    // The allocator reuses freed blocks: the memory grew by little, if at all.
    expect(module.memoryBytes() - memoryBefore).toBeLessThan(4 << 20);
  });

  test('views are re-created after memory growth', () => {
    const layout = rlncLayout(20000, 1000, 20);
    const object = randomObject(20000, 8);
    const encoder = codec.createEncoder(object, layout);
    const before = module.memoryBytes();
    const big = codec.createDecoder(rlncLayout(48 << 20, 1200, 24)); // forces memory.grow
    expect(module.memoryBytes()).toBeGreaterThan(before);
    const decoder: WasmRlncDecoder = codec.createDecoder(layout);
    const random = seededRandom(5);
    for (let g = 0; g < layout.unitCount; g++) {
      while (!decoder.isComplete(g)) {
        const seed = random();
        decoder.add(g, seed, packetOf(encoder, layout, g, seed));
      }
    }
    expectBytes(decoder.readObject(), object);
    expectBytes(decoder.objectView(), object);
    big.free();
    encoder.free();
    decoder.free();
    expect(module.allocatedBytes()).toBe(0);
  });
});

test('both directions made the reference decoder see innovative and redundant packets', () => {
  // Sanity of the harness: the decision comparison above was not vacuous.
  expect(TOTAL_TS.innovative).toBeGreaterThan(1000);
  expect(TOTAL_TS.redundant).toBeGreaterThan(100);
});
