/**
 * At how many proxies of the set to stage each segment (and then fetch it from), decided from
 * measured rates: the spread.
 *
 * Every proxy that stages a segment fetches all of it from the origin (it codes over the whole
 * object). Where the proxies' paths to the origin are one bottleneck of rate B, staging at k of
 * them completes B / (k·S) segments per second, while fetching a staged segment from k of them at
 * r each completes k·r / S: past k = sqrt(B / r) staging falls behind, and every segment waits for
 * its origin fetch however far ahead it was ordered (seen in bench:mobility at N = 4: four proxies
 * at 1792 KB/s behind one 60 Mbit/s origin path). The rule measures both rates at the spread in
 * use and moves the spread to where they meet:
 *
 *   k' = k · sqrt(R_stage / R_fetch)     (rounded, within [min, the set's size])
 *
 * R_stage is bytes staged per second: a hint's object times the hints in flight when it was sent,
 * over its origin fetch time (Little's law). R_fetch is what the proxies a segment came from
 * deliver together: their delivery rates as the Receiver measured them, summed, so every segment
 * gives a sample, staged or not (fetch times of staged segments alone came too rarely while
 * staging was behind, which is when they are needed). Rates are in bytes, so a player's small
 * audio segments and its video ones measure the same paths; both are medians of recent samples.
 * With
 * one shared origin path this lands on sqrt(B / r). With independent paths R_stage does not depend
 * on k and the rule settles where fetching is as fast as staging: fewer proxies fetch each segment
 * from the origin and no segment arrives later, since staging was the limit either way. While
 * staging keeps up (R_stage >= R_fetch) the spread grows back to the whole set.
 *
 * The spread only falls when staging is seen to be behind: segments whose download began before
 * every proxy they were staged at had them. A player paced by its buffer needs staging to keep
 * up with playback, not with the proxies' rate: on a fast origin with small segments a hint's
 * fixed latency makes R_stage look low though every segment is staged in time (the extension's
 * loopback tests saw the spread fall to 3 that way), and nothing is gained by fewer sources.
 *
 * It starts at the floor (`min`) and grows while staging keeps up, as TCP's slow start: the set's
 * N copies of every segment must not load an origin path before it is known to carry them. Started
 * at the whole set, four proxies behind one origin path took six to eight segments to learn that
 * (three staging answers at four copies each, with the SoftStage rule ordering more ahead as the
 * path's latency grew): about 5 s of a 32-segment series' 45 s in bench:mobility. A path that
 * keeps up costs the first segments only their extra sources: they are fetched from `min`
 * proxies until the rates are measured (`start: 'set'` begins at the whole set instead).
 *
 * Only samples taken at the current spread count; after a change both rates are measured anew.
 * Sans-IO: the stager feeds it and asks.
 */
import { Samples } from './samples';

export interface SpreadConfig {
  /** Never fewer sources per segment than this (while the set has them): one proxy's loss must not stall a segment. */
  min: number;
  /** Rates are medians of the last this-many samples ... */
  samples: number;
  /** ... and the spread moves only once each rate has this many at the current spread. */
  minSamples: number;
  /** Where the spread begins: at `min` (growing while staging keeps up) or at the whole set. */
  start: 'min' | 'set';
}

export const DEFAULT_SPREAD_CONFIG: SpreadConfig = { min: 2, samples: 5, minSamples: 3, start: 'min' };

export class SpreadRule {
  private readonly config: SpreadConfig;
  private spread: number;
  private max: number;
  /** Bytes per second: one sample per staged hint, one per downloaded segment. */
  private readonly stageRates: Samples;
  private readonly fetchRates: Samples;
  /** Of the last `samples` staged segments whose download began, whether each was behind (1) or not (0). */
  private readonly behind: number[] = [];
  private changes = 0;

  constructor(setSize: number, config: Partial<SpreadConfig> = {}) {
    this.config = { ...DEFAULT_SPREAD_CONFIG, ...config };
    if (!(this.config.min >= 1)) throw new RangeError(`min spread must be at least 1, got ${this.config.min}`);
    this.max = Math.max(1, setSize);
    this.spread = this.config.start === 'set' ? this.max : Math.min(this.config.min, this.max);
    this.stageRates = new Samples(this.config.samples);
    this.fetchRates = new Samples(this.config.samples);
  }

  current(): number {
    return this.spread;
  }

  /** Times the spread moved. */
  get moves(): number {
    return this.changes;
  }

  /** The set now has `n` proxies (a handoff that found fewer replacements, a new set). */
  setSize(n: number): void {
    const max = Math.max(1, n);
    if (max === this.max) return;
    this.max = max;
    this.move(Math.min(this.spread, max));
  }

  /**
   * A hint for `bytes` sent at spread `spread` was staged by all its proxies, the slowest after
   * `originMs` of origin fetch; `inFlight` hints (this one included) were out when it was sent.
   */
  observeStaging(spread: number, inFlight: number, originMs: number, bytes: number): void {
    // A hint answered from the cache (0 ms) says nothing of the origin path.
    if (spread !== this.spread || !(originMs > 0) || !(inFlight >= 1) || !(bytes > 0)) return;
    this.stageRates.add((1000 * inFlight * bytes) / originMs);
  }

  /** A segment came from `spread` proxies whose measured delivery rates sum to `bytesPerSecond`. */
  observeFetch(spread: number, bytesPerSecond: number): void {
    if (spread !== this.spread || !(bytesPerSecond > 0)) return;
    this.fetchRates.add(bytesPerSecond);
  }

  /**
   * A segment staged (ordered) at `spread` proxies began its download: `behind` when not all of
   * them had it yet.
   */
  observeStart(spread: number, behind: boolean): void {
    if (spread !== this.spread) return;
    this.behind.push(behind ? 1 : 0);
    if (this.behind.length > this.config.samples) this.behind.shift();
  }

  /** The spread for segments not yet given to proxies, moved when both rates are measured. */
  decide(): number {
    const { minSamples } = this.config;
    if (this.stageRates.count < minSamples || this.fetchRates.count < minSamples) return this.spread;
    const stageRate = this.stageRates.median!;
    const fetchRate = this.fetchRates.median!;
    const floor = Math.min(this.config.min, this.max);
    let next = Math.min(this.max, Math.max(floor, Math.round(this.spread * Math.sqrt(stageRate / fetchRate))));
    // Fewer sources only for staging that falls behind (most recent segments began before it was done).
    const behind = this.behind.reduce((a, b) => a + b, 0);
    if (next < this.spread && 2 * behind <= this.behind.length) next = this.spread;
    this.move(next);
    return this.spread;
  }

  private move(next: number): void {
    if (next === this.spread) return;
    this.spread = next;
    this.changes++;
    this.stageRates.clear();
    this.fetchRates.clear();
    this.behind.length = 0;
  }
}
