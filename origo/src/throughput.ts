/**
 * What clients measured of each proxy, from their download records: selection ranks by this,
 * not by the capacity a proxy claims. A sample counts per client *network* (IPv4 /24, IPv6 /48:
 * addressPrefix), not per client id or address, because ids, tokens and addresses inside one
 * block are free to whoever holds it: each network counts once per proxy (its latest sample),
 * and the estimate is the median over the most recent networks. Until MIN_NETWORKS different
 * networks reported, a proxy has no measurement and selection uses its capped claim, so one
 * network (or two) cannot make a measurement, and a median of three needs a majority to move.
 */
import { DownloadRecord } from '@mutp/shared';

/** Distinct client networks whose samples make a measurement. */
export const MIN_NETWORKS = 3;
/** Networks remembered per proxy (the most recent). */
const MAX_NETWORKS = 32;
/** Transfers shorter than this say little about a proxy's rate. */
const MIN_DURATION_MS = 50;

export class ThroughputBook {
  /** proxyId -> network -> bytes/s, in insertion order (oldest network first). */
  private readonly samples = new Map<string, Map<string, number>>();

  /** Adds the per-proxy rates of a complete coded download (http records name only the winner). */
  observe(network: string, record: DownloadRecord): void {
    if (record.status !== 'complete' || record.mode === 'http' || record.durationMs < MIN_DURATION_MS) return;
    for (const p of record.proxies) {
      const bps = (p.share * record.bytes) / (record.durationMs / 1000);
      if (!Number.isFinite(bps)) continue;
      let perNetwork = this.samples.get(p.proxyId);
      if (perNetwork === undefined) {
        perNetwork = new Map();
        this.samples.set(p.proxyId, perNetwork);
      }
      perNetwork.delete(network);
      perNetwork.set(network, bps);
      if (perNetwork.size > MAX_NETWORKS) perNetwork.delete(perNetwork.keys().next().value!);
    }
  }

  /** Median measured bytes/s of a proxy, or undefined when too few networks reported. */
  measured(proxyId: string): number | undefined {
    const perNetwork = this.samples.get(proxyId);
    if (perNetwork === undefined || perNetwork.size < MIN_NETWORKS) return undefined;
    const sorted = [...perNetwork.values()].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
}
