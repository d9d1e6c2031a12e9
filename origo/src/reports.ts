/**
 * Pollution reports: a client that excluded a proxy as a polluter (its Receiver proved the proxy
 * sent a wrong META, wrong DIGESTS or corrupt data) reports it. The client's proof is its own:
 * packets are not signed, so nothing in a report can be checked by origo, and a count of reports
 * is as cheap as the networks an attacker holds (issue 31, attack 3: 16 reports from 3 addresses
 * banned every honest proxy for an hour). So reports never ban, withdraw or lower a proxy's
 * selection: the reporting client avoids the proxy itself (for an hour, `POLLUTER_EXCLUSION_MS`
 * in the client), and origo tells its operator (`flagged`, a warning) once clients of
 * `threshold` distinct networks reported a proxy within `windowMs`. The operator, who can look at
 * the proxy, decides (revoking its key withdraws it everywhere).
 *
 * A reporter is the client's network (IPv4 /24, IPv6 /48: addressPrefix), not its id or address,
 * which are free inside a block. A client may only report a proxy origo offered to it. Memory: at
 * most `threshold` reporters per proxy and `maxOfferedPerClient` offered ids per client.
 */

export interface ReportPolicy {
  /** Distinct reporting networks within `windowMs` that flag a proxy to its operator. */
  threshold: number;
  /** Reports older than this no longer count. */
  windowMs: number;
  /** Offered proxy ids remembered per client (the oldest are forgotten first). */
  maxOfferedPerClient: number;
}

export const DEFAULT_REPORT_POLICY: ReportPolicy = {
  threshold: 3,
  windowMs: 10 * 60_000,
  maxOfferedPerClient: 256,
};

export type ReportOutcome = 'counted' | 'flagged' | 'duplicate' | 'not-offered';

export class ProxyReports {
  /** proxyId -> reporter -> when it reported. */
  private readonly reports = new Map<string, Map<string, number>>();
  /** clientId -> proxy ids origo offered it (insertion order = age). */
  private readonly offered = new Map<string, Set<string>>();

  constructor(readonly policy: ReportPolicy = DEFAULT_REPORT_POLICY) {}

  /** Remembers what a client was offered: only those proxies can it report. */
  noteOffered(clientId: string, proxyIds: readonly string[]): void {
    let set = this.offered.get(clientId);
    if (!set) {
      set = new Set();
      this.offered.set(clientId, set);
    }
    for (const id of proxyIds) {
      set.delete(id);
      set.add(id);
    }
    for (const id of set) {
      if (set.size <= this.policy.maxOfferedPerClient) break;
      set.delete(id);
    }
  }

  /** Whether origo offered `proxyId` to this client (among the last maxOfferedPerClient). */
  wasOffered(clientId: string, proxyId: string): boolean {
    return this.offered.get(clientId)?.has(proxyId) === true;
  }

  forgetClient(clientId: string): void {
    this.offered.delete(clientId);
  }

  /** A report from `clientId`, whose address is `reporter`. */
  report(clientId: string, reporter: string, proxyId: string, now: number): ReportOutcome {
    if (!this.wasOffered(clientId, proxyId)) return 'not-offered';
    let byReporter = this.reports.get(proxyId);
    if (!byReporter) {
      byReporter = new Map();
      this.reports.set(proxyId, byReporter);
    }
    for (const [who, at] of byReporter) if (now - at > this.policy.windowMs) byReporter.delete(who);
    if (byReporter.has(reporter)) return 'duplicate';
    byReporter.set(reporter, now);
    if (byReporter.size < this.policy.threshold) return 'counted';
    // Flagged once per `threshold` networks: the next flag needs as many new reports.
    this.reports.delete(proxyId);
    return 'flagged';
  }
}
