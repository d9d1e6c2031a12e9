/**
 * The per-packet link model of link-spec.ts, sans-IO: the caller hands in each packet's arrival
 * time (ms, nondecreasing per direction) and size, and gets its delivery time or `undefined` when
 * the link drops it. Because the link is FIFO and a packet's fate depends only on the packets
 * before it, the whole path (queue, rate, loss, delay) is decided at arrival.
 *
 * Stages, in order: disconnected? drop -> drop-tail queue (bytes) -> rate (unlimited, constant or
 * a mahimahi trace) -> loss at departure (i.i.d. or Gilbert-Elliott; a lost packet used the link)
 * -> one-way delay plus jitter, clamped so that delivery never precedes the previous one.
 *
 * Choices where the model text leaves room (kept simple; the testbed's linkem should agree):
 * - per-segment overrides of delay, jitter and loss apply by the packet's arrival time; a rate
 *   override applies by the time the packet reaches the head of the queue (its service start);
 * - a packet that would still be queued when a disconnected segment starts is dropped
 *   (`disconnected`) and so is every packet that arrives behind it before then (FIFO); it held
 *   its queue bytes until the disconnection;
 * - trace: an opportunity at time T serves packets that arrived at or before T; bytes left over in
 *   an opportunity serve the next packet only if that packet was already queued at T;
 * - correlated jitter: the AR(1) process keeps its unclamped value; only the applied delay is
 *   clamped at zero.
 */
import { Random, seededRandom } from '@mutp/shared';
import {
  DEFAULT_QUEUE_BYTES,
  DirectionSpec,
  JitterSpec,
  LinkSpec,
  LossSpec,
  RateSpec,
  ScheduleSegment,
  TRACE_OPPORTUNITY_BYTES,
} from './link-spec';

export type DropReason = 'disconnected' | 'queue' | 'loss';

export interface LinkDirectionStats {
  /** Packets offered to the link. */
  sent: number;
  delivered: number;
  dropped: Record<DropReason, number>;
}

export function emptyDrops(): Record<DropReason, number> {
  return { disconnected: 0, queue: 0, loss: 0 };
}

// ---- schedule

/** Where a time falls in a schedule, and when the next disconnection starts. */
export class ScheduleClock {
  private readonly segments: ScheduleSegment[];
  /** Start of each segment within one pass of the schedule. */
  private readonly starts: number[];
  /** Starts of the disconnected segments within one pass. */
  private readonly offStarts: number[];
  private readonly period: number;
  private readonly loop: boolean;

  constructor(spec: DirectionSpec['schedule']) {
    // Zero-length segments never apply; dropping them keeps the lookups simple.
    this.segments = (spec?.segments ?? []).filter((s) => s.durationMs > 0);
    this.loop = (spec?.loop ?? false) && this.segments.length > 0;
    this.starts = [];
    this.offStarts = [];
    let at = 0;
    for (const s of this.segments) {
      this.starts.push(at);
      if (!s.connected) this.offStarts.push(at);
      at += s.durationMs;
    }
    this.period = at;
  }

  /** The segment in force at `t`, or undefined when the schedule is empty. */
  segmentAt(t: number): ScheduleSegment | undefined {
    if (this.segments.length === 0) return undefined;
    const { offset } = this.split(t);
    return this.segments[lastAtOrBefore(this.starts, offset)];
  }

  isConnected(t: number): boolean {
    return this.segmentAt(t)?.connected ?? true;
  }

  /** Start of the first disconnected segment strictly after `t` (Infinity if none). */
  nextOffAfter(t: number): number {
    if (this.offStarts.length === 0) return Infinity;
    const { cycle, offset } = this.split(t);
    const i = firstAbove(this.offStarts, offset);
    if (i < this.offStarts.length) return cycle * this.period + this.offStarts[i];
    return this.loop ? (cycle + 1) * this.period + this.offStarts[0] : Infinity;
  }

  /** First time at or after `t` when the link is connected (Infinity if never again). */
  nextOnAtOrAfter(t: number): number {
    if (this.isConnected(t)) return t;
    const { cycle, offset } = this.split(t);
    for (let k = lastAtOrBefore(this.starts, offset) + 1; k < this.segments.length; k++)
      if (this.segments[k].connected) return cycle * this.period + this.starts[k];
    if (!this.loop) return Infinity;
    const k = this.segments.findIndex((s) => s.connected);
    return k < 0 ? Infinity : (cycle + 1) * this.period + this.starts[k];
  }

  /** The segments of one pass with their durations (for time-weighted means). */
  pass(): readonly ScheduleSegment[] {
    return this.segments;
  }

  private split(t: number): { cycle: number; offset: number } {
    if (!this.loop) return { cycle: 0, offset: t };
    const cycle = Math.floor(t / this.period);
    return { cycle, offset: t - cycle * this.period };
  }
}

/** Index of the first entry for which `after` holds (length if none); entries are sorted, `after` monotone. */
function partitionPoint(sorted: number[], after: (v: number) => boolean): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (after(sorted[mid])) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Index of the last entry <= x (0 if none: the first segment covers times before it). */
const lastAtOrBefore = (sorted: number[], x: number) => Math.max(0, partitionPoint(sorted, (v) => v > x) - 1);
/** Index of the first entry > x (length if none). */
const firstAbove = (sorted: number[], x: number) => partitionPoint(sorted, (v) => v > x);
/** Index of the first entry >= x (length if none). */
const firstAtOrAbove = (sorted: number[], x: number) => partitionPoint(sorted, (v) => v >= x);

// ---- trace rate

/** A mahimahi trace's delivery opportunities, repeating with the period of its last entry. */
class TraceServer {
  private readonly times: number[];
  private readonly period: number;
  /** The opportunity that served the previous packet's last byte, and what it had left. */
  private lastCycle = 0;
  private lastIndex = -1;
  private lastTime = -Infinity;
  private leftover = 0;

  constructor(readonly spec: Extract<RateSpec, { kind: 'trace' }>) {
    const times = spec.opportunitiesMs ?? [];
    if (times.length === 0 || times[times.length - 1] <= 0)
      throw new RangeError(`trace ${spec.file}: no opportunities or a zero period (opportunitiesMs)`);
    this.times = times;
    this.period = times[times.length - 1];
  }

  /** Departure of a packet of `bytes` that reaches the head of the queue at `arrival`. */
  serve(arrival: number, bytes: number): number {
    let need = bytes;
    let cycle: number;
    let index: number;
    if (arrival <= this.lastTime && this.leftover > 0) {
      // Queued when the previous packet finished: the rest of that opportunity is ours.
      const used = Math.min(need, this.leftover);
      this.leftover -= used;
      need -= used;
      if (need === 0) return this.lastTime;
    }
    if (arrival <= this.lastTime) [cycle, index] = this.after(this.lastCycle, this.lastIndex);
    else [cycle, index] = this.firstAtOrAfter(arrival);
    for (;;) {
      const used = Math.min(need, TRACE_OPPORTUNITY_BYTES);
      need -= used;
      if (need === 0) {
        this.remember(cycle, index, TRACE_OPPORTUNITY_BYTES - used);
        return this.lastTime;
      }
      [cycle, index] = this.after(cycle, index);
    }
  }

  /** Mean capacity in bytes per second. */
  static meanBytesPerSecond(spec: Extract<RateSpec, { kind: 'trace' }>): number {
    const times = spec.opportunitiesMs ?? [];
    const period = times[times.length - 1] ?? 0;
    return period > 0 ? (times.length * TRACE_OPPORTUNITY_BYTES * 1000) / period : 0;
  }

  private remember(cycle: number, index: number, leftover: number): void {
    this.lastCycle = cycle;
    this.lastIndex = index;
    this.lastTime = this.timeOf(cycle, index);
    this.leftover = leftover;
  }

  private timeOf(cycle: number, index: number): number {
    return cycle * this.period + this.times[index];
  }

  private after(cycle: number, index: number): [number, number] {
    return index + 1 < this.times.length ? [cycle, index + 1] : [cycle + 1, 0];
  }

  private firstAtOrAfter(t: number): [number, number] {
    // The previous pass's last entry (= period) may fall exactly on t, so start one pass back.
    let cycle = Math.max(0, Math.floor(t / this.period) - 1);
    for (;;) {
      const index = firstAtOrAbove(this.times, t - cycle * this.period);
      if (index < this.times.length) return [cycle, index];
      cycle++;
    }
  }
}

// ---- loss and jitter

const TWO_POW_32 = 0x100000000;

/** Random draws the link needs, from one seeded stream. */
class Draws {
  private spareGaussian: number | undefined;

  constructor(private readonly random: Random) {}

  uniform(): number {
    return this.random() / TWO_POW_32;
  }

  /** Standard normal (Box-Muller, both values used). */
  gaussian(): number {
    if (this.spareGaussian !== undefined) {
      const g = this.spareGaussian;
      this.spareGaussian = undefined;
      return g;
    }
    const radius = Math.sqrt(-2 * Math.log(1 - this.uniform()));
    const angle = 2 * Math.PI * this.uniform();
    this.spareGaussian = radius * Math.sin(angle);
    return radius * Math.cos(angle);
  }

  /** A fresh (uncorrelated) jitter sample in ms. */
  jitter(spec: JitterSpec): number {
    switch (spec.kind) {
      case 'none':
        return 0;
      case 'uniform':
        return this.uniform() * spec.maxMs;
      case 'normal':
        return this.gaussian() * spec.sdMs;
      case 'mixture': {
        const c = this.pickComponent(spec.components);
        return c ? c.meanMs + this.gaussian() * c.sdMs : 0;
      }
    }
  }

  private pickComponent<C extends { weight: number }>(components: C[]): C | undefined {
    const total = components.reduce((sum, c) => sum + Math.max(0, c.weight), 0);
    if (total <= 0) return components[0];
    let x = this.uniform() * total;
    for (const c of components) {
      x -= Math.max(0, c.weight);
      if (x < 0) return c;
    }
    return components[components.length - 1];
  }
}

/** Stationary loss probability of a loss spec (Gilbert-Elliott: weighted by its states' shares). */
export function stationaryLoss(spec: LossSpec | undefined): number {
  if (!spec || spec.kind === 'none') return 0;
  if (spec.kind === 'iid') return spec.p;
  const leave = spec.pGoodToBad + spec.pBadToGood;
  if (leave <= 0) return spec.lossGood;
  return (spec.pGoodToBad / leave) * spec.lossBad + (spec.pBadToGood / leave) * spec.lossGood;
}

/** Mean of a jitter spec's fresh samples, in ms. */
export function meanJitter(spec: JitterSpec | undefined): number {
  if (!spec) return 0;
  switch (spec.kind) {
    case 'none':
    case 'normal':
      return 0;
    case 'uniform':
      return spec.maxMs / 2;
    case 'mixture': {
      const total = spec.components.reduce((sum, c) => sum + Math.max(0, c.weight), 0);
      if (total <= 0) return spec.components[0]?.meanMs ?? 0;
      return spec.components.reduce((sum, c) => sum + (Math.max(0, c.weight) / total) * c.meanMs, 0);
    }
  }
}

/** Mean capacity of a rate spec in bytes per second (Infinity when unlimited). */
export function meanRate(spec: RateSpec): number {
  if (spec.kind === 'unlimited') return Infinity;
  if (spec.kind === 'constant') return spec.bytesPerSecond;
  return TraceServer.meanBytesPerSecond(spec);
}

// ---- one direction

interface Queued {
  /** When the packet leaves the queue: its departure, or the disconnection that drops it. */
  leaveAt: number;
  bytes: number;
}

/** One direction of an emulated link. */
export class SimLinkDirection {
  private readonly clock: ScheduleClock;
  private readonly draws: Draws;
  private readonly queueBytes: number;
  private readonly queue: Queued[] = [];
  private queueHead = 0;
  private queuedBytes = 0;
  private lastArrival = 0;
  private lastDeparture = -Infinity;
  private lastDelivery = -Infinity;
  /** Packets arriving before this time are dropped at it (a disconnection caught them queued). */
  private doomedUntil = -Infinity;
  private readonly traces = new Map<RateSpec, TraceServer>();
  private gilbertBad = false;
  private jitterState = 0;
  private readonly counts: LinkDirectionStats = { sent: 0, delivered: 0, dropped: emptyDrops() };

  constructor(
    readonly spec: DirectionSpec,
    random: Random,
  ) {
    this.clock = new ScheduleClock(spec.schedule);
    this.draws = new Draws(random);
    this.queueBytes = spec.queueBytes ?? DEFAULT_QUEUE_BYTES;
  }

  /** Offers a packet of `bytes` at time `t`; returns its delivery time, or undefined if dropped. */
  send(t: number, bytes: number): number | undefined {
    // Callers promise nondecreasing times; a slightly earlier one is treated as simultaneous.
    const at = Math.max(t, this.lastArrival);
    this.lastArrival = at;
    this.counts.sent++;
    const segment = this.clock.segmentAt(at);
    if (segment && !segment.connected) return this.drop('disconnected');
    this.releaseDeparted(at);
    if (this.queuedBytes + bytes > this.queueBytes) return this.drop('queue');
    if (at < this.doomedUntil) return this.enqueueDoomed(this.doomedUntil, bytes);
    const departure = this.departure(at, bytes);
    const disconnection = this.clock.nextOffAfter(at);
    if (departure > disconnection) {
      this.doomedUntil = disconnection;
      // The trace servers ran ahead for this packet; after the gap the queue starts empty.
      this.traces.clear();
      return this.enqueueDoomed(disconnection, bytes);
    }
    this.enqueue(departure, bytes);
    this.lastDeparture = departure;
    if (this.lostAtDeparture(segment?.loss ?? this.spec.loss)) return this.drop('loss');
    return this.deliver(departure, segment);
  }

  stats(): LinkDirectionStats {
    return { ...this.counts, dropped: { ...this.counts.dropped } };
  }

  private drop(reason: DropReason): undefined {
    this.counts.dropped[reason]++;
    return undefined;
  }

  private enqueueDoomed(disconnection: number, bytes: number): undefined {
    this.enqueue(disconnection, bytes);
    return this.drop('disconnected');
  }

  private enqueue(leaveAt: number, bytes: number): void {
    this.queue.push({ leaveAt, bytes });
    this.queuedBytes += bytes;
  }

  /** Forgets packets that have left the queue by `t` (leave times are nondecreasing: FIFO). */
  private releaseDeparted(t: number): void {
    const q = this.queue;
    while (this.queueHead < q.length && q[this.queueHead].leaveAt <= t) {
      this.queuedBytes -= q[this.queueHead].bytes;
      this.queueHead++;
    }
    // Compact now and then so the array does not grow without bound.
    if (this.queueHead > 1024 && this.queueHead * 2 > q.length) {
      q.splice(0, this.queueHead);
      this.queueHead = 0;
    }
  }

  /** When the packet's last byte leaves the rate stage (FIFO behind earlier packets). */
  private departure(arrival: number, bytes: number): number {
    const serviceStart = Math.max(arrival, this.lastDeparture);
    const rate = this.clock.segmentAt(serviceStart)?.rate ?? this.spec.rate;
    switch (rate.kind) {
      case 'unlimited':
        return serviceStart;
      case 'constant':
        return serviceStart + (bytes * 1000) / rate.bytesPerSecond;
      case 'trace':
        // Served from the head of the queue: an earlier packet's leftover counts only if we were queued.
        return this.traceServer(rate).serve(serviceStart, bytes);
    }
  }

  private traceServer(rate: Extract<RateSpec, { kind: 'trace' }>): TraceServer {
    let server = this.traces.get(rate);
    if (!server) {
      server = new TraceServer(rate);
      this.traces.set(rate, server);
    }
    return server;
  }

  private lostAtDeparture(loss: LossSpec | undefined): boolean {
    if (!loss || loss.kind === 'none') return false;
    if (loss.kind === 'iid') return this.draws.uniform() < loss.p;
    const flip = this.gilbertBad ? loss.pBadToGood : loss.pGoodToBad;
    if (this.draws.uniform() < flip) this.gilbertBad = !this.gilbertBad;
    return this.draws.uniform() < (this.gilbertBad ? loss.lossBad : loss.lossGood);
  }

  private deliver(departure: number, segment: ScheduleSegment | undefined): number {
    const delayMs = segment?.delayMs ?? this.spec.delayMs;
    const jitter = segment?.jitter ?? this.spec.jitter ?? { kind: 'none' };
    const rho = this.spec.jitterCorrelation ?? 0;
    this.jitterState = rho * this.jitterState + (1 - rho) * this.draws.jitter(jitter);
    const delay = Math.max(0, delayMs + this.jitterState);
    // FIFO: a packet never overtakes the one before it.
    const delivery = Math.max(departure + delay, this.lastDelivery);
    this.lastDelivery = delivery;
    this.counts.delivered++;
    return delivery;
  }
}

/** Both directions of a link; `down` is towards the client. */
export class SimLink {
  readonly down: SimLinkDirection;
  readonly up: SimLinkDirection;

  /** Each direction draws from its own stream, seeded from `random`, so one cannot shift the other. */
  constructor(
    readonly spec: LinkSpec,
    random: Random,
  ) {
    this.down = new SimLinkDirection(spec.down, seededRandom(random()));
    this.up = new SimLinkDirection(spec.up, seededRandom(random()));
  }

  /** Drops of both directions, by reason. */
  drops(): Record<DropReason, number> {
    return sumDrops([this.down.stats().dropped, this.up.stats().dropped]);
  }
}

export function sumDrops(all: Record<DropReason, number>[]): Record<DropReason, number> {
  const total = emptyDrops();
  for (const d of all) {
    total.disconnected += d.disconnected;
    total.queue += d.queue;
    total.loss += d.loss;
  }
  return total;
}
