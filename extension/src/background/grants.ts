/**
 * One-time tokens that authorise a downloader frame to take a port (content/main.ts makes the
 * token, registers it here, and posts it with the port to its frame; the frame redeems it here
 * before it accepts the port). A page cannot learn a token (it never enters the page's world), so
 * a downloader.html the page loads itself never gets a port it accepts.
 */
export const GRANT_TTL_MS = 30_000;
export const MAX_GRANTS = 1024;

export class DownloaderGrants {
  private readonly grants = new Map<string, { tabId: number; at: number }>();

  constructor(private readonly now: () => number) {}

  /** A content script of tab `tabId` is about to hand `token` to its frame. */
  grant(token: string, tabId: number): void {
    this.expire();
    while (this.grants.size >= MAX_GRANTS) this.grants.delete(this.grants.keys().next().value as string);
    this.grants.set(token, { tabId, at: this.now() });
  }

  /** True (once) when `token` was granted in the same tab as the frame asking, and recently. */
  redeem(token: string, tabId: number): boolean {
    this.expire();
    const grant = this.grants.get(token);
    if (!grant) return false;
    this.grants.delete(token);
    return grant.tabId === tabId;
  }

  private expire(): void {
    const since = this.now() - GRANT_TTL_MS;
    for (const [token, g] of this.grants) {
      if (g.at >= since) break; // insertion order is time order
      this.grants.delete(token);
    }
  }
}
