/**
 * Decoding with per-unit verification and polluter identification (client side).
 *
 * Each check unit (integrity.ts) decodes on its own decoder; when it is complete its bytes are
 * checked against the agreed unit digest before they reach the object. Every packet of an
 * unverified check unit is kept with the source that sent it (bounded by `logBudgetBytes`), so
 * when a check unit fails the receiver can find out who polluted it:
 *
 * - one contributing source: it is the polluter (the digest list was agreed by a quorum);
 * - several: the unit is decoded again once per contributor with that contributor's packets left
 *   out (more packets are asked for meanwhile). The first such decode that verifies gives the
 *   unit's true bytes; every kept packet is then re-encoded from them and compared, and a source
 *   is named a polluter only on a packet that provably differs: an honest source is never blamed.
 * - when every leave-one-out decode fails too, two sources polluted the unit at once: it is decoded
 *   once per pair of contributors left out (with at most MAX_PAIR_CONTRIBUTORS contributors, so at
 *   most 10 decoders), and the first that verifies proves both (issue 31: before, two polluters in
 *   one unit failed the download and neither was reported).
 *
 * - uncoded mode: its packets are systematic, so leaving a source out would need repeats of just
 *   its symbols, which the partitioned sources never send (issue 31, attack 5: the download
 *   stalled). A failed unit instead asks the sources for its symbol digests (SYMBOL_DIGESTS);
 *   an answer that hashes to the agreed unit digest tells every packet's truth on its own, so each
 *   source with a wrong packet is proven, any number of them, and the unit is rebuilt from the
 *   right ones. An answer that does not hash to it proves its sender lied.
 *
 * In coded modes, three or more polluters inside one check unit at once are not told apart: the
 * unit then fails (the download falls back); polluters in different units are caught one after
 * another.
 */
import { bytesEqual } from '../bytes';
import { AddResult, Codec, UnitDecoder } from '../codec/types';
import { CheckLayout, checkUnitDigest, Sha256, unitDigest } from '../integrity';
import { Layout } from '../layout';
import { UNIT_DIGEST_BYTES } from '../limits';
import { HashStream, hashStreamOf, ObjectDigest } from './object-digest';
import { SlabPool, sharedSlabPool } from './slab-pool';
import { SystematicPrefix } from './systematic-prefix';

interface LoggedPacket {
  source: number;
  /** Layout unit within the check unit (see CheckLayout.localUnit). */
  local: number;
  key: number;
  payload: Uint8Array;
}

/** A decode of a check unit without the packets of the `left` sources. */
interface LeaveOut {
  left: readonly number[];
  decoder: UnitDecoder;
  failed: boolean;
}

/** Pairs are tried only among this many contributors (10 pairs, 10 decoders of one unit). */
const MAX_PAIR_CONTRIBUTORS = 5;

class CheckUnit {
  /** Normal state: one decoder fed with every packet. */
  decoder?: UnitDecoder;
  /** Recovery state: one decoder per left-out set (a contributor, then pairs), fed with the rest. */
  recovery?: LeaveOut[];
  /** Whether the recovery leaves out pairs (every single one failed). */
  pairs = false;
  log: LoggedPacket[] = [];
  logBytes = 0;
  /** Where the log's payloads are copied (see copyToSlab); the last one is being filled. */
  slabs: Uint8Array[] = [];
  slabUsed = 0;
  /** Some packet could not be kept (budget): a failure here cannot be traced. */
  unlogged = false;
  /** Uncoded: the unit failed and its symbol digests were asked for. */
  asked = false;
  /** Uncoded: the symbol digests, once an answer proved them; every packet is judged by them. */
  symbols?: Uint8Array;
  /** Uncoded: answers being assembled (an answer may span datagrams), by source. */
  answers?: Map<number, SymbolAnswer>;
  /** Fountain: the unit's hash taken as its systematic blocks arrive (systematic-prefix.ts). */
  prefix?: SystematicPrefix;

  constructor(readonly layout: Layout) {}
}

interface SymbolAnswer {
  digests: Uint8Array;
  /** Symbols described so far (each at most once). */
  have: Uint8Array;
  count: number;
}

export interface CheckOutcome {
  result: AddResult;
  /** The check unit verified with this packet and its bytes are in the object. */
  verified: boolean;
  /** Sources proven to have sent packets that differ from the verified bytes. */
  polluters: number[];
  /** The check unit cannot be recovered (the download must fail), with why. */
  unrecoverable?: string;
  /** Uncoded: this check unit failed; ask the sources for its symbol digests. */
  askSymbolDigests?: number;
  /** Sources proven to have answered symbol digests that contradict the agreed unit digest. */
  liars?: number[];
  /** Uncoded: this check unit's symbol digests are known now (nobody needs to be asked again). */
  symbolsKnown?: number;
}

export class CheckedDecoder {
  readonly checks: CheckLayout;
  /** The object as verified units fill it (empty once handed over: see releaseObject). */
  object: Uint8Array;
  private readonly units = new Map<number, CheckUnit>();
  private readonly verified: Uint8Array;
  private verifiedSymbols = 0;
  private logBytes = 0;
  /** Check units that failed once (stats). */
  failedChecks = 0;
  /**
   * SHA-256 of the whole object, when one check unit is the whole object (a fountain object of
   * one source block, an rlnc object of one generation) and its check hashed exactly these bytes:
   * the object's own check compares this instead of hashing the same bytes again (issue 33: a
   * fountain download hashed its whole object twice at completion, on its critical path).
   */
  wholeObjectDigest?: Uint8Array;
  /**
   * The object's SHA-256 taken as units verify, in order (object-digest.ts), when there are
   * several check units and `sha256` can hash incrementally.
   */
  private readonly streamed?: ObjectDigest;
  private readonly startHash?: () => HashStream;

  constructor(
    readonly layout: Layout,
    private readonly codec: Codec,
    /** checkCount x UNIT_DIGEST_BYTES, agreed by the sources. */
    private readonly digests: Uint8Array,
    private readonly sha256: Sha256,
    private readonly logBudgetBytes: number,
    /** false: the integrity-cost baseline (ReceiverConfig.integrity): every unit is taken as decoded. */
    private readonly checked = true,
    /** Where kept packets' slabs come from and go back to (shared by the process's decoders). */
    private readonly slabPool: SlabPool = sharedSlabPool,
  ) {
    this.checks = new CheckLayout(layout);
    if (digests.length !== this.checks.checkCount * UNIT_DIGEST_BYTES)
      throw new RangeError('digest list does not match the layout');
    this.object = new Uint8Array(layout.objectLength);
    this.verified = new Uint8Array(this.checks.checkCount);
    this.startHash = checked ? hashStreamOf(sha256) : undefined;
    if (this.startHash && !this.unitIsWholeObject()) this.streamed = new ObjectDigest(this.checks, this.startHash);
  }

  /**
   * SHA-256 of the whole object if it was taken on the way (its one check unit's check, or the
   * units hashed in order as they verified); undefined: the caller hashes the object.
   */
  objectDigest(): Uint8Array | undefined {
    return this.wholeObjectDigest ?? (this.allVerified ? this.streamed?.digest() : undefined);
  }

  /** Whether the check unit holding layout unit u is verified (its bytes are in the object). */
  isVerified(unit: number): boolean {
    return this.verified[this.checks.checkOf(unit)] === 1;
  }

  /**
   * DoF of layout unit u to report to the sources: complete once verified; in recovery the least
   * of the leave-one-out decoders, so the sources keep sending until one of them can decode.
   */
  rank(unit: number): number {
    const k = this.checks.checkOf(unit);
    if (this.verified[k]) return this.layout.unitSize(unit);
    const c = this.units.get(k);
    if (!c) return 0;
    const local = this.checks.localUnit(unit);
    if (c.decoder) return c.decoder.rank(local);
    let least = Infinity;
    for (const l of c.recovery ?? []) if (!l.failed) least = Math.min(least, l.decoder.rank(local));
    return least === Infinity ? 0 : least;
  }

  /** DoF held: verified symbols plus what the unverified check units report. */
  get dof(): number {
    let dof = this.verifiedSymbols;
    for (const [k] of this.units) {
      const first = this.checks.firstUnit(k);
      for (let u = first; u < first + this.checks.unitsIn(k); u++) dof += this.rank(u);
    }
    return dof;
  }

  get allVerified(): boolean {
    return this.verifiedSymbols === this.layout.symbolCount;
  }

  /** Bytes of packets kept for identification right now. */
  get keptBytes(): number {
    return this.logBytes;
  }

  add(source: number, unit: number, key: number, payload: Uint8Array): CheckOutcome {
    const none: CheckOutcome = { result: 'redundant', verified: false, polluters: [] };
    if (!Number.isInteger(unit) || unit < 0 || unit >= this.layout.unitCount) return { ...none, result: 'invalid' };
    const k = this.checks.checkOf(unit);
    if (this.verified[k]) return none;
    const c = this.unit(k);
    const local = this.checks.localUnit(unit);
    if (c.symbols && !this.symbolOk(c, local, payload)) return { ...none, result: 'invalid', polluters: [source] };
    if (c.decoder) {
      const result = c.decoder.add(local, key, payload);
      if (result === 'invalid') return { ...none, result };
      this.keep(c, source, local, key, payload);
      if (result === 'innovative') c.prefix?.accepted(key, payload);
      if (result === 'innovative' && complete(c.decoder, c.layout)) return { ...this.onComplete(k, c), result };
      return { ...none, result };
    }
    this.keep(c, source, local, key, payload);
    let result: AddResult = 'redundant';
    for (const l of c.recovery ?? []) {
      if (l.left.includes(source) || l.failed) continue;
      const r = l.decoder.add(local, key, payload);
      if (r === 'invalid') return { ...none, result: r };
      if (r === 'innovative') result = 'innovative';
    }
    return { ...this.tryRecovery(k, c), result };
  }

  /**
   * A source was found to pollute: forget its packets everywhere; unverified units go back to one
   * decoder over the others' packets (their ranks may drop: the sources are asked again).
   */
  exclude(source: number): CheckOutcome[] {
    const outcomes: CheckOutcome[] = [];
    for (const [k, c] of this.units) {
      if (!c.recovery && !c.log.some((p) => p.source === source)) continue;
      const kept = c.log.filter((p) => p.source !== source);
      const slabs = this.drop(c);
      c.decoder = this.decoderFrom(c.layout, kept);
      for (const p of kept) this.keep(c, p.source, p.local, p.key, p.payload);
      this.recycle(slabs); // only now: the kept payloads were views into them
      if (kept.length > 0 && complete(c.decoder, c.layout)) outcomes.push(this.onComplete(k, c));
    }
    return outcomes;
  }

  /**
   * Uncoded: part of a source's answer with check unit k's symbol digests (from symbol `first`).
   * Only a unit that asked takes answers; the first whole answer that hashes to the unit's digest
   * is used, one that does not proves its sender a liar.
   */
  symbolDigests(source: number, k: number, first: number, digests: Uint8Array): CheckOutcome {
    const none: CheckOutcome = { result: 'redundant', verified: false, polluters: [] };
    const c = this.units.get(k);
    if (!c || !c.asked || c.symbols || this.verified[k]) return none;
    const symbols = c.layout.symbolCount;
    const count = digests.length / UNIT_DIGEST_BYTES;
    if (first + count > symbols) return { ...none, liars: [source] };
    c.answers ??= new Map();
    let answer = c.answers.get(source);
    if (!answer) {
      answer = { digests: new Uint8Array(symbols * UNIT_DIGEST_BYTES), have: new Uint8Array(symbols), count: 0 };
      c.answers.set(source, answer);
    }
    for (let i = 0; i < count; i++) {
      if (answer.have[first + i]) continue;
      answer.have[first + i] = 1;
      answer.count++;
      answer.digests.set(
        digests.subarray(i * UNIT_DIGEST_BYTES, (i + 1) * UNIT_DIGEST_BYTES),
        (first + i) * UNIT_DIGEST_BYTES,
      );
    }
    if (answer.count < symbols) return none;
    c.answers.delete(source);
    const want = this.digests.subarray(k * UNIT_DIGEST_BYTES, (k + 1) * UNIT_DIGEST_BYTES);
    if (!bytesEqual(unitDigest(answer.digests, this.sha256), want)) return { ...none, liars: [source] };
    c.symbols = answer.digests;
    c.answers = undefined;
    return this.judge(k, c);
  }

  free(): void {
    for (const [, c] of this.units) this.recycle(this.drop(c));
    this.units.clear();
  }

  /**
   * The object was handed to the caller: this decoder stops holding it, so a finished transfer
   * that lingers to answer stray data (download.ts) keeps no copy of what it delivered.
   */
  releaseObject(): void {
    this.object = new Uint8Array(0);
  }

  // ---------------------------------------------------------------- internals

  private unit(k: number): CheckUnit {
    let c = this.units.get(k);
    if (!c) {
      c = new CheckUnit(this.checks.unitLayout(k));
      c.decoder = this.codec.createDecoder(c.layout);
      if (this.startHash && this.layout.mode === 'fountain' && c.layout.symbolCount >= 2) {
        const start = this.checks.byteOffset(k);
        const target = this.object.subarray(start, start + this.checks.byteLength(k));
        c.prefix = new SystematicPrefix(c.layout, target, this.startHash);
      }
      this.units.set(k, c);
    }
    return c;
  }

  private keep(c: CheckUnit, source: number, local: number, key: number, payload: Uint8Array): void {
    if (!this.checked) return;
    if (this.logBytes + payload.length > this.logBudgetBytes) {
      c.unlogged = true;
      return;
    }
    c.log.push({ source, local, key, payload: this.copyToSlab(c, payload) });
    c.logBytes += payload.length;
    this.logBytes += payload.length;
  }

  /**
   * A copy of `payload` in the unit's current slab (a new one when it does not fit). Slabs, not an
   * ArrayBuffer per copy: one allocation per slab (none once the pool holds some), where a copy per
   * packet cost an allocation and its later collection per packet (issue 33; in Chromium `keep`
   * was ~4 % of the frame's CPU).
   */
  private copyToSlab(c: CheckUnit, payload: Uint8Array): Uint8Array {
    let slab = c.slabs.at(-1);
    if (!slab || c.slabUsed + payload.length > slab.length) {
      slab = this.slabPool.take(payload.length);
      c.slabs.push(slab);
      c.slabUsed = 0;
    }
    const copy = slab.subarray(c.slabUsed, c.slabUsed + payload.length);
    copy.set(payload);
    c.slabUsed += payload.length;
    return copy;
  }

  /** Slabs whose payloads nobody reads any more go back to the pool. */
  private recycle(slabs: Uint8Array[]): void {
    this.slabPool.give(slabs);
  }

  /**
   * Forgets the unit's decoders and log; returns its slabs, for the caller to recycle once it no
   * longer reads the old log's payloads (they are views into them).
   */
  private drop(c: CheckUnit): Uint8Array[] {
    c.decoder?.free();
    c.decoder = undefined;
    for (const l of c.recovery ?? []) if (!l.failed) l.decoder.free();
    c.recovery = undefined;
    c.pairs = false;
    // Its packets are fed to new decoders now: what it hashed may no longer be what decodes.
    c.prefix = undefined;
    this.logBytes -= c.logBytes;
    c.log = [];
    c.logBytes = 0;
    c.unlogged = false;
    const slabs = c.slabs;
    c.slabs = [];
    c.slabUsed = 0;
    return slabs;
  }

  /**
   * Whether check unit k's bytes match its agreed digest. With `full`, the SHA-256 of exactly these
   * bytes was taken already (a fountain unit's systematic prefix).
   */
  private digestOk(k: number, bytes: Uint8Array, full?: Uint8Array): boolean {
    if (!this.checked) return true;
    const want = this.digests.subarray(k * UNIT_DIGEST_BYTES, (k + 1) * UNIT_DIGEST_BYTES);
    if (this.unitIsWholeObject() && bytes.length === this.layout.objectLength) {
      // A coded unit's digest is its bytes' SHA-256, truncated (integrity.ts): keep it whole.
      const digest = full ?? this.sha256(bytes).slice();
      const ok = bytesEqual(digest.subarray(0, UNIT_DIGEST_BYTES), want);
      if (ok) this.wholeObjectDigest = digest;
      return ok;
    }
    if (full) return bytesEqual(full.subarray(0, UNIT_DIGEST_BYTES), want);
    return bytesEqual(checkUnitDigest(this.layout, bytes, this.sha256), want);
  }

  /** One coded check unit is the whole object: its check hashes exactly the object's bytes. */
  private unitIsWholeObject(): boolean {
    return this.layout.mode !== 'uncoded' && this.checks.checkCount === 1;
  }

  private symbolOk(c: CheckUnit, local: number, payload: Uint8Array): boolean {
    const symbols = c.symbols as Uint8Array;
    if (payload.length !== c.layout.payloadLength(local)) return false;
    const want = symbols.subarray(local * UNIT_DIGEST_BYTES, (local + 1) * UNIT_DIGEST_BYTES);
    return bytesEqual(unitDigest(payload, this.sha256), want);
  }

  /**
   * Uncoded: judges every kept packet of check unit k by symbol digests just proven, and rebuilds
   * the unit from the right ones; the senders of wrong ones are proven polluters.
   */
  private judge(k: number, c: CheckUnit): CheckOutcome {
    const outcome: CheckOutcome = { result: 'redundant', verified: false, polluters: [], symbolsKnown: k };
    if (c.unlogged)
      return {
        ...outcome,
        unrecoverable: `check unit ${k} failed its digest and its packets were not all kept (log budget)`,
      };
    const polluters = new Set<number>();
    const right = c.log.filter((p) => {
      const ok = this.symbolOk(c, p.local, p.payload);
      if (!ok) polluters.add(p.source);
      return ok;
    });
    const slabs = this.drop(c);
    c.decoder = this.decoderFrom(c.layout, right);
    for (const p of right) this.keep(c, p.source, p.local, p.key, p.payload);
    this.recycle(slabs); // only now: the right payloads were views into them
    if (complete(c.decoder, c.layout)) {
      const done = this.onComplete(k, c);
      return { ...done, polluters: [...polluters, ...done.polluters], symbolsKnown: k };
    }
    return { ...outcome, polluters: [...polluters] };
  }

  /** Check unit k verified with `bytes` (already in the object when they were hashed in place). */
  private accept(k: number, c: CheckUnit, bytes: Uint8Array, inPlace = false): void {
    if (!inPlace) this.object.set(bytes, this.checks.byteOffset(k));
    this.verified[k] = 1;
    this.verifiedSymbols += c.layout.symbolCount;
    this.streamed?.advance(this.object, (check) => this.verified[check] === 1);
    this.recycle(this.drop(c));
    this.units.delete(k);
  }

  private onComplete(k: number, c: CheckUnit): CheckOutcome {
    const decoder = c.decoder as UnitDecoder;
    let bytes = decoder.readObject();
    let full: Uint8Array | undefined;
    if (c.prefix) {
      // The unit's bytes are now the object's (received systematic blocks, then decoded ones).
      full = c.prefix.finish(bytes).slice();
      c.prefix = undefined;
      const start = this.checks.byteOffset(k);
      bytes = this.object.subarray(start, start + bytes.length);
    }
    if (this.digestOk(k, bytes, full)) {
      this.accept(k, c, bytes, full !== undefined);
      return { result: 'innovative', verified: true, polluters: [], symbolsKnown: c.asked ? k : undefined };
    }
    this.failedChecks++;
    const contributors = [...new Set(c.log.map((p) => p.source))];
    if (!c.unlogged && contributors.length === 1) {
      // Only its packets made up the unit, and the digest list was agreed: it polluted.
      this.recycle(this.drop(c));
      c.decoder = this.codec.createDecoder(c.layout);
      return { result: 'innovative', verified: false, polluters: contributors };
    }
    if (this.layout.mode === 'uncoded' && !c.symbols) {
      // Keep the decoder: its full ranks stop the sources from sending the unit again meanwhile.
      c.asked = true;
      return { result: 'innovative', verified: false, polluters: [], askSymbolDigests: k };
    }
    if (c.unlogged)
      return {
        result: 'innovative',
        verified: false,
        polluters: [],
        unrecoverable: `check unit ${k} failed its digest and its packets were not all kept (log budget)`,
      };
    decoder.free();
    c.decoder = undefined;
    c.recovery = contributors.map((left) => this.leaveOut(c, [left]));
    return this.tryRecovery(k, c);
  }

  private leaveOut(c: CheckUnit, left: readonly number[]): LeaveOut {
    const kept = c.log.filter((p) => !left.includes(p.source));
    return { left, decoder: this.decoderFrom(c.layout, kept), failed: false };
  }

  private tryRecovery(k: number, c: CheckUnit): CheckOutcome {
    const outcome: CheckOutcome = { result: 'redundant', verified: false, polluters: [] };
    if (!c.recovery) return outcome;
    for (const l of c.recovery) {
      if (l.failed || !complete(l.decoder, c.layout)) continue;
      const bytes = l.decoder.readObject();
      if (!this.digestOk(k, bytes)) {
        l.failed = true;
        l.decoder.free();
        continue;
      }
      const polluters = this.prove(c, bytes);
      this.accept(k, c, bytes);
      return { ...outcome, verified: true, polluters };
    }
    if (!c.recovery.every((l) => l.failed)) return outcome;
    const contributors = [...new Set(c.log.map((p) => p.source))];
    if (!c.pairs && contributors.length > 2 && contributors.length <= MAX_PAIR_CONTRIBUTORS) {
      // Every single one left out still fails: two sources polluted this unit at once.
      c.pairs = true;
      c.recovery = [];
      for (let i = 0; i < contributors.length; i++)
        for (let j = i + 1; j < contributors.length; j++)
          c.recovery.push(this.leaveOut(c, [contributors[i], contributors[j]]));
      return this.tryRecovery(k, c);
    }
    return {
      ...outcome,
      unrecoverable: `check unit ${k} fails with any ${c.pairs ? 'two sources' : 'single source'} left out: more sources polluted it`,
    };
  }

  /** Sources with a kept packet that differs from what the verified bytes encode to. */
  private prove(c: CheckUnit, bytes: Uint8Array): number[] {
    const encoder = this.codec.createEncoder(bytes, c.layout);
    const polluters = new Set<number>();
    try {
      for (const p of c.log) {
        if (polluters.has(p.source)) continue;
        const length = c.layout.payloadLength(p.local);
        if (p.payload.length !== length) {
          polluters.add(p.source);
          continue;
        }
        if (encoder.usableKey && !encoder.usableKey(p.local, p.key)) {
          polluters.add(p.source);
          continue;
        }
        const expected = new Uint8Array(length);
        encoder.encodeInto(p.local, p.key, expected);
        if (!bytesEqual(expected, p.payload)) polluters.add(p.source);
      }
    } finally {
      encoder.free();
    }
    return [...polluters];
  }

  private decoderFrom(layout: Layout, packets: LoggedPacket[]): UnitDecoder {
    const decoder = this.codec.createDecoder(layout);
    for (const p of packets) decoder.add(p.local, p.key, p.payload);
    return decoder;
  }
}

function complete(decoder: UnitDecoder, layout: Layout): boolean {
  for (let u = 0; u < layout.unitCount; u++) if (!decoder.isComplete(u)) return false;
  return true;
}
