/**
 * Codecs (pure TypeScript RLNC and uncoded) and GF(2^8) arithmetic, checked against references
 * computed here, independently of the implementation's tables.
 */
import fc from 'fast-check';
import {
  fillCoefficients,
  gfInv,
  gfMul,
  gfMulAddRegion,
  gfMulRegion,
  Layout,
  randomBelow,
  rlncCodec,
  seededRandom,
  uncodedCodec,
  UnitDecoder,
} from '../src/internal';

// ------------------------------------------------------------------ references

/** Russian-peasant multiplication in GF(2)[x] / (x^8 + x^4 + x^3 + x^2 + 1). */
function refMul(a: number, b: number): number {
  let p = 0;
  while (b > 0) {
    if (b & 1) p ^= a;
    a <<= 1;
    if (a & 0x100) a ^= 0x11d;
    b >>= 1;
  }
  return p;
}

/** Rank over GF(2^8) of a set of vectors of length n (Gaussian elimination with refMul). */
function refRank(vectors: Uint8Array[], n: number): number {
  const rows = vectors.map((v) => Uint8Array.from(v.subarray(0, n)));
  let rank = 0;
  for (let col = 0; col < n && rank < rows.length; col++) {
    let p = -1;
    for (let i = rank; i < rows.length; i++) if (rows[i][col] !== 0) p = i;
    if (p < 0) continue;
    [rows[rank], rows[p]] = [rows[p], rows[rank]];
    let inv = 1;
    while (refMul(rows[rank][col], inv) !== 1) inv++;
    for (let j = 0; j < n; j++) rows[rank][j] = refMul(rows[rank][j], inv);
    for (let i = 0; i < rows.length; i++) {
      const c = rows[i][col];
      if (i === rank || c === 0) continue;
      for (let j = 0; j < n; j++) rows[i][j] ^= refMul(c, rows[rank][j]);
    }
    rank++;
  }
  return rank;
}

function randomObject(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const object = new Uint8Array(length);
  for (let i = 0; i < length; i++) object[i] = random() & 0xff;
  return object;
}

/** Symbol k of the object, zero-padded to s bytes (docs/protocol.md §8.3). */
function symbol(object: Uint8Array, k: number, s: number): Uint8Array {
  const out = new Uint8Array(s);
  out.set(object.subarray(k * s, Math.min((k + 1) * s, object.length)));
  return out;
}

/** The coded payload computed from the definition, not from the encoder. */
function refEncode(object: Uint8Array, layout: Layout, generation: number, seed: number): Uint8Array {
  const size = layout.unitSize(generation);
  const c = new Uint8Array(size);
  fillCoefficients(seed, c, size);
  const out = new Uint8Array(layout.symbolSize);
  for (let k = 0; k < size; k++) {
    const x = symbol(object, generation * layout.generationSize + k, layout.symbolSize);
    for (let j = 0; j < out.length; j++) out[j] ^= refMul(c[k], x[j]);
  }
  return out;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function firstDifference(a: Uint8Array, b: Uint8Array): string {
  if (a.length !== b.length) return `lengths differ: ${a.length} vs ${b.length}`;
  const i = a.findIndex((x, j) => x !== b[j]);
  return i < 0 ? 'equal' : `first difference at byte ${i}: ${a[i]} vs ${b[i]}`;
}

/**
 * Sends random-seed packets of every generation until the decoder completes it (or gives up
 * after `slack` extra packets), the way a source does.
 */
function rlncRoundTrip(
  object: Uint8Array,
  layout: Layout,
  seed: number,
  slack = 40,
): { decoder: UnitDecoder; packets: number; stuck: number[] } {
  const encoder = rlncCodec.createEncoder(object, layout);
  const decoder = rlncCodec.createDecoder(layout);
  const random = seededRandom(seed);
  const payload = new Uint8Array(layout.symbolSize);
  const stuck: number[] = [];
  let packets = 0;
  for (let g = 0; g < layout.unitCount; g++) {
    const size = layout.unitSize(g);
    let rank = 0;
    for (let sent = 0; !decoder.isComplete(g) && sent < size + slack; sent++) {
      const s = random();
      encoder.encodeInto(g, s, payload);
      const result = decoder.add(g, s, payload);
      packets++;
      if (result === 'innovative') rank++;
      if (decoder.rank(g) !== rank) throw new Error(`generation ${g}: rank ${decoder.rank(g)}, expected ${rank}`);
    }
    if (!decoder.isComplete(g)) stuck.push(g);
  }
  encoder.free();
  return { decoder, packets, stuck };
}

// ------------------------------------------------------------------ GF(2^8)

describe('GF(2^8) (polynomial 0x11D)', () => {
  test('gfMul equals the Russian-peasant reference for every pair', () => {
    for (let a = 0; a < 256; a++) {
      for (let b = 0; b < 256; b++) {
        const got = gfMul(a, b);
        const want = refMul(a, b);
        if (got !== want) throw new Error(`gfMul(${a}, ${b}) = ${got}, reference ${want}`);
      }
    }
  });

  test('known products from docs/protocol.md §8.1', () => {
    expect(gfMul(2, 0x80)).toBe(0x1d);
    expect(gfMul(2, 0x8e)).toBe(1);
    expect(gfInv(2)).toBe(0x8e);
  });

  const byte = fc.integer({ min: 0, max: 255 });
  const nonZero = fc.integer({ min: 1, max: 255 });

  test('a * inv(a) = 1 for every non-zero a; inv(0) is reported as 0', () => {
    for (let a = 1; a < 256; a++) {
      expect(refMul(a, gfInv(a))).toBe(1);
      expect(gfMul(gfInv(a), a)).toBe(1);
    }
    expect(gfInv(0)).toBe(0);
  });

  test('field axioms on random samples', () => {
    fc.assert(
      fc.property(byte, byte, byte, nonZero, (a, b, c, d) => {
        expect(gfMul(a, b)).toBe(gfMul(b, a)); // commutative
        expect(gfMul(a, gfMul(b, c))).toBe(gfMul(gfMul(a, b), c)); // associative
        expect(gfMul(a, b ^ c)).toBe(gfMul(a, b) ^ gfMul(a, c)); // distributive
        expect(gfMul(a, 1)).toBe(a);
        expect(gfMul(a, 0)).toBe(0);
        expect(gfMul(gfMul(a, d), gfInv(d))).toBe(a); // division undoes multiplication
        expect(gfInv(gfInv(d))).toBe(d);
        expect(gfMul(a, b) === 0).toBe(a === 0 || b === 0); // no zero divisors
      }),
      { seed: 42, numRuns: 2000 },
    );
  });

  test('2 generates the multiplicative group (order 255)', () => {
    const seen = new Set<number>();
    let x = 1;
    for (let i = 0; i < 255; i++) {
      seen.add(x);
      x = refMul(x, 2);
    }
    expect(x).toBe(1);
    expect(seen.size).toBe(255);
  });

  test('region operations match per-byte multiplication, honour n and leave the rest alone', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 0, maxLength: 300 }),
        fc.uint8Array({ minLength: 300, maxLength: 300 }),
        byte,
        fc.integer({ min: 0, max: 300 }),
        (src, dst0, c, nRaw) => {
          const n = Math.min(nRaw, src.length);
          const dst = dst0.slice();
          gfMulAddRegion(dst, src, c, n);
          for (let i = 0; i < dst.length; i++) {
            const want = i < n ? dst0[i] ^ refMul(c, src[i]) : dst0[i];
            if (dst[i] !== want) throw new Error(`mulAdd c=${c} n=${n} byte ${i}: ${dst[i]} != ${want}`);
          }
          const region = dst0.slice();
          gfMulRegion(region, c, n);
          for (let i = 0; i < region.length; i++) {
            const want = i < n ? refMul(c, dst0[i]) : dst0[i];
            if (region[i] !== want) throw new Error(`mulRegion c=${c} n=${n} byte ${i}: ${region[i]} != ${want}`);
          }
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });
});

// ------------------------------------------------------------------ layout

describe('Layout', () => {
  test('symbols, units, short last packet and short last generation', () => {
    const u = new Layout('uncoded', 1000, 64, 8);
    expect([u.symbolCount, u.unitCount, u.symbolsPerUnit, u.totalDof]).toEqual([16, 16, 1, 16]);
    expect(u.unitSize(15)).toBe(1);
    expect(u.payloadLength(0)).toBe(64);
    expect(u.payloadLength(15)).toBe(1000 - 15 * 64);
    expect(u.windowUnits(10)).toBe(10);

    const r = new Layout('rlnc', 1000, 64, 6);
    expect([r.symbolCount, r.unitCount, r.symbolsPerUnit]).toEqual([16, 3, 6]);
    expect([r.unitSize(0), r.unitSize(1), r.unitSize(2)]).toEqual([6, 6, 4]);
    expect(r.payloadLength(2)).toBe(64); // coded payloads are always a full symbol
    expect(r.windowUnits(13)).toBe(2);
    expect(r.windowUnits(5)).toBe(1); // at least one generation
  });

  test('an empty object has no units', () => {
    for (const mode of ['uncoded', 'rlnc'] as const) {
      const l = new Layout(mode, 0, 64, 8);
      expect([l.symbolCount, l.unitCount, l.totalDof]).toEqual([0, 0, 0]);
    }
  });
});

// ------------------------------------------------------------------ RLNC

describe('RLNC codec (TypeScript reference)', () => {
  test('encoder output equals the definition (sum of c[k] * symbol k, short symbol zero-padded)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 16, max: 200 }),
        fc.integer({ min: 1, max: 32 }),
        fc.integer({ min: 0, max: 0xffffffff }),
        fc.integer({ min: 0, max: 0xffffffff }),
        (length, s, g, objectSeed, seed) => {
          const object = randomObject(length, objectSeed);
          const layout = new Layout('rlnc', length, s, g);
          const encoder = rlncCodec.createEncoder(object, layout);
          const out = new Uint8Array(s).fill(0xaa); // the encoder must overwrite stale bytes
          for (const generation of new Set([0, layout.unitCount - 1])) {
            encoder.encodeInto(generation, seed, out);
            const want = refEncode(object, layout, generation, seed);
            if (!equalBytes(out, want)) throw new Error(`generation ${generation}: ${firstDifference(out, want)}`);
          }
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });

  test('round trip for random objects and layouts (g <= 32)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 6000 }),
        fc.integer({ min: 16, max: 300 }),
        fc.integer({ min: 1, max: 32 }),
        fc.integer({ min: 0, max: 0x7fffffff }),
        (length, s, g, seed) => {
          const object = randomObject(length, seed);
          const layout = new Layout('rlnc', length, s, g);
          const { decoder, stuck } = rlncRoundTrip(object, layout, seed ^ 0x5a5a);
          if (stuck.length > 0) throw new Error(`generations ${stuck.join(',')} did not reach full rank`);
          const got = decoder.readObject();
          if (!equalBytes(got, object)) throw new Error(firstDifference(got, object));
          decoder.free();
        },
      ),
      { seed: 42, numRuns: 80 },
    );
  });

  test.each([
    ['short last symbol', 16 * 100 + 7, 16, 10],
    ['short last generation', 64 * 23, 64, 10],
    ['short last symbol and generation', 40 * 23 + 1, 40, 8],
    ['g = 1', 333, 16, 1],
    ['one symbol shorter than s', 5, 64, 8],
    ['single short generation', 64 * 3, 64, 24],
    ['g = 32, object of one generation', 32 * 50, 50, 32],
    ['paper defaults (s = 1120, g = 24)', 24 * 1120 * 3 + 555, 1120, 24],
  ])('round trip: %s', (_name, length, s, g) => {
    const object = randomObject(length, length);
    const layout = new Layout('rlnc', length, s, g);
    const { decoder, stuck } = rlncRoundTrip(object, layout, 99);
    expect(stuck).toEqual([]);
    expect(equalBytes(decoder.readObject(), object)).toBe(true);
  });

  // The coefficient generator is not GF(2)-linear (docs/protocol.md §8.2), so seeded packets
  // decode generations of any allowed size, not only up to 32 symbols as a xorshift one did.
  test.each([
    ['g = 33', 33],
    ['g = 64', 64],
    ['g = 255 (MAX_GENERATION_SIZE)', 255],
  ])('round trip with a generation of more than 32 symbols: %s', (_name, g) => {
    const length = 16 * g;
    const object = randomObject(length, g);
    const layout = new Layout('rlnc', length, 16, g);
    const { decoder, stuck } = rlncRoundTrip(object, layout, 7, 200);
    expect(`rank ${decoder.rank(0)} of ${g}`).toBe(`rank ${g} of ${g}`);
    expect(stuck).toEqual([]);
    expect(equalBytes(decoder.readObject(), object)).toBe(true);
  });

  test('the decoder reports rank and rejects non-innovative packets', () => {
    const s = 32;
    const g = 6;
    const object = randomObject(s * g * 2, 5);
    const layout = new Layout('rlnc', object.length, s, g);
    const encoder = rlncCodec.createEncoder(object, layout);
    const decoder = rlncCodec.createDecoder(layout);
    const packet = (gen: number, seed: number) => {
      const p = new Uint8Array(s);
      encoder.encodeInto(gen, seed, p);
      return p;
    };
    expect(decoder.rank(0)).toBe(0);
    expect(decoder.add(0, 1234, packet(0, 1234))).toBe('innovative');
    expect(decoder.rank(0)).toBe(1);
    // The same seed twice carries the same combination.
    expect(decoder.add(0, 1234, packet(0, 1234))).toBe('redundant');
    expect(decoder.rank(0)).toBe(1);
    // Seed 0 is an ordinary seed (§8.2).
    expect(decoder.add(0, 0, packet(0, 0))).toBe('innovative');
    expect(decoder.rank(0)).toBe(2);
    expect(decoder.add(0, 0, packet(0, 0))).toBe('redundant');
    expect(decoder.rank(0)).toBe(2);
    // Other generations are independent.
    expect(decoder.rank(1)).toBe(0);
    expect(decoder.add(1, 1234, packet(1, 1234))).toBe('innovative');
    expect(decoder.rank(1)).toBe(1);
    // Out of range and wrong payload length are invalid, and change nothing.
    expect(decoder.add(2, 1, packet(0, 1))).toBe('invalid');
    expect(decoder.add(-1, 1, packet(0, 1))).toBe('invalid');
    expect(decoder.add(0, 1, new Uint8Array(s - 1))).toBe('invalid');
    expect(decoder.add(0, 1, new Uint8Array(s + 1))).toBe('invalid');
    expect(decoder.rank(0)).toBe(2);
    expect(decoder.isComplete(0)).toBe(false);
    expect(() => decoder.readObject()).toThrow(/not decoded/);
    // Complete generation 0; after that everything is redundant.
    const random = seededRandom(77);
    for (let i = 0; i < 100 && !decoder.isComplete(0); i++) {
      const seed = random();
      decoder.add(0, seed, packet(0, seed));
    }
    expect(decoder.rank(0)).toBe(g);
    expect(decoder.add(0, 555, packet(0, 555))).toBe('redundant');
    expect(decoder.rank(0)).toBe(g);
  });

  test('decodes from any unitSize linearly independent packets, in any order', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 32 }),
        fc.integer({ min: 16, max: 64 }),
        fc.integer({ min: 0, max: 0x7fffffff }),
        fc.boolean(),
        (g, s, seed, shortLast) => {
          const symbols = shortLast && g > 1 ? g - 1 : g;
          const length = symbols * s - (shortLast ? 3 : 0);
          const object = randomObject(length, seed);
          const layout = new Layout('rlnc', length, s, g);
          const size = layout.unitSize(0);
          // Draw candidate seeds, keep an independent set by the reference rank, then shuffle it.
          const random = seededRandom(seed + 1);
          const chosen: { seed: number; coef: Uint8Array }[] = [];
          for (let i = 0; chosen.length < size && i < 10 * size + 50; i++) {
            const candidate = random();
            const coef = new Uint8Array(size);
            fillCoefficients(candidate, coef, size);
            const vectors = [...chosen.map((c) => c.coef), coef];
            if (refRank(vectors, size) === vectors.length) chosen.push({ seed: candidate, coef });
          }
          if (chosen.length !== size) throw new Error(`could not draw ${size} independent seeds`);
          for (let i = chosen.length - 1; i > 0; i--) {
            const j = randomBelow(random, i + 1);
            [chosen[i], chosen[j]] = [chosen[j], chosen[i]];
          }
          const decoder = rlncCodec.createDecoder(layout);
          for (const [i, c] of chosen.entries()) {
            const result = decoder.add(0, c.seed, refEncode(object, layout, 0, c.seed));
            if (result !== 'innovative') throw new Error(`packet ${i} (seed ${c.seed}) was ${result}`);
          }
          expect(decoder.isComplete(0)).toBe(true);
          const got = decoder.readObject();
          if (!equalBytes(got, object)) throw new Error(firstDifference(got, object));
        },
      ),
      { seed: 42, numRuns: 60 },
    );
  });

  test('a packet linearly dependent on earlier ones is redundant, rank agrees with the reference', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }),
        fc.array(fc.integer({ min: 0, max: 0xffffffff }), { minLength: 1, maxLength: 40 }),
        (g, seeds) => {
          const s = 16;
          const object = randomObject(s * g, g);
          const layout = new Layout('rlnc', object.length, s, g);
          const decoder = rlncCodec.createDecoder(layout);
          const vectors: Uint8Array[] = [];
          for (const seed of seeds) {
            const coef = new Uint8Array(g);
            fillCoefficients(seed, coef, g);
            const before = refRank(vectors, g);
            vectors.push(coef);
            const after = refRank(vectors, g);
            const result = decoder.add(0, seed, refEncode(object, layout, 0, seed));
            expect(result).toBe(after > before ? 'innovative' : 'redundant');
            expect(decoder.rank(0)).toBe(after);
          }
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });
});

// ------------------------------------------------------------------ uncoded

describe('uncoded codec', () => {
  test('round trip in any order, with duplicates and junk', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 5000 }),
        fc.integer({ min: 16, max: 300 }),
        fc.integer({ min: 0, max: 0x7fffffff }),
        (length, s, seed) => {
          const object = randomObject(length, seed);
          const layout = new Layout('uncoded', length, s, 1);
          const encoder = uncodedCodec.createEncoder(object, layout);
          const decoder = uncodedCodec.createDecoder(layout);
          const random = seededRandom(seed);
          const order = Array.from({ length: layout.unitCount }, (_, i) => i);
          for (let i = order.length - 1; i > 0; i--) {
            const j = randomBelow(random, i + 1);
            [order[i], order[j]] = [order[j], order[i]];
          }
          let dof = 0;
          for (const unit of order) {
            const payload = new Uint8Array(layout.payloadLength(unit));
            encoder.encodeInto(unit, 0, payload);
            expect(decoder.isComplete(unit)).toBe(false);
            expect(decoder.add(unit, random(), payload)).toBe('innovative');
            expect(decoder.rank(unit)).toBe(1);
            expect(decoder.add(unit, 0, payload)).toBe('redundant');
            expect(decoder.add(unit, 0, new Uint8Array(payload.length + 1))).toBe('invalid');
            dof++;
          }
          expect(dof).toBe(layout.totalDof);
          expect(decoder.add(layout.unitCount, 0, new Uint8Array(1))).toBe('invalid');
          expect(decoder.add(-1, 0, new Uint8Array(s))).toBe('invalid');
          const got = decoder.readObject();
          if (!equalBytes(got, object)) throw new Error(firstDifference(got, object));
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });

  test('the short last packet must have exactly its length', () => {
    const object = randomObject(100, 1);
    const layout = new Layout('uncoded', 100, 64, 1);
    const decoder = uncodedCodec.createDecoder(layout);
    expect(decoder.add(1, 0, new Uint8Array(64))).toBe('invalid');
    expect(decoder.add(1, 0, object.subarray(64))).toBe('innovative');
    expect(decoder.add(0, 0, object.subarray(0, 63))).toBe('invalid');
    expect(decoder.add(0, 0, object.subarray(0, 64))).toBe('innovative');
    expect(equalBytes(decoder.readObject(), object)).toBe(true);
  });
});
