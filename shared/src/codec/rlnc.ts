/**
 * Random linear network coding over GF(2^8), pure TypeScript. The reference implementation the
 * WebAssembly codecs are checked against. Coefficients come from the packet's 32-bit seed.
 */
import { fillCoefficients } from '../coefficients';
import { gfInv, gfMulAddRegion, gfMulRegion } from '../gf256';
import { Layout } from '../layout';
import { AddResult, Codec, UnitDecoder, UnitEncoder } from './types';

class RlncEncoder implements UnitEncoder {
  readonly mode = 'rlnc' as const;
  private readonly coefficients: Uint8Array;

  constructor(
    private readonly object: Uint8Array,
    private readonly layout: Layout,
  ) {
    this.coefficients = new Uint8Array(layout.generationSize);
  }

  encodeInto(generation: number, seed: number, out: Uint8Array): void {
    const { symbolSize, generationSize } = this.layout;
    const size = this.layout.unitSize(generation);
    fillCoefficients(seed, this.coefficients, size);
    out.fill(0, 0, symbolSize);
    const base = generation * generationSize * symbolSize;
    for (let k = 0; k < size; k++) {
      const start = base + k * symbolSize;
      // The last symbol of the object is shorter; its missing tail is zero padding.
      const src = this.object.subarray(start, Math.min(start + symbolSize, this.object.length));
      gfMulAddRegion(out, src, this.coefficients[k], src.length);
    }
  }

  free(): void {}
}

/**
 * Incremental Gauss-Jordan elimination for one generation. Rows are kept fully reduced and stored
 * at the index of their pivot column, so at full rank row i is symbol i.
 */
class GenerationDecoder {
  rank = 0;
  private readonly coefficients: Uint8Array; // size x size
  private readonly payloads: Uint8Array; // size x symbolSize
  private readonly hasPivot: Uint8Array;

  constructor(
    private readonly size: number,
    private readonly symbolSize: number,
  ) {
    this.coefficients = new Uint8Array(size * size);
    this.payloads = new Uint8Array(size * symbolSize);
    this.hasPivot = new Uint8Array(size);
  }

  /** `coef` and `data` are scratch buffers the decoder may overwrite. */
  add(coef: Uint8Array, data: Uint8Array): boolean {
    const { size, symbolSize } = this;
    if (this.rank === size) return false;
    // Reduce the new row by every existing pivot row.
    for (let col = 0; col < size; col++) {
      const c = coef[col];
      if (c === 0 || !this.hasPivot[col]) continue;
      gfMulAddRegion(coef, this.coefficients.subarray(col * size, col * size + size), c, size);
      gfMulAddRegion(data, this.payloads.subarray(col * symbolSize, col * symbolSize + symbolSize), c, symbolSize);
    }
    let pivot = 0;
    while (pivot < size && coef[pivot] === 0) pivot++;
    if (pivot === size) return false; // not innovative
    const inv = gfInv(coef[pivot]);
    gfMulRegion(coef, inv, size);
    gfMulRegion(data, inv, symbolSize);
    // Eliminate the new pivot column from the existing rows (keeps every row fully reduced).
    for (let row = 0; row < size; row++) {
      if (!this.hasPivot[row]) continue;
      const c = this.coefficients[row * size + pivot];
      if (c === 0) continue;
      gfMulAddRegion(this.coefficients.subarray(row * size, row * size + size), coef, c, size);
      gfMulAddRegion(this.payloads.subarray(row * symbolSize, row * symbolSize + symbolSize), data, c, symbolSize);
    }
    this.coefficients.set(coef.subarray(0, size), pivot * size);
    this.payloads.set(data.subarray(0, symbolSize), pivot * symbolSize);
    this.hasPivot[pivot] = 1;
    this.rank++;
    return true;
  }

  symbols(): Uint8Array {
    return this.payloads;
  }
}

class RlncDecoder implements UnitDecoder {
  readonly mode = 'rlnc' as const;
  private readonly generations: (GenerationDecoder | undefined)[];
  private readonly coefScratch: Uint8Array;
  private readonly dataScratch: Uint8Array;

  constructor(private readonly layout: Layout) {
    this.generations = new Array(layout.unitCount);
    this.coefScratch = new Uint8Array(layout.generationSize);
    this.dataScratch = new Uint8Array(layout.symbolSize);
  }

  add(generation: number, seed: number, payload: Uint8Array): AddResult {
    const { layout } = this;
    if (!(generation >= 0 && generation < layout.unitCount)) return 'invalid';
    if (payload.length !== layout.symbolSize) return 'invalid';
    const size = layout.unitSize(generation);
    // Allocated on first use, so memory follows what actually arrived.
    const gen = (this.generations[generation] ??= new GenerationDecoder(size, layout.symbolSize));
    if (gen.rank === size) return 'redundant';
    fillCoefficients(seed, this.coefScratch, size);
    this.dataScratch.set(payload);
    return gen.add(this.coefScratch, this.dataScratch) ? 'innovative' : 'redundant';
  }

  rank(generation: number): number {
    return this.generations[generation]?.rank ?? 0;
  }

  isComplete(generation: number): boolean {
    return this.rank(generation) === this.layout.unitSize(generation);
  }

  readObject(): Uint8Array {
    const { layout } = this;
    const object = new Uint8Array(layout.objectLength);
    const genBytes = layout.generationSize * layout.symbolSize;
    for (let g = 0; g < layout.unitCount; g++) {
      const gen = this.generations[g];
      if (!gen || !this.isComplete(g)) throw new Error(`generation ${g} is not decoded`);
      const start = g * genBytes;
      object.set(gen.symbols().subarray(0, Math.min(genBytes, layout.objectLength - start)), start);
    }
    return object;
  }

  free(): void {
    this.generations.fill(undefined);
  }
}

export const rlncCodec: Codec = {
  mode: 'rlnc',
  name: 'rlnc-ts',
  createEncoder: (object, layout) => new RlncEncoder(object, layout),
  // Reads the object in place: a coefficient row of its own only.
  encoderBytes: () => 256,
  createDecoder: (layout) => new RlncDecoder(layout),
};
