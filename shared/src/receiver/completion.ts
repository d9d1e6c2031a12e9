/**
 * Decode progress of one object: the checked decoder once the identity and unit digests are
 * agreed, the window's lower edge, and the final verification that yields the object. It knows
 * nothing of sources beyond their index (who sent a packet, who is excluded).
 */
import { Codec } from '../codec/types';
import { Sha256 } from '../integrity';
import { Layout } from '../layout';
import { Mode } from '../wire';
import { bytesEqual, Identity } from './agreement';
import { CheckedDecoder, CheckOutcome } from './check-units';

export interface CompletionOptions {
  mode: Mode;
  symbolSize: number;
  generationSize: number;
  /** Strict moving window in packets (paper's w). */
  window: number;
  codec: Codec;
  sha256: Sha256;
  maxPacketLogBytes: number;
  /** false: the integrity-cost baseline (ReceiverConfig.integrity); default true. */
  checked?: boolean;
}

/** What one FEEDBACK reports of the window, by mode, and the DoF it still misses in all. */
export type WindowReport =
  | { mode: 'uncoded'; bitmap: Uint8Array; bitCount: number; missingDof: number }
  | { mode: 'rlnc'; ranks: Uint8Array; missingDof: number }
  | { mode: 'fountain'; missing: Uint16Array; missingDof: number };

export type VerifyFailure = { code: 'length-mismatch' | 'digest-mismatch'; message: string };

export class Completion {
  private layout?: Layout;
  private decoder?: CheckedDecoder;
  private unitsPerCheck = 1;
  private windowUnits = 0;
  /** The lowest unit not complete: the window's lower edge. */
  wMin = 0;
  /**
   * Set once a check unit failed or a polluter's packets were discarded: from then on feedback
   * carries the rewind flag, so sources accept ranks lower than what they were told before.
   */
  rewound = false;
  private object?: Uint8Array;

  constructor(private readonly opts: CompletionOptions) {}

  /** Decoding has begun: data can be used. */
  get started(): boolean {
    return this.decoder !== undefined;
  }

  get dof(): number {
    return this.decoder?.dof ?? 0;
  }

  get totalDof(): number {
    return this.layout?.totalDof ?? 0;
  }

  /** Decode progress for messages: DoF received of the object's total ('?' before it is known). */
  describeProgress(): string {
    return `${this.decoder?.dof ?? 0} of ${this.layout?.totalDof ?? '?'} DoF`;
  }

  start(objectLength: number, digests: Uint8Array): void {
    const o = this.opts;
    this.layout = new Layout(o.mode, objectLength, o.symbolSize, o.generationSize);
    this.decoder = new CheckedDecoder(this.layout, o.codec, digests, o.sha256, o.maxPacketLogBytes, o.checked ?? true);
    this.unitsPerCheck = this.decoder.checks.unitsPerCheck;
    this.windowUnits = this.layout.windowUnits(o.window);
  }

  /** Every unit decoded and verified (a fountain block may take a few packets beyond its symbol count). */
  get allUnitsComplete(): boolean {
    return this.decoder !== undefined && this.decoder.allVerified;
  }

  /**
   * Sources send only inside the window; beyond it (plus a check unit of slack, as an uncoded
   * source's window runs ahead of a check unit still being verified) a packet would only cost memory.
   */
  beyondWindow(unit: number): boolean {
    return unit >= this.wMin + this.windowUnits + 2 * this.unitsPerCheck;
  }

  /** A packet for the decoder (started only); a failed check unit rewinds. */
  add(source: number, unit: number, key: number, payload: Uint8Array): { outcome: CheckOutcome; checkFailed: boolean } {
    const decoder = this.decoding();
    const failedBefore = decoder.failedChecks;
    const outcome = decoder.add(source, unit, key, payload);
    const checkFailed = decoder.failedChecks !== failedBefore;
    if (checkFailed) this.rewound = true;
    return { outcome, checkFailed };
  }

  /** Uncoded: part of a source's symbol digests for check unit `check`; proven packets rewind. */
  symbolDigests(source: number, check: number, first: number, digests: Uint8Array): CheckOutcome {
    const outcome = this.decoding().symbolDigests(source, check, first, digests);
    if (outcome.polluters.length > 0) this.rewound = true;
    return outcome;
  }

  /** Discards a polluter's packets; what its absence lets verify (or fail) comes back. */
  exclude(source: number): CheckOutcome[] {
    this.rewound = true;
    return this.decoding().exclude(source);
  }

  /**
   * wMin is the lowest unit not complete: received (uncoded, even while its check unit waits for
   * the rest) or decoded and verified (coded). After ranks were lowered it is searched from 0.
   */
  slideWindow(lowered: boolean): void {
    const decoder = this.decoder;
    const layout = this.layout;
    let u = lowered ? 0 : this.wMin;
    if (decoder && layout) while (u < layout.unitCount && decoder.rank(u) >= layout.unitSize(u)) u++;
    this.wMin = u;
  }

  /** Checks the reassembled object against the agreed identity; on success it can be taken. */
  verify(identity: Identity): VerifyFailure | undefined {
    const decoder = this.decoding();
    const object = decoder.object;
    if (object.length !== identity.objectLength) {
      return {
        code: 'length-mismatch',
        message: `reassembled ${object.length} bytes, expected ${identity.objectLength}`,
      };
    }
    const digest = this.opts.checked === false ? undefined : (decoder.objectDigest() ?? this.opts.sha256(object));
    if (digest && !bytesEqual(digest, identity.digest)) {
      return {
        code: 'digest-mismatch',
        message: 'SHA-256 of the reassembled object differs from the digest the sources reported',
      };
    }
    this.object = object;
    return undefined;
  }

  /** The verified object, once: the caller owns it from then on (nothing here keeps it). */
  takeObject(): Uint8Array | undefined {
    const object = this.object;
    this.object = undefined;
    this.decoder?.releaseObject();
    return object;
  }

  /** Releases the decoder's memory (the transfer ended). */
  free(): void {
    this.decoder?.free();
  }

  /** The window as FEEDBACK reports it; undefined before decoding started. */
  windowReport(): WindowReport | undefined {
    const layout = this.layout;
    const decoder = this.decoder;
    if (!layout || !decoder) return undefined;
    // windowUnits never exceeds what one feedback of the mode can report (Layout.windowUnits).
    const count = Math.min(this.windowUnits, layout.unitCount - this.wMin);
    let missingDof = 0;
    if (this.opts.mode === 'uncoded') {
      const bitmap = new Uint8Array((count + 7) >> 3);
      for (let i = 0; i < count; i++) {
        if (decoder.rank(this.wMin + i) > 0) bitmap[i >> 3] |= 1 << (i & 7);
        else missingDof++;
      }
      return { mode: 'uncoded', bitmap, bitCount: count, missingDof };
    }
    if (this.opts.mode === 'fountain') {
      const missing = new Uint16Array(count);
      for (let i = 0; i < count; i++) {
        const u = this.wMin + i;
        // A fountain decoder may need a block or two beyond the symbol count: never report 0 early.
        missing[i] = decoder.isVerified(u) ? 0 : Math.max(1, layout.unitSize(u) - decoder.rank(u));
        missingDof += missing[i];
      }
      return { mode: 'fountain', missing, missingDof };
    }
    const ranks = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      ranks[i] = decoder.rank(this.wMin + i);
      missingDof += layout.unitSize(this.wMin + i) - ranks[i];
    }
    return { mode: 'rlnc', ranks, missingDof };
  }

  private decoding(): CheckedDecoder {
    if (!this.decoder) throw new Error('decoding has not started');
    return this.decoder;
  }
}
