/**
 * Transfer limits of one proxy: at most `maxTransfers` at once in total (MUTP and HTTP) and at
 * most `maxPerClient` per client. A granted slot is a release function; calling it twice is
 * harmless.
 */
export interface AdmissionLimits {
  maxTransfers: number;
  maxPerClient: number;
}

export class Admission {
  private active = 0;
  private readonly perClient = new Map<string, number>();

  constructor(private readonly limits: AdmissionLimits) {}

  /** A release function, or a reason when the proxy or this client is at its limit. */
  tryAcquire(clientKey: string): { ok: true; release: () => void } | { ok: false; reason: string } {
    if (this.active >= this.limits.maxTransfers)
      return { ok: false, reason: `proxy at its limit of ${this.limits.maxTransfers} transfers` };
    const mine = this.perClient.get(clientKey) ?? 0;
    if (mine >= this.limits.maxPerClient)
      return { ok: false, reason: `client at its limit of ${this.limits.maxPerClient} transfers` };
    this.active++;
    this.perClient.set(clientKey, mine + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        const left = (this.perClient.get(clientKey) ?? 1) - 1;
        if (left > 0) this.perClient.set(clientKey, left);
        else this.perClient.delete(clientKey);
      },
    };
  }

  get activeTransfers(): number {
    return this.active;
  }

  get maxTransfers(): number {
    return this.limits.maxTransfers;
  }
}
