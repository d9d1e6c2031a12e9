import { DEFAULT_SYMBOL_SIZE, Mode, ReceiverConfig, SchedulerName, SenderConfig } from '@mutp/shared';
import { LinkSpec } from './link-spec';

export type SimMode = 'http' | Mode;

/** One simulated download. Times in ms, rates in KB/s with KB = 1024 bytes (896 KB/s = 7 Mibit/s). */
export interface Scenario {
  mode: SimMode;
  /** Scheduler by name; default: the core's default for the mode. Ignored for http. */
  scheduler?: SchedulerName;
  /** Upload cap of each source; one entry per source. */
  capsKBps: number[];
  objectBytes: number;
  /** Round-trip propagation delay between the client and every source. */
  rttMs: number;
  /** Extra one-way delay, uniform in [0, jitterMs), per datagram: reorders packets. */
  jitterMs: number;
  /** Loss probability per datagram, source -> client. */
  loss: number;
  /** Loss probability per datagram, client -> source (feedback, requests); defaults to `loss`. */
  reverseLoss?: number;
  /** Probability that a datagram is delivered twice (both directions). */
  duplicate?: number;
  /** Strict moving window in packets (paper's w). */
  window: number;
  generationSize: number;
  symbolSize: number;
  seed: number;
  /**
   * Each source knows its upload cap and starts sending at it (SourceEndpoint uploadCapBps), as
   * the proxies do; false (the paper's sources) grows from the sender's initial window.
   */
  startAtCap?: boolean;
  /** Levels of the client's quantised source weights (ReceiverConfig weightLevels); default the core's. */
  weightLevels?: number;
  /**
   * The client knows each source's upload cap (origo's capacityBps, from the proxy's
   * --upload-limit) and weights the sources by it from the REQUEST on (ReceiverOptions capacityHints).
   */
  capacityHints?: boolean;
  /** Sender and receiver settings of the configuration (configs.ts); a run's options override them. */
  senderConfig?: Partial<SenderConfig>;
  receiverConfig?: Partial<ReceiverConfig>;
  /** Sources that die (stop sending and receiving) at a given time. */
  failures?: { source: number; atMs: number }[];
  /** Give up after this much simulated time (default 120 s; schedules with disconnections may need more). */
  maxSimMs?: number;
  /**
   * Emulated links, one per source (client <-> source i; `down` = source -> client). When given,
   * they carry delay, jitter and loss: `rttMs`, `jitterMs`, `loss` and `reverseLoss` no longer
   * apply per datagram (idealMs still uses `rttMs`); the source's shaping to its cap stays.
   */
  paths?: LinkSpec[];
  /** The client's access link, shared by every path (`down` = towards the client). Only with `paths`. */
  access?: LinkSpec;
}

export const PAPER_DEFAULTS = {
  window: 240,
  generationSize: 24,
  symbolSize: DEFAULT_SYMBOL_SIZE,
  rttMs: 40,
  jitterMs: 2,
} as const;

export const KB = 1024;

export interface SourceResult {
  capKBps: number;
  /** Data packets (or, for http, MSS segments) the source sent. */
  sent: number;
  /** Data packets the client received from it before completion. */
  received: number;
  /** Of which increased the client's DoF. */
  useful: number;
  /** Share of all useful packets. */
  share: number;
}

export interface SimResult {
  scenario: Scenario;
  status: 'complete' | 'failed';
  error?: string;
  /** Request to verified completion. */
  downloadMs: number;
  goodputBps: number;
  /** (RTT + bytes / sum of caps) / downloadMs. */
  efficiency: number;
  /** DoF-increasing packets / data packets received before completion. */
  normalizedGoodput: number;
  /** Data packets all sources sent per DoF the object needed (1.0 = nothing wasted). */
  sentPerUseful: number;
  /** Packets sent by sources that the client never needed, after it completed or while in flight. */
  wastedAfterCompletion: number;
  byteExact: boolean;
  sources: SourceResult[];
  /** With `paths`: packets the emulated links dropped, both directions, all links. */
  linkDrops?: { disconnected: number; queue: number; loss: number };
}

export function idealMs(s: Scenario): number {
  const capSum = s.capsKBps.reduce((a, b) => a + b, 0) * KB;
  return s.rttMs + (s.objectBytes / capSum) * 1000;
}
