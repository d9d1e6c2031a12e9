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

export class Steering {
  private published?: Uint8Array;
  /** When the first data packet from any source arrived (-1: none yet). */
  private firstDataAt = -1;

  constructor(private readonly config: SteeringConfig) {}

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
      const rate = s.rate.bytesPerSecond;
      rates[i] = rate > 0 ? rate : -1;
      if (rate > 0) {
        known++;
        knownSum += rate;
      }
    }
    const average = known > 0 ? knownSum / known : 1;
    let total = 0;
    for (let i = 0; i < n; i++) {
      if (rates[i] < 0) rates[i] = average;
      total += rates[i];
    }
    const weights = new Uint8Array(n);
    if (total === 0) return weights; // all zero = equal shares (see Partition)
    const levels = this.config.weightLevels;
    for (let i = 0; i < n; i++) if (rates[i] > 0) weights[i] = Math.max(1, Math.round((levels * rates[i]) / total));
    if (!this.published || this.moved(this.published, weights)) this.published = weights;
    return this.published;
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
