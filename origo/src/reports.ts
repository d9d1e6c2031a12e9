/**
 * Pollution reports: a client that excluded a proxy as a polluter (its Receiver proved the proxy
 * sent a wrong META, wrong DIGESTS or corrupt data) reports it; origo stops offering the proxy
 * once `threshold` distinct reporters did so within `windowMs`, for `banMs`.
 *
 * A reporter is the client's network (IPv4 /24, IPv6 /48: addressPrefix), not its id or address,
 * which are free inside a block: one network, however many sockets, ids and addresses it uses,
 * counts once per proxy and window, so no single network can get an honest proxy banned alone.
 * This still counts; it does not check (issue 31: bans should need a proof origo can verify). A client may only report a proxy origo offered to it, so nobody can report
 * proxies it never used. Memory: at most `threshold` reporters per proxy and
 * `maxOfferedPerClient` offered ids per client.
 */

export interface ReportPolicy {
  /** Distinct reporters needed to stop offering a proxy. */
  threshold: number;
  /** Reports older than this no longer count. */
  windowMs: number;
  /** How long a reported proxy is not offered. */
  banMs: number;
  /** Offered proxy ids remembered per client (the oldest are forgotten first). */
  maxOfferedPerClient: number;
}

export const DEFAULT_REPORT_POLICY: ReportPolicy = {
  threshold: 3,
  windowMs: 10 * 60_000,
  banMs: 60 * 60_000,
  maxOfferedPerClient: 256,
};

export type ReportOutcome = 'counted' | 'banned' | 'duplicate' | 'not-offered';

export class ProxyReports {
  /** proxyId -> reporter -> when it reported. */
  private readonly reports = new Map<string, Map<string, number>>();
  /** proxyId -> banned until. */
  private readonly bannedUntil = new Map<string, number>();
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

  forgetClient(clientId: string): void {
    this.offered.delete(clientId);
  }

  /** A report from `clientId`, whose address is `reporter`. */
  report(clientId: string, reporter: string, proxyId: string, now: number): ReportOutcome {
    if (!this.offered.get(clientId)?.has(proxyId)) return 'not-offered';
    if (this.isBanned(proxyId, now)) return 'duplicate';
    let byReporter = this.reports.get(proxyId);
    if (!byReporter) {
      byReporter = new Map();
      this.reports.set(proxyId, byReporter);
    }
    for (const [who, at] of byReporter) if (now - at > this.policy.windowMs) byReporter.delete(who);
    if (byReporter.has(reporter)) return 'duplicate';
    byReporter.set(reporter, now);
    if (byReporter.size < this.policy.threshold) return 'counted';
    this.reports.delete(proxyId);
    this.bannedUntil.set(proxyId, now + this.policy.banMs);
    return 'banned';
  }

  isBanned(proxyId: string, now: number): boolean {
    const until = this.bannedUntil.get(proxyId);
    if (until === undefined) return false;
    if (now < until) return true;
    this.bannedUntil.delete(proxyId);
    return false;
  }
}
