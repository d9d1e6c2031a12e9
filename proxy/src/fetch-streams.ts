/**
 * The bodies of the cache's fetches while they arrive, for a shield parent to pass on to its
 * children as the origin sends them (shield-stream.ts) instead of once it holds the whole object.
 *
 * A stream refers to the chunks the origin fetch buffers anyway (charged to the memory budget by
 * that fetch) and lets go of them when the fetch settles: from then on the bytes are the cache
 * entry's, and a reader not yet at the end goes on from the entry. So a stream costs no memory
 * of its own, and a slow child cannot make the parent keep a second copy.
 */
import type { ByteRange } from '@mutp/shared';
import type { FetchControl, ObjectFetcher } from './origin-fetches';
import { rangeKey } from './range-cache';

/** The body of one fetch under way: its chunks so far, and whether it has settled. */
export class BodyStream {
  private chunks: Uint8Array[] | undefined = [];
  private received = 0;
  private waking: (() => void)[] = [];

  /** Body bytes received so far. */
  get length(): number {
    return this.received;
  }

  /** The fetch has settled (done or failed): the chunks are gone, the entry (if any) has the bytes. */
  get settled(): boolean {
    return this.chunks === undefined;
  }

  /** The chunks from the `index`-th on; undefined once settled. */
  chunksFrom(index: number): readonly Uint8Array[] | undefined {
    return this.chunks?.slice(index);
  }

  /** Resolves at the next chunk or when the fetch settles. */
  changed(): Promise<void> {
    if (this.settled) return Promise.resolve();
    return new Promise((resolve) => this.waking.push(resolve));
  }

  push(chunk: Uint8Array): void {
    if (!this.chunks) return;
    this.chunks.push(chunk);
    this.received += chunk.byteLength;
    this.wake();
  }

  settle(): void {
    this.chunks = undefined;
    this.wake();
  }

  private wake(): void {
    for (const resolve of this.waking.splice(0)) resolve();
  }
}

/** The streams of the fetches under way, by cache key (href and range). */
export class FetchStreams {
  private readonly byKey = new Map<string, BodyStream>();

  /** Wraps a fetcher so that its fetches' bodies are streams while they run. */
  tap(fetcher: ObjectFetcher): ObjectFetcher {
    return (href, control) => {
      const key = rangeKey(href, control.range);
      const stream = new BodyStream();
      // The cache runs one fetch per key at a time; the last one started is the one to join.
      this.byKey.set(key, stream);
      const tapped: FetchControl = {
        ...control,
        onBody: (chunk) => {
          stream.push(chunk);
          control.onBody?.(chunk);
        },
      };
      const settle = () => {
        stream.settle();
        if (this.byKey.get(key) === stream) this.byKey.delete(key);
      };
      const fetched = fetcher(href, tapped);
      fetched.then(settle, settle);
      return fetched;
    };
  }

  /** The stream of the fetch under way for exactly `href` (and `range`), if any. */
  of(href: string, range: ByteRange | undefined): BodyStream | undefined {
    return this.byKey.get(rangeKey(href, range));
  }

  /** Fetches streamed now (stats, tests). */
  get size(): number {
    return this.byKey.size;
  }
}
