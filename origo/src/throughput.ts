/**
 * What clients measured of each proxy, from their download records: selection ranks by this,
 * not by the capacity a proxy claims. Each client counts once per proxy (its latest sample), and
 * the estimate is the median over the most recent clients, so one client (or a few forging
 * records about proxies they were offered) cannot move it far. Until MIN_CLIENTS different
 * clients reported, a proxy has no measurement and selection uses its capped claim.
 */
import { DownloadRecord } from '@mutp/shared';

/** Distinct clients whose samples make a measurement. */
export const MIN_CLIENTS = 3;
/** Clients remembered per proxy (the most recent). */
const MAX_CLIENTS = 32;
/** Transfers shorter than this say little about a proxy's rate. */
const MIN_DURATION_MS = 50;

export class ThroughputBook {
  /** proxyId -> clientId -> bytes/s, in insertion order (oldest client first). */
  private readonly samples = new Map<string, Map<string, number>>();

  /** Adds the per-proxy rates of a complete coded download (http records name only the winner). */
  observe(clientId: string, record: DownloadRecord): void {
    if (record.status !== 'complete' || record.mode === 'http' || record.durationMs < MIN_DURATION_MS) return;
    for (const p of record.proxies) {
      const bps = (p.share * record.bytes) / (record.durationMs / 1000);
      if (!Number.isFinite(bps)) continue;
      let perClient = this.samples.get(p.proxyId);
      if (perClient === undefined) {
        perClient = new Map();
        this.samples.set(p.proxyId, perClient);
      }
      perClient.delete(clientId);
      perClient.set(clientId, bps);
      if (perClient.size > MAX_CLIENTS) perClient.delete(perClient.keys().next().value!);
    }
  }

  /** Median measured bytes/s of a proxy, or undefined when too few clients reported. */
  measured(proxyId: string): number | undefined {
    const perClient = this.samples.get(proxyId);
    if (perClient === undefined || perClient.size < MIN_CLIENTS) return undefined;
    const sorted = [...perClient.values()].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
}
