/**
 * What the cache's entries cost the proxy's memory budget: entries and slices are made here with
 * their encoders charged to the budget, encoders of objects the cache holds are kept idle for the
 * next transfer, and an object evicted while transfers still send it stays charged until the last
 * of them lets go.
 */
import { ByteRange, IdleEncoders, LayoutDigests, MemoryBudget, SharedEncoders } from '@mutp/shared';
import { Entry, EntryFacts, sha256 } from './cache-entry';
import { rangeKey } from './range-cache';

/** Slices memoised per entry; past it the oldest is forgotten (its users keep it). */
const MAX_SLICES_PER_ENTRY = 32;

export class EntryMemory {
  /** Bytes of evicted objects that transfers still hold (charged to the memory budget). */
  heldAfterEviction = 0;
  /** One callback for all entries: an evicted entry gained its first or lost its last user. */
  private readonly onHeldOutside = (entry: Entry, held: boolean) => this.heldOutside(entry, held);

  constructor(
    private readonly budget: MemoryBudget,
    private readonly idleEncoders: IdleEncoders | undefined,
  ) {}

  entry(bytes: Uint8Array, facts: EntryFacts, parent?: Entry): Entry {
    return new Entry(
      bytes,
      facts,
      sha256(bytes),
      new SharedEncoders(bytes, this.budget),
      new LayoutDigests(bytes, sha256),
      this.onHeldOutside,
      parent,
    );
  }

  /** A slice of `parent` for `range`, memoised on the parent so a range asked twice shares its state. */
  slice(parent: Entry, range: ByteRange, offset: number, length: number): Entry {
    const key = rangeKey('', range);
    const known = parent.slices.get(key);
    if (known) return known;
    // A cached parent's bytes are accounted for (and stay charged while a slice holds them after
    // eviction); an uncached one's are not, so a slice of it copies rather than keep it all alive.
    const shared = parent.cached;
    const bytes = shared ? parent.bytes.subarray(offset, offset + length) : parent.bytes.slice(offset, offset + length);
    const { completeLength } = parent.facts.extent;
    const slice = this.entry(
      bytes,
      {
        key: rangeKey(parent.facts.href, range),
        href: parent.facts.href,
        contentType: parent.facts.contentType,
        range: { start: range.start, completeLength },
        extent: { start: range.start, completeLength },
        validators: parent.facts.validators,
        fetchedAt: parent.facts.fetchedAt,
      },
      shared ? parent : undefined,
    );
    slice.cached = shared;
    if (shared && !parent.evicted) slice.encoders.keepIdleIn(this.idleEncoders);
    if (parent.slices.size >= MAX_SLICES_PER_ENTRY) {
      const oldest = parent.slices.keys().next().value!;
      parent.slices.get(oldest)?.encoders.keepIdleIn(undefined);
      parent.slices.delete(oldest);
    }
    parent.slices.set(key, slice);
    return slice;
  }

  /** The cache now holds `entry`: its encoders outlive its transfers (while the budget allows). */
  stored(entry: Entry): void {
    entry.encoders.keepIdleIn(this.idleEncoders);
  }

  /** The LRU dropped an entry: transfers still sending it keep it charged to the budget. */
  evicted(entry: Entry): void {
    // Encoders are kept idle only for objects the cache holds.
    entry.encoders.keepIdleIn(undefined);
    for (const slice of entry.slices.values()) slice.encoders.keepIdleIn(undefined);
    if (entry.evicted || !entry.cached) return;
    entry.evicted = true;
    if (entry.users > 0) this.heldOutside(entry, true);
  }

  /**
   * Charges (or gives back) an evicted object's bytes. Charged even past the budget's limit: the
   * bytes exist whether or not the budget likes it, and new admissions wait until they are gone.
   */
  private heldOutside(entry: Entry, held: boolean): void {
    const n = entry.bytes.byteLength;
    if (held) this.budget.takeAnyway(n);
    else this.budget.give(n);
    this.heldAfterEviction += held ? n : -n;
  }
}
