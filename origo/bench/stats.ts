/** Latency samples and failure counters of a load run: small, allocation-light, no dependencies. */

/** Milliseconds, rounded to microseconds for the report. */
export const ms = (x: number): number => Math.round(x * 1000) / 1000;

/** Nearest-rank percentile of ascending values (NaN when empty). */
export function percentile(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export interface Summary {
  count: number;
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
}

/** A growing list of durations; sorted once, when summarised. */
export class Samples {
  private values: number[] = [];

  push(value: number): void {
    this.values.push(value);
  }

  /** The durations so far (to send them to the process that summarises). */
  all(): readonly number[] {
    return this.values;
  }

  pushAll(values: readonly number[]): void {
    for (const v of values) this.values.push(v);
  }

  get count(): number {
    return this.values.length;
  }

  summary(): Summary {
    const sorted = Float64Array.from(this.values).sort();
    const at = (p: number) => (sorted.length === 0 ? null : ms(percentile(sorted, p)));
    return { count: sorted.length, p50Ms: at(50), p99Ms: at(99), maxMs: at(100) };
  }
}

/** Counts per key (error codes, close codes, failure kinds); keys appear only once counted. */
export class Tally {
  private readonly counts = new Map<string, number>();

  add(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }

  get total(): number {
    let sum = 0;
    for (const n of this.counts.values()) sum += n;
    return sum;
  }

  toJSON(): Record<string, number> {
    return Object.fromEntries([...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b)));
  }
}
