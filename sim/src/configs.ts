/**
 * Named protocol configurations the simulator runs. `paper` is the MUTP paper's as published
 * (w = 240, g = 24, sources that know nothing of their path at the start, the client's weights in
 * 32 levels), so the grid still reproduces the paper; `default` is what the client and proxies run
 * today: w = 480 (DEFAULT_WINDOW), weights in 255 levels, and each source starts sending at its
 * known upload capacity instead of growing from a small initial window (SourceEndpoint
 * `uploadCapBps`; a proxy knows it from --upload-limit).
 */
import { DEFAULT_RECEIVER_CONFIG, DEFAULT_WINDOW } from '@mutp/shared';
import { PAPER_DEFAULTS } from './scenario';

export interface SimConfig {
  window: number;
  generationSize: number;
  /** Each source starts at its upload cap (SourceEndpoint uploadCapBps). */
  startAtCap: boolean;
  /** Levels of the client's quantised source weights (ReceiverConfig weightLevels). */
  weightLevels: number;
}

export const SIM_CONFIGS = {
  paper: {
    window: PAPER_DEFAULTS.window,
    generationSize: PAPER_DEFAULTS.generationSize,
    startAtCap: false,
    weightLevels: 32,
  },
  default: {
    window: DEFAULT_WINDOW,
    generationSize: PAPER_DEFAULTS.generationSize,
    startAtCap: true,
    weightLevels: DEFAULT_RECEIVER_CONFIG.weightLevels,
  },
} as const satisfies Record<string, SimConfig>;

export type SimConfigName = keyof typeof SIM_CONFIGS;
export const SIM_CONFIG_NAMES = Object.keys(SIM_CONFIGS) as SimConfigName[];
