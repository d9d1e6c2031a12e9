/** The last `n` samples of a measurement, for a median that one outlier does not move. */
export class Samples {
  private readonly values: number[] = [];
  constructor(private readonly n: number) {}

  add(value: number): void {
    if (!(value >= 0) || !Number.isFinite(value)) return;
    this.values.push(value);
    if (this.values.length > this.n) this.values.shift();
  }

  get count(): number {
    return this.values.length;
  }

  get median(): number | null {
    if (this.values.length === 0) return null;
    const s = [...this.values].sort((a, b) => a - b);
    const mid = s.length >> 1;
    return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  }

  clear(): void {
    this.values.length = 0;
  }
}
