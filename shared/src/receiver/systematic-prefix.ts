/**
 * A fountain check unit's SHA-256, mostly taken before it decodes (issue 33). Its check hashes
 * the whole decoded unit (a 2 MB segment is one unit), and in Chromium that hash was the largest
 * part of the work at completion, on every fountain download's critical path (6-15 ms per 2 MB
 * against 2-19 ms for wirehair's solve, measured with profile:browser on a busy machine).
 *
 * Block ids below a unit's symbol count are its symbols as they are (docs/protocol.md §8.4): each
 * such block the decoder accepts is written straight to its place in the object, and the unit's
 * bytes are hashed from its start as far as these blocks reach without a gap. Once the unit
 * decodes, only the rest is copied from the decoder and hashed.
 *
 * What is proven does not change: the digest compared is SHA-256 of exactly the bytes that then
 * stand in the object and are delivered (the received blocks where they were hashed, the decoded
 * bytes after them). A wrong systematic block makes that digest differ, and the unit fails as it
 * would have (it is then recovered from its decoders and hashed whole, see check-units.ts).
 */
import { Layout } from '../layout';
import { HashStream } from './object-digest';

/** Contiguous bytes are hashed in pieces of at least this many (fewer calls into the hasher). */
const MIN_UPDATE_BYTES = 32 * 1024;

export class SystematicPrefix {
  /** Symbols from the unit's start whose bytes are in place (no gap). */
  private contiguous = 0;
  /** Bytes hashed so far (a prefix of the unit, at most contiguous symbols' worth). */
  private hashedBytes = 0;
  private readonly have: Uint8Array;
  private readonly stream: HashStream;

  constructor(
    /** The unit's own layout (one source block). */
    private readonly layout: Layout,
    /** The unit's place in the object: written here, hashed from here. */
    private readonly target: Uint8Array,
    start: () => HashStream,
  ) {
    this.have = new Uint8Array(layout.symbolCount);
    this.stream = start();
  }

  /** The decoder accepted block `key` of the unit with this payload (padded to the symbol size). */
  accepted(key: number, payload: Uint8Array): void {
    const { symbolCount, symbolSize } = this.layout;
    if (!Number.isInteger(key) || key < 0 || key >= symbolCount || this.have[key] === 1) return;
    const start = key * symbolSize;
    const length = Math.min(symbolSize, this.target.length - start);
    if (payload.length < length) return;
    this.target.set(payload.subarray(0, length), start);
    this.have[key] = 1;
    while (this.contiguous < symbolCount && this.have[this.contiguous] === 1) this.contiguous++;
    const ready = Math.min(this.contiguous * symbolSize, this.target.length);
    if (ready - this.hashedBytes >= MIN_UPDATE_BYTES) this.hashUpTo(ready);
  }

  /**
   * The unit decoded to `decoded`: its bytes after the hashed prefix are copied to their place and
   * hashed. Returns SHA-256 of the unit's bytes as they now stand in the object.
   */
  finish(decoded: Uint8Array): Uint8Array {
    if (decoded.length !== this.target.length) throw new RangeError('decoded unit has the wrong length');
    const ready = Math.min(this.contiguous * this.layout.symbolSize, this.target.length);
    this.hashUpTo(ready);
    this.target.set(decoded.subarray(this.hashedBytes), this.hashedBytes);
    this.hashUpTo(this.target.length);
    return this.stream.digest();
  }

  private hashUpTo(end: number): void {
    if (end <= this.hashedBytes) return;
    this.stream.update(this.target.subarray(this.hashedBytes, end));
    this.hashedBytes = end;
  }
}
