/**
 * Per-unit integrity: the object is cut into check units, each with a 16-byte digest (truncated
 * SHA-256 of its bytes); META carries SHA-256 over the list (the unit root), DIGESTS messages the
 * list itself. The client checks every check unit as soon as it decodes, so a polluted unit is
 * caught where it happens and its packets can be traced to the source that sent them.
 *
 * A check unit is `generationSize` symbols in uncoded and rlnc mode (one generation; g packets),
 * one source block in fountain mode (a fountain block decodes all at once, so a finer digest
 * would not tell more).
 *
 * In uncoded mode a unit's digest is taken over its symbols' digests (the 16-byte digest of each
 * symbol, concatenated), not over its bytes: a source asked for them (SYMBOL_DIGESTS) proves them
 * against the agreed unit digest, and the client then judges every packet on its own. Uncoded
 * packets are systematic, so leaving a source's packets out (how coded units find a polluter)
 * would need repeats of exactly those symbols, which the partitioned sources never send.
 */
import { sha256 as portableSha256 } from '@noble/hashes/sha256';
import { Layout } from './layout';
import { DIGEST_BYTES, UNIT_DIGEST_BYTES } from './limits';

export type Sha256 = (data: Uint8Array) => Uint8Array;

/** How a transfer's layout units group into check units. */
export class CheckLayout {
  /** Layout units per check unit: g packets in uncoded mode, one generation or block otherwise. */
  readonly unitsPerCheck: number;
  readonly checkCount: number;
  /** Bytes of every check unit but the last. */
  readonly checkBytes: number;

  constructor(readonly layout: Layout) {
    this.unitsPerCheck = layout.mode === 'uncoded' ? layout.generationSize : 1;
    this.checkCount = Math.ceil(layout.unitCount / this.unitsPerCheck);
    this.checkBytes = this.unitsPerCheck * layout.symbolsPerUnit * layout.symbolSize;
  }

  checkOf(unit: number): number {
    return Math.floor(unit / this.unitsPerCheck);
  }

  /** Index of a layout unit inside its check unit's own layout (see unitLayout). */
  localUnit(unit: number): number {
    return unit % this.unitsPerCheck;
  }

  firstUnit(check: number): number {
    return check * this.unitsPerCheck;
  }

  /** Layout units in check unit k. */
  unitsIn(check: number): number {
    return Math.min(this.unitsPerCheck, this.layout.unitCount - check * this.unitsPerCheck);
  }

  byteOffset(check: number): number {
    return check * this.checkBytes;
  }

  byteLength(check: number): number {
    return Math.min(this.checkBytes, this.layout.objectLength - check * this.checkBytes);
  }

  /**
   * The layout of check unit k on its own: its packets decode with a decoder of this layout, with
   * unit numbers from localUnit (the codecs' coefficients and block codes depend only on the
   * unit's size and the packet key, never on where the unit sits in the object).
   */
  unitLayout(check: number): Layout {
    const l = this.layout;
    return new Layout(l.mode, this.byteLength(check), l.symbolSize, l.generationSize);
  }
}

/** The 16-byte digest of some bytes (a coded check unit, an uncoded symbol). */
export function unitDigest(bytes: Uint8Array, sha256: Sha256 = portableSha256): Uint8Array {
  return sha256(bytes).subarray(0, UNIT_DIGEST_BYTES);
}

/** Uncoded: the digest of each `symbolSize` piece of a check unit's bytes, concatenated. */
export function symbolDigests(bytes: Uint8Array, symbolSize: number, sha256: Sha256 = portableSha256): Uint8Array {
  const count = Math.ceil(bytes.length / symbolSize);
  const out = new Uint8Array(count * UNIT_DIGEST_BYTES);
  for (let i = 0; i < count; i++)
    out.set(unitDigest(bytes.subarray(i * symbolSize, (i + 1) * symbolSize), sha256), i * UNIT_DIGEST_BYTES);
  return out;
}

/** The digest of one check unit's bytes under `layout` (over its symbol digests in uncoded mode). */
export function checkUnitDigest(layout: Layout, bytes: Uint8Array, sha256: Sha256 = portableSha256): Uint8Array {
  if (layout.mode !== 'uncoded') return unitDigest(bytes, sha256);
  return unitDigest(symbolDigests(bytes, layout.symbolSize, sha256), sha256);
}

/**
 * Every check unit's digest, concatenated (checkCount x 16 bytes). Pure: a proxy computes it once
 * per cached object and layout (mode, symbol size, generation size) and hands it to each Sender.
 */
export function unitDigests(object: Uint8Array, layout: Layout, sha256: Sha256 = portableSha256): Uint8Array {
  const checks = new CheckLayout(layout);
  const out = new Uint8Array(checks.checkCount * UNIT_DIGEST_BYTES);
  for (let k = 0; k < checks.checkCount; k++) {
    const start = checks.byteOffset(k);
    const bytes = object.subarray(start, start + checks.byteLength(k));
    out.set(checkUnitDigest(layout, bytes, sha256), k * UNIT_DIGEST_BYTES);
  }
  return out;
}

/** META's unit root: SHA-256 over the concatenated unit digests. */
export function unitRoot(digests: Uint8Array, sha256: Sha256 = portableSha256): Uint8Array {
  const root = sha256(digests);
  if (root.length !== DIGEST_BYTES) throw new RangeError('sha256 must return 32 bytes');
  return root;
}
