/**
 * The slabs that check units copy their kept packets into (check-units.ts), pooled for reuse by
 * every checked decoder of the process (a browser frame, a Node client) instead of per download.
 * A fountain unit keeps every packet of its source block until it verifies (2 MiB for a 2 MiB
 * segment: 128 slabs), so a pool per download never had any to give it: each fountain download
 * allocated its whole log anew, and in Chromium the allocations cost ~10 ms of the downloader
 * frame per 2 MiB segment, five times what rlnc's recycled slabs cost (issue 33, profile:browser).
 */

/** Bytes of one slab: a unit wastes at most the unused end of its last one. */
export const SLAB_BYTES = 16 * 1024;
/** Slabs kept for reuse (4 MiB: a 2 MiB fountain block's log with room to spare); beyond, they are left to the collector. */
export const MAX_POOLED_SLABS = 256;

export class SlabPool {
  private readonly slabs: Uint8Array[] = [];

  constructor(private readonly max = MAX_POOLED_SLABS) {}

  /** Slabs ready for reuse. */
  get size(): number {
    return this.slabs.length;
  }

  /** A slab of `bytes` at least: a pooled one when SLAB_BYTES will do, else a new one. */
  take(bytes = SLAB_BYTES): Uint8Array {
    if (bytes > SLAB_BYTES) return new Uint8Array(bytes);
    return this.slabs.pop() ?? new Uint8Array(SLAB_BYTES);
  }

  /** Slabs nobody reads any more (every view into them dropped) go back for reuse. */
  give(slabs: readonly Uint8Array[]): void {
    for (const slab of slabs) if (slab.length === SLAB_BYTES && this.slabs.length < this.max) this.slabs.push(slab);
  }
}

/** The pool every checked decoder of this process shares. */
export const sharedSlabPool = new SlabPool();
