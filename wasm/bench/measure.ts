/**
 * Codec measurements shared by Node and Chromium (bundled for the page by codec.ts): the same
 * code, the same modules, only the engine differs. Nothing here touches Node or DOM APIs.
 */
import { Layout, Random, seededRandom } from '@mutp/shared';
import { RlncModule, WasmRlncCodec } from '../src/rlnc';
import { Wirehair } from '../src/wirehair';

export interface CodecRow {
  codec: 'gf256' | 'rlnc' | 'wirehair';
  op: 'muladd' | 'encode' | 'decode';
  env: 'node' | 'chromium' | 'native';
  variant: string;
  g: number | null;
  packetBytes: number;
  objectBytes: number | null;
  loss: number | null;
  MBps: number;
}

export interface BenchModules {
  rlnc: { simd?: RlncModule; scalar: RlncModule };
  wirehair: Wirehair;
}

export interface BenchOptions {
  env: 'node' | 'chromium';
  /** Each measurement repeats its operation for at least this long, best of `repeats`. */
  minMs: number;
  repeats: number;
  clock: () => number;
  /** Called after each row (progress). */
  onRow?: (row: CodecRow) => void;
}

export const GENERATION_SIZES = [16, 24, 32, 64];
export const PACKET_BYTES = 1200;
/** RLNC objects: whole generations of 1200-byte packets, about 1 MiB. */
const RLNC_OBJECT_GENERATIONS = (g: number) => Math.ceil((1 << 20) / (g * PACKET_BYTES));
export const WIREHAIR_OBJECTS = [1 << 20, 2 << 20];
export const WIREHAIR_LOSSES = [0, 0.1];

/** Bytes processed per second by `op` (which returns the bytes it processed), best of `repeats`. */
function rate(o: BenchOptions, op: () => number): number {
  op(); // warm-up: compile tiers, allocate
  let best = 0;
  for (let r = 0; r < o.repeats; r++) {
    let bytes = 0;
    const start = o.clock();
    let elapsed = 0;
    do {
      bytes += op();
      elapsed = o.clock() - start;
    } while (elapsed < o.minMs);
    best = Math.max(best, (bytes / elapsed) * 1000);
  }
  return Math.round((best / 1e6) * 10) / 10;
}

function randomBytes(random: Random, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 4) {
    const x = random();
    out[i] = x;
    out[i + 1] = x >>> 8;
    out[i + 2] = x >>> 16;
    out[i + 3] = x >>> 24;
  }
  return out;
}

export function measureAll(m: BenchModules, o: BenchOptions): CodecRow[] {
  const rows: CodecRow[] = [];
  const push = (row: CodecRow) => {
    rows.push(row);
    o.onRow?.(row);
  };
  const variants: [string, RlncModule][] = [];
  if (m.rlnc.simd) variants.push(['simd', m.rlnc.simd]);
  variants.push(['scalar', m.rlnc.scalar]);

  for (const [variant, module] of variants) {
    for (const n of [PACKET_BYTES, 64 << 10]) {
      const dst = module.region(n);
      const src = module.region(n);
      src.bytes.set(randomBytes(seededRandom(n), n));
      let c = 1;
      const MBps = rate(o, () => {
        for (let k = 0; k < 64; k++) {
          c = (c % 255) + 1; // every nonzero coefficient, as RLNC draws them
          module.muladd(dst, src, c);
        }
        return 64 * n;
      });
      dst.free();
      src.free();
      push({
        codec: 'gf256',
        op: 'muladd',
        env: o.env,
        variant,
        g: null,
        packetBytes: n,
        objectBytes: null,
        loss: null,
        MBps,
      });
    }
  }

  for (const [variant, module] of variants) {
    const codec = new WasmRlncCodec(module);
    for (const g of GENERATION_SIZES) {
      const objectBytes = RLNC_OBJECT_GENERATIONS(g) * g * PACKET_BYTES;
      const random = seededRandom(g);
      const object = randomBytes(random, objectBytes);
      const layout = new Layout('rlnc', objectBytes, PACKET_BYTES, g);
      const encoder = codec.createEncoder(object, layout);
      const out = new Uint8Array(PACKET_BYTES);
      let unit = 0;
      const encodeMBps = rate(o, () => {
        for (let k = 0; k < 256; k++) {
          encoder.encodeInto(unit, random(), out);
          unit = (unit + 1) % layout.unitCount;
        }
        return 256 * PACKET_BYTES;
      });
      // What a client receives: g packets per generation plus 2 spares for the rare dependent one.
      const packets: { unit: number; seed: number; payload: Uint8Array }[] = [];
      for (let u = 0; u < layout.unitCount; u++) {
        for (let k = 0; k < layout.unitSize(u) + 2; k++) {
          const payload = new Uint8Array(PACKET_BYTES);
          const seed = random();
          encoder.encodeInto(u, seed, payload);
          packets.push({ unit: u, seed, payload });
        }
      }
      encoder.free();
      const decodeMBps = rate(o, () => {
        const decoder = codec.createDecoder(layout);
        for (const p of packets) if (!decoder.isComplete(p.unit)) decoder.add(p.unit, p.seed, p.payload);
        decoder.readObject();
        decoder.free();
        return objectBytes;
      });
      const base = {
        codec: 'rlnc',
        env: o.env,
        variant,
        g,
        packetBytes: PACKET_BYTES,
        objectBytes,
        loss: null,
      } as const;
      push({ ...base, op: 'encode', MBps: encodeMBps });
      push({ ...base, op: 'decode', MBps: decodeMBps });
    }
  }

  for (const objectBytes of WIREHAIR_OBJECTS) {
    const random = seededRandom(objectBytes);
    const message = randomBytes(random, objectBytes);
    const blockCount = Math.ceil(objectBytes / PACKET_BYTES);
    for (const loss of WIREHAIR_LOSSES) {
      // The ids a receiver gets at this loss, systematic first, as sources send them.
      const arrived: number[] = [];
      for (let id = 0; arrived.length < blockCount + 64; id++) if (random() / 2 ** 32 >= loss) arrived.push(id);
      const encodeMBps = rate(o, () => {
        const encoder = m.wirehair.createEncoder(message, PACKET_BYTES);
        for (let id = 0; id < Math.ceil(blockCount / (1 - loss)); id++) encoder.encodeView(id);
        encoder.free();
        return objectBytes;
      });
      const encoder = m.wirehair.createEncoder(message, PACKET_BYTES);
      const blocks = arrived.map((id) => encoder.encode(id));
      encoder.free();
      const decodeMBps = rate(o, () => {
        const decoder = m.wirehair.createDecoder(objectBytes, PACKET_BYTES);
        for (let i = 0; i < arrived.length; i++) if (decoder.decode(arrived[i], blocks[i]) === 'complete') break;
        decoder.recoverView();
        decoder.free();
        return objectBytes;
      });
      const base = {
        codec: 'wirehair',
        env: o.env,
        variant: 'simd',
        g: null,
        packetBytes: PACKET_BYTES,
        objectBytes,
        loss,
      } as const;
      push({ ...base, op: 'encode', MBps: encodeMBps });
      push({ ...base, op: 'decode', MBps: decodeMBps });
    }
  }
  return rows;
}
