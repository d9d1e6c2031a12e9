/**
 * Measures the proxy's upload rate over the last few seconds (for origo's heartbeat): bytes are
 * added to one-second buckets in a ring; the rate is their sum over the window. Time in ms.
 */
export class RateMeter {
  private readonly buckets: Float64Array;
  private readonly stamps: Float64Array;
  private total = 0;

  constructor(
    private readonly windowSeconds = 5,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.buckets = new Float64Array(windowSeconds + 1);
    this.stamps = new Float64Array(windowSeconds + 1).fill(-1);
  }

  add(bytes: number, now = this.clock()): void {
    const second = Math.floor(now / 1000);
    const i = second % this.buckets.length;
    if (this.stamps[i] !== second) {
      this.stamps[i] = second;
      this.buckets[i] = 0;
    }
    this.buckets[i] += bytes;
    this.total += bytes;
  }

  /** Bytes per second over the last `windowSeconds` whole seconds plus the current one so far. */
  bytesPerSecond(now = this.clock()): number {
    const second = Math.floor(now / 1000);
    let sum = 0;
    for (let i = 0; i < this.buckets.length; i++) {
      if (this.stamps[i] >= second - this.windowSeconds && this.stamps[i] <= second) sum += this.buckets[i];
    }
    const elapsed = this.windowSeconds + (now / 1000 - second);
    return sum / elapsed;
  }

  /** Bytes counted since creation. */
  get totalBytes(): number {
    return this.total;
  }
}
