/**
 * Named protocol configurations the simulator runs. `paper` is the MUTP paper's as published
 * (w = 240, g = 24, sources that know nothing of their path at the start, the client's weights in
 * 32 levels), so the grid still reproduces the paper; `default` is what the client and proxies run
 * today: a window of five bandwidth-delay products of the path (as the client sizes it once a
 * transfer has measured the proxies; window-size.ts), weights in 255 levels taken from the
 * proxies' known capacities from the REQUEST on, and each source starts sending at its known
 * upload capacity instead of growing from a small initial window (SourceEndpoint `uploadCapBps`;
 * a proxy knows it from --upload-limit).
 */
import {
  DEFAULT_RECEIVER_CONFIG,
  DEFAULT_SENDER_CONFIG,
  ReceiverConfig,
  SenderConfig,
  windowForPath,
} from '@mutp/shared';
import { KB, PAPER_DEFAULTS } from './scenario';

export interface SimConfig {
  /** The window in packets, or 'path': sized as the client sizes it from a measured path (window-size.ts). */
  window: number | 'path';
  generationSize: number;
  /** Each source starts at its upload cap (SourceEndpoint uploadCapBps). */
  startAtCap: boolean;
  /** Levels of the client's quantised source weights (ReceiverConfig weightLevels). */
  weightLevels: number;
  /** The client weights sources by their known upload caps from the REQUEST on (Scenario capacityHints). */
  capacityHints: boolean;
  /** Sender and receiver settings that differ from the core's defaults. */
  senderConfig: Partial<SenderConfig>;
  receiverConfig: Partial<ReceiverConfig>;
}

export const SIM_CONFIGS = {
  paper: {
    window: PAPER_DEFAULTS.window,
    generationSize: PAPER_DEFAULTS.generationSize,
    startAtCap: false,
    weightLevels: 32,
    capacityHints: false,
    // Redundant packets in every generation, as before the tail rule, and the fixed REQUEST backoff.
    senderConfig: { repairWindowBdps: Infinity, tailRedundancyFactor: DEFAULT_SENDER_CONFIG.redundancyFactor },
    receiverConfig: { minRequestRetryMs: Infinity },
  },
  default: {
    window: 'path',
    generationSize: PAPER_DEFAULTS.generationSize,
    startAtCap: true,
    weightLevels: DEFAULT_RECEIVER_CONFIG.weightLevels,
    capacityHints: true,
    senderConfig: {},
    receiverConfig: {},
  },
} as const satisfies Record<string, SimConfig>;

export type SimConfigName = keyof typeof SIM_CONFIGS;
export const SIM_CONFIG_NAMES = Object.keys(SIM_CONFIGS) as SimConfigName[];

/**
 * The window a configuration asks for in a scenario. 'path' sizes it as the client does once a
 * transfer has measured the path: the sources' caps and the round trip (the longest path's).
 */
export function configWindow(
  window: number | 'path',
  capsKBps: readonly number[],
  rttMs: number,
  symbolSize: number,
): number {
  if (window !== 'path') return window;
  const capacityBps = capsKBps.reduce((sum, cap) => sum + cap * KB, 0);
  return windowForPath({ capacityBps, rttMs }, symbolSize);
}
