/**
 * Named protocol configurations the simulator runs. `paper` is the MUTP paper's as published
 * (w = 240, g = 24, sources that know nothing of their path at the start), so the grid still
 * reproduces the paper; `default` is what the proxies run today: the same window and generation
 * size, but each source starts sending at its known upload capacity instead of growing from a
 * small initial window (SourceEndpoint `uploadCapBps`; a proxy knows it from --upload-limit).
 */
import { PAPER_DEFAULTS } from './scenario';

export interface SimConfig {
  window: number;
  generationSize: number;
  /** Each source starts at its upload cap (SourceEndpoint uploadCapBps). */
  startAtCap: boolean;
}

export const SIM_CONFIGS = {
  paper: { window: PAPER_DEFAULTS.window, generationSize: PAPER_DEFAULTS.generationSize, startAtCap: false },
  default: { window: PAPER_DEFAULTS.window, generationSize: PAPER_DEFAULTS.generationSize, startAtCap: true },
} as const satisfies Record<string, SimConfig>;

export type SimConfigName = keyof typeof SIM_CONFIGS;
export const SIM_CONFIG_NAMES = Object.keys(SIM_CONFIGS) as SimConfigName[];
