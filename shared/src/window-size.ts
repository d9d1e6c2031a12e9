/**
 * The strict moving window a client asks for, sized from the path rather than a constant. A
 * window bounds what the client decodes at once; too small and it, not the proxies, sets the
 * pace: the sources learn that the lowest generation is complete one round trip late, and one
 * lost packet in it holds the window for another (the repair). Five bandwidth-delay products
 * cover both with room to spare, so a repair mid-object costs no time and the sources need
 * no redundancy there (SenderConfig repairWindowBdps, 4, must stay below this).
 */
import { DATA_RLNC_HEADER_BYTES } from './wire';
import { DEFAULT_WINDOW } from './modes';

/** Bandwidth-delay products a path-sized window spans. */
export const WINDOW_BDPS = 5;
/** The largest window sized from a path, in packets: about 4.7 MB of decoder state at the default symbol size. */
export const MAX_PATH_WINDOW = 4096;

export interface WindowPath {
  /** What all the transfer's sources together deliver, bytes/s. */
  capacityBps: number;
  /** The longest round trip among them, ms. */
  rttMs: number;
}

/**
 * WINDOW_BDPS bandwidth-delay products of the path in packets of `symbolSize`, between
 * DEFAULT_WINDOW and MAX_PATH_WINDOW; DEFAULT_WINDOW when the path is not known.
 */
export function windowForPath(path: WindowPath | undefined, symbolSize: number): number {
  if (!path || !(path.capacityBps > 0) || !(path.rttMs > 0)) return DEFAULT_WINDOW;
  const bdpPackets = (path.capacityBps * path.rttMs) / 1000 / (symbolSize + DATA_RLNC_HEADER_BYTES);
  const window = Math.ceil(WINDOW_BDPS * bdpPackets);
  return Math.min(MAX_PATH_WINDOW, Math.max(DEFAULT_WINDOW, window));
}
