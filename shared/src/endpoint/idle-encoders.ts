/**
 * Encoders that no transfer uses any more, kept for the next transfer of the same object. A
 * wirehair encoder for a 2 MiB segment costs 3–15 ms of CPU to build (it solves the code), and
 * every viewer who asks for a popular segment after the previous one finished paid it again; on a
 * two-core machine with six proxies that delayed each fountain download by about 15 ms.
 *
 * Parked encoders stay charged to the memory budget. The budget takes them back, oldest first,
 * whenever anything else needs the memory (MemoryBudget.setReclaimer), and at most `maxBytes` of
 * them are kept; the owner drops an object's parked encoders when the object leaves its cache.
 */
import { MemoryBudget } from './admission';

interface Parked {
  bytes: number;
  dispose: () => void;
}

export class IdleEncoders {
  /** In parking order: the first is the oldest. */
  private readonly parked = new Map<object, Parked>();
  private parkedBytes = 0;

  constructor(
    budget: MemoryBudget,
    readonly maxBytes: number,
  ) {
    budget.setReclaimer((bytes) => this.release(bytes));
  }

  /** Keeps `key`'s encoder (`bytes` charged) until taken back with `unpark` or disposed. */
  park(key: object, bytes: number, dispose: () => void): void {
    if (bytes > this.maxBytes) {
      dispose();
      return;
    }
    this.parked.set(key, { bytes, dispose });
    this.parkedBytes += bytes;
    if (this.parkedBytes > this.maxBytes) this.release(this.parkedBytes - this.maxBytes);
  }

  /** Takes `key`'s encoder back into use; false if it was not parked (disposed meanwhile). */
  unpark(key: object): boolean {
    const p = this.parked.get(key);
    if (!p) return false;
    this.parked.delete(key);
    this.parkedBytes -= p.bytes;
    return true;
  }

  /** Disposes `key`'s encoder if it is parked. */
  drop(key: object): void {
    const p = this.parked.get(key);
    if (p) this.dispose(key, p);
  }

  /** Disposes the oldest parked encoders until `bytes` are freed or none is left. */
  release(bytes: number): void {
    let freed = 0;
    for (const [key, p] of this.parked) {
      if (freed >= bytes) break;
      freed += p.bytes;
      this.dispose(key, p);
    }
  }

  private dispose(key: object, p: Parked): void {
    this.parked.delete(key);
    this.parkedBytes -= p.bytes;
    p.dispose();
  }

  /** Bytes of encoders parked now. */
  get bytes(): number {
    return this.parkedBytes;
  }

  get count(): number {
    return this.parked.size;
  }
}
