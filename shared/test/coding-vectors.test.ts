/**
 * RLNC coefficient generator, GF(2^8), RLNC encoding and slot partition against
 * vectors/coding-v1.json (see docs/protocol.md). Besides comparing the implementation with the
 * vectors, every vector is recomputed here from the specification with deliberately different
 * code (BigInt xorshift, Russian-peasant multiplication), so the vectors do not merely restate
 * the implementation.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  fillCoefficients,
  GF_POLYNOMIAL,
  gfInv,
  gfMul,
  gfMulAddRegion,
  gfMulRegion,
  Layout,
  Partition,
  rlncCodec,
} from '../src/internal';

interface CodingVectors {
  gfPolynomial: number;
  coefficients: { seed: number; count: number; hex: string }[];
  gfMul: [number, number, number][];
  gfInv: [number, number][];
  rlncEncode: {
    name: string;
    objectHex: string;
    objectLength: number;
    symbolSize: number;
    generationSize: number;
    generation: number;
    seed: number;
    unitSize: number;
    coefficientsHex: string;
    payloadHex: string;
  }[];
  partition: { weights: number[]; slots: number; owners: number[] }[];
}

const vectors: CodingVectors = JSON.parse(readFileSync(join(__dirname, 'vectors', 'coding-v1.json'), 'utf8'));

const fromHex = (hex: string) => Uint8Array.from(hex.match(/../g) ?? [], (b) => parseInt(b, 16));
const toHex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

// ------------------------------------------------------------------ independent reference code

const MASK32 = 0xffffffffn;

/** MurmurHash3's 32-bit finaliser in BigInt arithmetic. */
function fmix32(x: bigint): bigint {
  let z = x & MASK32;
  z ^= z >> 16n;
  z = (z * 0x85ebca6bn) & MASK32;
  z ^= z >> 13n;
  z = (z * 0xc2b2ae35n) & MASK32;
  z ^= z >> 16n;
  return z;
}

/** fmix32 over seed + k * 0x9E3779B9 (k = 1, 2, ...), four coefficients per output, low byte first. */
function referenceCoefficients(seed: number, count: number): Uint8Array {
  const out = new Uint8Array(count);
  for (let i = 0; i < count; i++) {
    const z = fmix32(BigInt(seed) + BigInt(Math.floor(i / 4) + 1) * 0x9e3779b9n);
    out[i] = Number((z >> BigInt(8 * (i % 4))) & 0xffn);
  }
  return out;
}

/** Russian-peasant multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x^2 + 1. */
function peasantMul(a: number, b: number): number {
  let product = 0;
  while (b > 0) {
    if (b & 1) product ^= a;
    a <<= 1;
    if (a & 0x100) a ^= 0x11d;
    b >>= 1;
  }
  return product;
}

/** Multiplicative inverse by search (the reference needs no tables). */
function gfInverse(a: number): number {
  for (let b = 1; b < 256; b++) if (peasantMul(a, b) === 1) return b;
  throw new Error(`${a} has no inverse`);
}

/** The coded payload of one generation, straight from the definition. */
function referenceEncode(object: Uint8Array, s: number, g: number, generation: number, seed: number): Uint8Array {
  const symbolCount = Math.ceil(object.length / s);
  const size = Math.min(g, symbolCount - generation * g);
  const c = referenceCoefficients(seed, size);
  const out = new Uint8Array(s);
  for (let k = 0; k < size; k++) {
    const start = (generation * g + k) * s;
    for (let j = 0; j < s; j++) {
      const byte = start + j < object.length ? object[start + j] : 0; // zero padding
      out[j] ^= peasantMul(c[k], byte);
    }
  }
  return out;
}

/** Slot owner from the partition rule, with the golden-ratio point computed in BigInt. */
function referenceOwner(weights: number[], slot: number): number {
  const x = Number(((BigInt(slot) + 1n) * 0x9e3779b9n) & MASK32);
  let total = weights.reduce((a, b) => a + b, 0);
  const equal = total === 0;
  if (equal) total = weights.length;
  let acc = 0;
  for (let i = 0; i < weights.length; i++) {
    acc += equal ? 1 : weights[i];
    const bound = i === weights.length - 1 ? 2 ** 32 : Math.floor((acc / total) * 2 ** 32);
    if (x < bound) return i;
  }
  return weights.length - 1;
}

// ------------------------------------------------------------------ tests

describe('reference code sanity (external known answers)', () => {
  it('fmix32 is MurmurHash3_x86_32 of the empty string (known answers for seeds 1 and 0xffffffff)', () => {
    // MurmurHash3_x86_32("", seed) = fmix32(seed): 0x514E28B7 and 0x81F16F39 are its published answers.
    expect(fmix32(1n)).toBe(0x514e28b7n);
    expect(fmix32(0xffffffffn)).toBe(0x81f16f39n);
  });

  it('GF(2^8)/0x11D: 2 generates the field and 2 * 0x8E = 1', () => {
    expect(peasantMul(2, 0x80)).toBe(0x1d);
    expect(peasantMul(2, 0x8e)).toBe(1);
    const seen = new Set<number>();
    let x = 1;
    for (let i = 0; i < 255; i++) {
      seen.add(x);
      x = peasantMul(x, 2);
    }
    expect(x).toBe(1);
    expect(seen.size).toBe(255);
  });
});

describe('coefficient generator', () => {
  it.each(vectors.coefficients.map((v) => [v.seed, v.count, v.hex] as const))(
    'seed %d, %d coefficients',
    (seed, count, hex) => {
      expect(toHex(referenceCoefficients(seed, count))).toBe(hex);
      const out = new Uint8Array(count);
      fillCoefficients(seed, out);
      expect(toHex(out)).toBe(hex);
    },
  );

  it('fills only `count` entries and is a prefix-stable sequence', () => {
    const long = new Uint8Array(40);
    fillCoefficients(0xdeadbeef, long);
    const short = new Uint8Array(40).fill(0xee);
    fillCoefficients(0xdeadbeef, short, 10);
    expect(toHex(short.subarray(0, 10))).toBe(toHex(long.subarray(0, 10)));
    expect(short.subarray(10).every((b) => b === 0xee)).toBe(true);
  });

  it('seeded coefficient vectors reach full rank for every generation size (the generator is not GF(2)-linear)', () => {
    // A GF(2)-linear generator gives at most rank 32 over all 2^32 seeds; check g = 33, 64, 255.
    for (const g of [33, 64, 255]) {
      const rows: Uint8Array[] = [];
      let seed = 1;
      while (rows.length < g && seed < g + 8) {
        const v = referenceCoefficients(seed++, g);
        for (const r of rows) {
          const p = r.findIndex((x) => x !== 0);
          const c = v[p];
          if (c !== 0) for (let j = 0; j < g; j++) v[j] ^= peasantMul(c, r[j]);
        }
        const p = v.findIndex((x) => x !== 0);
        if (p < 0) continue;
        const inv = gfInverse(v[p]);
        for (let j = 0; j < g; j++) v[j] = peasantMul(v[j], inv);
        for (const r of rows) {
          const c = r[p];
          if (c !== 0) for (let j = 0; j < g; j++) r[j] ^= peasantMul(c, v[j]);
        }
        rows.push(v);
      }
      expect(`g = ${g}: rank ${rows.length} from ${seed - 1} seeds`).toBe(`g = ${g}: rank ${g} from ${seed - 1} seeds`);
    }
  });
});

describe('GF(2^8)', () => {
  it('uses the polynomial 0x11D', () => {
    expect(GF_POLYNOMIAL).toBe(0x11d);
    expect(vectors.gfPolynomial).toBe(0x11d);
  });

  it.each(vectors.gfMul)('%d * %d = %d', (a, b, product) => {
    expect(peasantMul(a, b)).toBe(product);
    expect(gfMul(a, b)).toBe(product);
    expect(gfMul(b, a)).toBe(product);
  });

  it.each(vectors.gfInv)('inverse of %d is %d', (a, inverse) => {
    expect(peasantMul(a, inverse)).toBe(1);
    expect(gfInv(a)).toBe(inverse);
  });

  it('every product of the multiplication table matches Russian-peasant multiplication', () => {
    let mismatches = 0;
    for (let a = 0; a < 256; a++) for (let b = 0; b < 256; b++) if (gfMul(a, b) !== peasantMul(a, b)) mismatches++;
    expect(mismatches).toBe(0);
  });

  it('every non-zero element has an inverse', () => {
    for (let a = 1; a < 256; a++) expect(peasantMul(a, gfInv(a))).toBe(1);
  });

  it('region operations agree with the scalar multiply', () => {
    const src = Uint8Array.from({ length: 64 }, (_, i) => (i * 29 + 3) & 0xff);
    for (const c of [0, 1, 2, 0x53, 0xff]) {
      const dst = Uint8Array.from({ length: 64 }, (_, i) => (i * 7) & 0xff);
      const expected = dst.map((d, i) => d ^ peasantMul(c, src[i]));
      gfMulAddRegion(dst, src, c);
      expect(toHex(dst)).toBe(toHex(expected));
      const scaled = src.slice();
      gfMulRegion(scaled, c);
      expect(toHex(scaled)).toBe(toHex(src.map((x) => peasantMul(c, x))));
    }
  });
});

describe('RLNC encoding', () => {
  it.each(vectors.rlncEncode.map((v) => [v.name, v] as const))('%s', (_name, v) => {
    const object = fromHex(v.objectHex);
    expect(object.length).toBe(v.objectLength);
    const layout = new Layout('rlnc', v.objectLength, v.symbolSize, v.generationSize);
    expect(layout.unitSize(v.generation)).toBe(v.unitSize);
    expect(layout.payloadLength(v.generation)).toBe(v.symbolSize);
    expect(toHex(referenceCoefficients(v.seed, v.unitSize))).toBe(v.coefficientsHex);
    expect(toHex(referenceEncode(object, v.symbolSize, v.generationSize, v.generation, v.seed))).toBe(v.payloadHex);

    const encoder = rlncCodec.createEncoder(object, layout);
    const out = new Uint8Array(v.symbolSize).fill(0xa5); // stale bytes must be overwritten
    encoder.encodeInto(v.generation, v.seed, out);
    expect(toHex(out)).toBe(v.payloadHex);
  });

  it("decodes the object from coded packets of the vectors' layouts", () => {
    for (const v of vectors.rlncEncode) {
      const object = fromHex(v.objectHex);
      const layout = new Layout('rlnc', v.objectLength, v.symbolSize, v.generationSize);
      const decoder = rlncCodec.createDecoder(layout);
      for (let unit = 0; unit < layout.unitCount; unit++) {
        for (let seed = 1; !decoder.isComplete(unit); seed++) {
          expect(seed).toBeLessThan(100); // a handful of packets suffices
          decoder.add(unit, seed, referenceEncode(object, v.symbolSize, v.generationSize, unit, seed));
        }
      }
      expect(toHex(decoder.readObject())).toBe(v.objectHex);
    }
  });
});

describe('partition (slot ownership)', () => {
  it.each(vectors.partition.map((v) => [v.weights.join(':'), v] as const))('weights %s', (_name, v) => {
    const partition = new Partition(v.weights);
    const owners = Array.from({ length: v.slots }, (_, s) => partition.owner(s));
    expect(owners).toEqual(v.owners);
    expect(Array.from({ length: v.slots }, (_, s) => referenceOwner(v.weights, s))).toEqual(v.owners);
  });
});
