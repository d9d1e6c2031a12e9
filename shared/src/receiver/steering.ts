/**
 * How the receiver steers its sources apart (it alone knows them all): each source's share of the
 * work (weights, proportional to its measured rate) and, with caps on, how many packets it may
 * keep in flight. Both ride in every FEEDBACK.
 */
import { UNLIMITED_IN_FLIGHT } from '../limits';
import { ReceiverConfig } from './config';
import { Source } from './source';

export type SteeringConfig = Pick<
  ReceiverConfig,
  | 'inactiveAfterMs'
  | 'weightLevels'
  | 'weightHysteresis'
  | 'inFlightCaps'
  | 'capSlackPackets'
  | 'capLossMargin'
  | 'capHeadroom'
>;

/** A known capacity raises a measured rate by at most this factor (see rateOf). */
const MAX_HINT_GAIN = 2;
/** No capacity hint counts for more than this multiple of the hints' median (a proxy's claim is not proof). */
const MAX_HINT_OVER_MEDIAN = 4;

export class Steering {
  private published?: Uint8Array;
  /** When the first data packet from any source arrived (-1: none yet). */
  private firstDataAt = -1;
  /** Each source's known upload capacity, bytes/s (0: unknown); see the constructor. */
  private readonly capacities: number[];

  /**
   * `capacityHints`: each source's upload capacity in bytes/s as origo reported it (the proxy's
   * configured limit; 0 or absent = unknown). A source's share is taken from the larger of its
   * measured rate and its capacity (at most MAX_HINT_GAIN times the measured rate): a fast source
   * that owns too few slots idles, so measures slow, and shares from measured rates alone never
   * correct that. Before any measurement the capacities alone set the shares, and the REQUEST
   * carries them (initialWeights) so the sources start from them too.
   */
  constructor(
    private readonly config: SteeringConfig,
    capacityHints: readonly number[] = [],
  ) {
    this.capacities = boundedHints(capacityHints);
  }

  /**
   * The weights the REQUEST carries: from the known capacities, or undefined (equal shares) when
   * some source's is unknown. They are also the first published weights, so the first FEEDBACK
   * does not hand slots already in flight to other owners.
   */
  initialWeights(sourceCount: number): Uint8Array | undefined {
    if (this.published) return this.published;
    const capacities = Array.from({ length: sourceCount }, (_, i) => this.capacities[i] ?? 0);
    if (capacities.some((c) => c <= 0)) return undefined;
    this.published = this.quantise(capacities);
    return this.published;
  }

  onData(now: number): void {
    if (this.firstDataAt < 0) this.firstDataAt = now;
  }

  /**
   * Each source's share of the work, quantised to `weightLevels`: proportional to its measured
   * rate; sources without an estimate yet count as average; silent or failed sources get none.
   * The published weights change only when a share moved by more than the hysteresis.
   */
  weights(sources: readonly Source[], now: number): Uint8Array {
    const n = sources.length;
    const rates = new Array<number>(n).fill(0);
    let known = 0;
    let knownSum = 0;
    for (let i = 0; i < n; i++) {
      const s = sources[i];
      if (!s.live) continue;
      // Silent: stopped sending, or never started while others have been sending for a while.
      const silent =
        s.stats.received > 0
          ? now - s.lastArrivalAt > this.config.inactiveAfterMs
          : this.firstDataAt >= 0 && now - this.firstDataAt > this.config.inactiveAfterMs;
      if (silent) continue;
      const rate = this.rateOf(s, i);
      rates[i] = rate > 0 ? rate : -1;
      if (rate > 0) {
        known++;
        knownSum += rate;
      }
    }
    const average = known > 0 ? knownSum / known : 1;
    for (let i = 0; i < n; i++) if (rates[i] < 0) rates[i] = average;
    const weights = this.quantise(rates);
    if (!this.published || this.moved(this.published, weights)) this.published = weights;
    return this.published;
  }

  /** Shares in `weightLevels` levels; a source with a positive rate gets at least 1. All zero = equal (see Partition). */
  private quantise(rates: readonly number[]): Uint8Array {
    const weights = new Uint8Array(rates.length);
    let total = 0;
    for (const r of rates) total += r;
    if (total === 0) return weights;
    const levels = this.config.weightLevels;
    for (let i = 0; i < rates.length; i++)
      if (rates[i] > 0) weights[i] = Math.max(1, Math.round((levels * rates[i]) / total));
    return weights;
  }

  /**
   * The rate a source's share is taken from: its measured rate, raised towards its known capacity
   * by at most MAX_HINT_GAIN once measured (a source claiming a capacity it does not have gains at
   * most that factor of share, and the slots it leaves overdue are helped with) and never above
   * it; the capacity alone before (0: nothing known). An honest source measured at half its
   * capacity or more therefore keeps the share its capacity gives.
   */
  private rateOf(source: Source, index: number): number {
    const measured = source.rate.bytesPerSecond;
    const capacity = this.capacities[index] ?? 0;
    if (measured <= 0) return capacity;
    if (capacity <= 0) return measured;
    // Capped at the capacity too: a proxy enforces its own upload limit, so a rate above it is a
    // bunched train, and passing that noise on would republish the weights again and again.
    return Math.min(capacity, MAX_HINT_GAIN * measured);
  }

  private moved(published: Uint8Array, next: Uint8Array): boolean {
    for (let i = 0; i < next.length; i++) {
      const a = published[i];
      const b = next[i];
      if ((a === 0) !== (b === 0)) return true; // a source died or came back
      if (Math.abs(a - b) > this.config.weightHysteresis * a) return true;
    }
    return false;
  }

  /**
   * What the sources have in flight beyond what the window still misses is the main waste of
   * multi-source coding: it arrives after a generation or the object is complete. Only the client
   * knows every source's share, so it caps each source's packets in flight at its share of the
   * DoF the window misses (plus loss and a little slack). Near the end of the object this shrinks
   * with what is left, so the sources stop together.
   */
  inFlightCap(source: Source, weights: Uint8Array, index: number, windowMissing: number): number {
    if (!this.config.inFlightCaps) return UNLIMITED_IN_FLIGHT;
    let total = 0;
    for (const w of weights) total += w;
    const share = total === 0 ? 1 / weights.length : weights[index] / total;
    const sent = source.acks.largestSeq + 1;
    const loss = sent > 0 ? Math.max(0, 1 - source.stats.received / sent) : 0;
    const c = this.config;
    const cap =
      Math.ceil(windowMissing * Math.min(1, share * c.capHeadroom) * (1 + loss + c.capLossMargin)) + c.capSlackPackets;
    return Math.min(cap, UNLIMITED_IN_FLIGHT - 1);
  }
}

/** Finite positive hints, each at most MAX_HINT_OVER_MEDIAN times the median of the known ones; others 0. */
function boundedHints(hints: readonly number[]): number[] {
  const known = hints.filter((h) => Number.isFinite(h) && h > 0).sort((a, b) => a - b);
  if (known.length === 0) return hints.map(() => 0);
  const ceiling = MAX_HINT_OVER_MEDIAN * known[Math.floor((known.length - 1) / 2)];
  return hints.map((h) => (Number.isFinite(h) && h > 0 ? Math.min(h, ceiling) : 0));
}
