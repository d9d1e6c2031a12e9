/**
 * One object of the proxy's cache (or a slice of one): its bytes with their SHA-256, the encoders
 * and layout digests its transfers share, its users, and what a signed META says of where the
 * bytes came from. The cache (object-cache.ts) decides where entries live; an entry only counts
 * who holds it and tells the cache when an evicted one gains its first or loses its last user.
 */
import { createHash } from 'node:crypto';
import { AssertionProvenance, LayoutDigests, SharedEncoders, validValidator } from '@mutp/shared';
import { ResourceExtent, Validators } from './range-cache';

export interface CachedObject {
  bytes: Uint8Array;
  /** SHA-256 of bytes. */
  digest: Uint8Array;
  contentType?: string;
  /** For a ranged lookup: where the bytes sit in the resource (completeLength undefined: unknown). */
  range?: { start: number; completeLength?: number };
  /** Encoders shared by the transfers of this object (one codec copy per layout). */
  encoders: SharedEncoders;
  /** Integrity digests per layout, computed once for all transfers of this object. */
  digests: LayoutDigests;
  /** Whether the LRU accounts for the bytes (an object larger than the cache is served, not kept). */
  readonly cached: boolean;
  /** Marks one user (a transfer) of the bytes; call the returned function when it is done. */
  hold(): () => void;
  /** When the origin sent the bytes, and its validator: what a signed META asserts of them. */
  readonly provenance: AssertionProvenance;
}

export function sha256(bytes: Uint8Array): Uint8Array {
  const digest = createHash('sha256').update(bytes).digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

export interface EntryFacts {
  /** The cache key: the href, or the href and the range the entry was fetched for. */
  key: string;
  href: string;
  contentType?: string;
  range?: { start: number; completeLength?: number };
  /** Where the bytes sit in the resource (a whole object: from 0, complete). */
  extent: ResourceExtent;
  validators: Validators;
  /** When the origin's answer arrived (ms since the epoch). */
  fetchedAt: number;
}

/** A cache entry (or a slice of one) and its users; `evicted` once the LRU dropped it. */
export class Entry implements CachedObject {
  users = 0;
  evicted = false;
  cached = false;
  /** Lookups that returned this entry (staging: whether anyone asked for it after the hint). */
  lookups = 0;
  /** Slices served from this entry, by range key. */
  readonly slices = new Map<string, Entry>();
  readonly contentType: string | undefined;
  readonly range: { start: number; completeLength?: number } | undefined;
  readonly provenance: AssertionProvenance;

  constructor(
    readonly bytes: Uint8Array,
    readonly facts: EntryFacts,
    readonly digest: Uint8Array,
    readonly encoders: SharedEncoders,
    readonly digests: LayoutDigests,
    private readonly heldOutside: (entry: Entry, held: boolean) => void,
    /** A slice's bytes are its parent's: holding the slice holds the parent. */
    readonly parent?: Entry,
  ) {
    this.contentType = facts.contentType;
    this.range = facts.range;
    this.provenance = provenanceOf(facts);
  }

  hold(): () => void {
    const releaseParent = this.parent?.hold();
    // Users of an object the LRU no longer accounts for pay for its bytes while they hold it.
    if (this.users++ === 0 && this.evicted) this.heldOutside(this, true);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.users === 0 && this.evicted) this.heldOutside(this, false);
      releaseParent?.();
    };
  }
}

/**
 * What a signed META says of where the bytes came from: a strong ETag names the version best
 * (a weak one does not promise these bytes), else Last-Modified, else nothing.
 */
function provenanceOf(facts: EntryFacts): AssertionProvenance {
  const { etag, lastModified } = facts.validators;
  if (etag !== undefined && !etag.startsWith('W/') && validValidator(etag))
    return { fetchedAt: facts.fetchedAt, validator: { kind: 'etag', value: etag } };
  if (lastModified !== undefined && validValidator(lastModified))
    return { fetchedAt: facts.fetchedAt, validator: { kind: 'last-modified', value: lastModified } };
  return { fetchedAt: facts.fetchedAt };
}
