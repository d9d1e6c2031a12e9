/**
 * The object's SHA-256, taken while the download runs: each check unit's bytes are fed to an
 * incremental hash as soon as every unit before it is verified too, so the whole-object hash
 * that META's digest is compared with is ready when the last unit verifies (issue 33: one
 * SHA-256 of the whole object at completion sat on every download's critical path, ~7 ms per
 * 2 MB in Chromium). The bytes hashed are the object's own, in order, each exactly once: the
 * result is SHA-256 of the object, and the object check (completion.ts) compares it as before.
 */
import { CheckLayout, Sha256 } from '../integrity';

/** An incremental SHA-256: noble's `sha256.create()` has this shape. */
export interface HashStream {
  update(data: Uint8Array): unknown;
  digest(): Uint8Array;
}

/** A one-shot SHA-256 that may also start incremental ones (noble's `sha256` does). */
export type StreamingSha256 = Sha256 & { create?: () => HashStream };

/** How to start an incremental hash with `sha256`, if it can (else the object is hashed at completion). */
export function hashStreamOf(sha256: Sha256): (() => HashStream) | undefined {
  const create = (sha256 as StreamingSha256).create;
  return typeof create === 'function' ? () => create.call(sha256) : undefined;
}

export class ObjectDigest {
  /** Check units hashed: always a prefix of the object. */
  private hashed = 0;
  private readonly stream: HashStream;
  private result?: Uint8Array;

  constructor(
    private readonly checks: CheckLayout,
    start: () => HashStream,
  ) {
    this.stream = start();
  }

  /**
   * A check unit was verified and its bytes are in `object`: hashes every verified unit from the
   * first one not hashed yet (units verify in any order; a later one waits for those before it).
   */
  advance(object: Uint8Array, isVerified: (check: number) => boolean): void {
    const { checks } = this;
    while (this.hashed < checks.checkCount && isVerified(this.hashed)) {
      const start = checks.byteOffset(this.hashed);
      this.stream.update(object.subarray(start, start + checks.byteLength(this.hashed)));
      this.hashed++;
    }
  }

  /** SHA-256 of the object once every check unit was hashed; undefined before (the caller hashes it). */
  digest(): Uint8Array | undefined {
    if (this.hashed < this.checks.checkCount) return undefined;
    // A stream gives its digest once.
    this.result ??= this.stream.digest();
    return this.result;
  }
}
