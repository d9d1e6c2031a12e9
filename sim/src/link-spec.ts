/**
 * One emulated link, as both the simulator and the testbed's emulator (testbed/emulator, linkem)
 * run it. The JSON form of a `LinkSpec` is linkem's configuration (`up`, `down`), so one spec means
 * the same network in both. The per-packet model (docs/testbed.md "Link model"):
 * disconnected? drop -> drop-tail queue (bytes) -> rate (unlimited, constant or a mahimahi trace)
 * -> loss at departure (i.i.d. or Gilbert-Elliott; a lost packet used the link) -> one-way delay
 * plus jitter, never reordering (FIFO).
 */

export type RateSpec =
  | { kind: 'unlimited' }
  | { kind: 'constant'; bytesPerSecond: number }
  /**
   * mahimahi's packet-delivery trace: one integer millisecond per line, each a chance to deliver
   * 1504 bytes; the file repeats with the period of its last line. `file` is an absolute path for
   * linkem; `opportunitiesMs` carries the parsed lines (the simulator reads them from here).
   */
  | { kind: 'trace'; file: string; opportunitiesMs?: number[] };

export type JitterSpec =
  | { kind: 'none' }
  | { kind: 'uniform'; maxMs: number }
  | { kind: 'normal'; sdMs: number }
  | { kind: 'mixture'; components: { weight: number; meanMs: number; sdMs: number }[] };

export type LossSpec =
  | { kind: 'none' }
  | { kind: 'iid'; p: number }
  /** Two-state burst loss; the state steps once per departing packet, then the packet is lost with its state's probability. */
  | { kind: 'gilbertElliott'; pGoodToBad: number; pBadToGood: number; lossGood: number; lossBad: number };

/** A stretch of time with its own connectivity and, optionally, its own parameters. */
export interface ScheduleSegment {
  durationMs: number;
  connected: boolean;
  rate?: RateSpec;
  delayMs?: number;
  jitter?: JitterSpec;
  loss?: LossSpec;
}

export interface ScheduleSpec {
  /** Repeat the segments; otherwise the last segment lasts forever. */
  loop: boolean;
  segments: ScheduleSegment[];
}

export interface DirectionSpec {
  rate: RateSpec;
  /** Base one-way delay. */
  delayMs: number;
  jitter?: JitterSpec;
  /** rho in [0, 1): sample = rho * previous + (1 - rho) * fresh. */
  jitterCorrelation?: number;
  loss?: LossSpec;
  /** Drop-tail queue in IP-packet bytes; default DEFAULT_QUEUE_BYTES. */
  queueBytes?: number;
  schedule?: ScheduleSpec | null;
}

/** `down`: towards the client (server -> client); `up`: from the client. */
export interface LinkSpec {
  down: DirectionSpec;
  up: DirectionSpec;
}

export const DEFAULT_QUEUE_BYTES = 256 * 1024;
/** Bytes one mahimahi delivery opportunity carries. */
export const TRACE_OPPORTUNITY_BYTES = 1504;

/**
 * The link as it stands `offsetMs` after it started: a looping schedule or trace rotated so that
 * time 0 is that moment, a non-looping schedule without its past segments. The simulator starts
 * every link at time 0, so this is how it predicts a download the testbed ran later in a run.
 */
export function linkAt(spec: LinkSpec, offsetMs: number): LinkSpec {
  return { down: directionAt(spec.down, offsetMs), up: directionAt(spec.up, offsetMs) };
}

function directionAt(d: DirectionSpec, offsetMs: number): DirectionSpec {
  if (!(offsetMs > 0)) return d;
  return { ...d, rate: rateAt(d.rate, offsetMs), schedule: d.schedule ? scheduleAt(d.schedule, offsetMs) : d.schedule };
}

function rateAt(rate: RateSpec, offsetMs: number): RateSpec {
  if (rate.kind !== 'trace' || !rate.opportunitiesMs?.length) return rate;
  const times = rate.opportunitiesMs;
  const period = times[times.length - 1];
  const shift = offsetMs % period;
  // Opportunities after the shift come first; the earlier ones follow, one period later. (When no
  // opportunity falls exactly on the shift, the rotated trace's period ends at its last one: a
  // gap of under one line's spacing.)
  const later = times.filter((t) => t > shift).map((t) => t - shift);
  const wrapped = times.filter((t) => t <= shift).map((t) => t - shift + period);
  return { ...rate, opportunitiesMs: [...later, ...wrapped] };
}

function scheduleAt(schedule: ScheduleSpec, offsetMs: number): ScheduleSpec {
  const segments = schedule.segments;
  const period = segments.reduce((a, s) => a + s.durationMs, 0);
  if (segments.length === 0 || period <= 0) return schedule;
  let t = schedule.loop ? offsetMs % period : offsetMs;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (t < s.durationMs || (last && !schedule.loop)) {
      const current = { ...s, durationMs: last && !schedule.loop ? s.durationMs : s.durationMs - t };
      const rest = segments.slice(i + 1);
      const before = schedule.loop
        ? [...segments.slice(0, i), { ...s, durationMs: t }].filter((x) => x.durationMs > 0)
        : [];
      return { loop: schedule.loop, segments: [current, ...rest, ...before] };
    }
    t -= s.durationMs;
  }
  return schedule;
}

/**
 * Ms from `offsetMs` (since the link started) to the next moment the link comes back after a
 * disconnection (an encounter begins, on a vehicular schedule); 0 when one begins right then,
 * undefined when none lies ahead (no disconnection in the schedule, or a non-looping one past its
 * last). Benchmarks start each run there, so every way meets the same schedule.
 */
export function nextReconnectionMs(schedule: ScheduleSpec, offsetMs: number): number | undefined {
  const segments = schedule.segments;
  const period = segments.reduce((a, s) => a + s.durationMs, 0);
  if (segments.length < 2 || period <= 0) return undefined;
  const starts: number[] = [];
  let at = 0;
  for (const [i, s] of segments.entries()) {
    const before = i > 0 ? segments[i - 1] : schedule.loop ? segments[segments.length - 1] : undefined;
    if (s.connected && before !== undefined && !before.connected) starts.push(at);
    at += s.durationMs;
  }
  if (starts.length === 0) return undefined;
  if (!schedule.loop) {
    const next = starts.find((t) => t >= offsetMs);
    return next === undefined ? undefined : next - offsetMs;
  }
  const t = offsetMs % period;
  const next = starts.find((x) => x >= t) ?? starts[0] + period;
  return next - t;
}

/**
 * Gilbert-Elliott loss in whole bursts: every packet in the bad state is lost, none in the good
 * one, so the mean loss is `meanLoss` and a burst lasts `meanBurstPackets` packets on average
 * (geometric). The simulator's sweeps and linkem read the same spec.
 */
export function burstLoss(meanLoss: number, meanBurstPackets: number): LossSpec {
  if (!(meanLoss > 0 && meanLoss < 1)) throw new RangeError(`mean loss must be in (0, 1), got ${meanLoss}`);
  if (!(meanBurstPackets >= 1)) throw new RangeError(`mean burst must be at least 1 packet, got ${meanBurstPackets}`);
  const pBadToGood = 1 / meanBurstPackets;
  // Stationary share of the bad state, pGB / (pGB + pBG), set to meanLoss.
  const pGoodToBad = (meanLoss * pBadToGood) / (1 - meanLoss);
  return { kind: 'gilbertElliott', pGoodToBad, pBadToGood, lossGood: 0, lossBad: 1 };
}
