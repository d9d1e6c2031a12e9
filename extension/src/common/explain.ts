/**
 * What the popup says about a tab beyond its counters, worked out from them (pure, so it is tested
 * without a browser): whether media reached the player past the hook through a page worker, and
 * the time saved against the plain network.
 */
import { Counters } from './counters';

const MIB = 1024 * 1024;
/** Media appended beyond what the main thread fetched, before it counts as coming from elsewhere. */
const UNEXPLAINED_MIN_BYTES = 1 * MIB;
/**
 * Appended bytes may exceed fetched ones without a worker fetching anything: a transmuxer (hls.js
 * turns MPEG-TS into fMP4 in its worker) changes sizes by a few percent (fMP4 is usually the
 * smaller), an init segment is appended again after a switch. Only more than this factor counts.
 */
const APPEND_SLACK = 1.25;

export type WorkerNotice =
  { kind: 'worker-mse'; workers: number } | { kind: 'unexplained-media'; workers: number; bytes: number };

/**
 * Whether a page worker fetched media past MUTP, as far as the main thread can tell: a media
 * element runs MSE inside a worker (MediaSourceHandle), or the player got clearly more media
 * through SourceBuffers than every request of the main thread fetched (MUTP-served plus network).
 * A worker that only transmuxes what the main thread fetched (hls.js) is not reported. When the
 * browser hides the size of some main-thread responses (cross-origin without
 * Timing-Allow-Origin), only a page with no media request at all on the main thread is reported.
 */
export function workerNotice(c: Counters): WorkerNotice | undefined {
  if (c.workers === 0) return undefined;
  if (c.workerMediaSources > 0) return { kind: 'worker-mse', workers: c.workers };
  const fetched = c.servedBytes + c.fetchedBytes;
  const unexplained = c.appendedBytes - fetched;
  if (unexplained < UNEXPLAINED_MIN_BYTES) return undefined;
  const sizesKnown = c.fetchedUnsized === 0;
  if ((sizesKnown && c.appendedBytes > APPEND_SLACK * fetched) || c.media === 0) {
    return { kind: 'unexplained-media', workers: c.workers, bytes: unexplained };
  }
  return undefined;
}

export interface Savings {
  /** Requests MUTP answered, their bytes, and the time the player waited for them. */
  served: number;
  servedBytes: number;
  servedMs: number;
  /** The plain network's rate on this tab, B/s, and from how much it was measured (absent: no sample yet). */
  network?: { bps: number; files: number; bytes: number };
  /** The same bytes at the network's rate, and what MUTP saved against that (negative: MUTP was slower). */
  networkMs?: number;
  savedMs?: number;
}

/**
 * Time saved against the plain network: the served bytes at the rate this tab's own network files
 * of 256 KiB or more got (total bytes over their summed times), minus the time the player waited
 * for MUTP. A rough estimate: the network samples are other files at other moments, and neither
 * side's latency is separated out.
 */
export function estimateSavings(c: Counters): Savings {
  const out: Savings = { served: c.served, servedBytes: c.servedBytes, servedMs: c.servedMs };
  if (c.networkFiles === 0 || c.networkMs <= 0 || c.networkBytes <= 0) return out;
  const bps = c.networkBytes / (c.networkMs / 1000);
  out.network = { bps, files: c.networkFiles, bytes: c.networkBytes };
  if (c.served > 0) {
    out.networkMs = (c.servedBytes / bps) * 1000;
    out.savedMs = out.networkMs - c.servedMs;
  }
  return out;
}
