/**
 * Whole objects kept for range requests, bounded by their total size; least recently used
 * first out. O(1) per operation (a Map keeps insertion order; a hit re-inserts).
 */
export class ByteLru {
  private readonly entries = new Map<string, Uint8Array>();
  private bytes = 0;

  constructor(private readonly capacityBytes: number) {}

  get size(): number {
    return this.entries.size;
  }

  get totalBytes(): number {
    return this.bytes;
  }

  get(key: string): Uint8Array | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  /** Keeps `value` unless it alone exceeds the capacity; evicts the oldest to make room. */
  set(key: string, value: Uint8Array): boolean {
    this.delete(key);
    if (value.byteLength > this.capacityBytes) return false;
    this.entries.set(key, value);
    this.bytes += value.byteLength;
    for (const [oldest, old] of this.entries) {
      if (this.bytes <= this.capacityBytes) break;
      this.entries.delete(oldest);
      this.bytes -= old.byteLength;
    }
    return true;
  }

  delete(key: string): void {
    const value = this.entries.get(key);
    if (value === undefined) return;
    this.entries.delete(key);
    this.bytes -= value.byteLength;
  }

  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }
}
