/**
 * Withdrawal notices: origo no longer offers a proxy (draining, revoked, proven false), so the
 * clients it was offered to are told (`withdrawn`) and move their next downloads elsewhere.
 */
import type { WithdrawReason } from '@mutp/shared';
import type { BrokerState } from './state';

/**
 * A proxy's withdrawal is told to clients at most this often (a proxy flipping `draining` in its
 * heartbeats cannot make origo message every client it was offered to at heartbeat rate).
 */
const WITHDRAW_NOTICE_INTERVAL_MS = 60_000;
/** Withdrawals remembered for that interval; past this many, older ones are forgotten first. */
const MAX_WITHDRAW_NOTICES = 10_000;

export class Withdrawals {
  /** When each proxy's withdrawal was last told to this instance's clients (withdraw()). */
  private readonly notices = new Map<string, number>();

  constructor(private readonly state: BrokerState) {}

  /**
   * Origo no longer offers `proxyId`: tells this instance's clients it was offered to
   * (`withdrawn`), so they move their next downloads elsewhere between two segments, and with
   * `broadcast` the other instances, which tell theirs. At most once a minute per proxy.
   */
  withdraw(proxyId: string, reason: WithdrawReason, broadcast: boolean): void {
    const { deps } = this.state;
    const now = Date.now();
    const last = this.notices.get(proxyId);
    if (last !== undefined && now - last < WITHDRAW_NOTICE_INTERVAL_MS) return;
    this.notices.delete(proxyId);
    this.notices.set(proxyId, now);
    if (this.notices.size > MAX_WITHDRAW_NOTICES) {
      this.notices.delete(this.notices.keys().next().value!);
    }
    if (broadcast) deps.cluster.broadcast({ kind: 'proxy-withdrawn', from: this.state.instanceId, proxyId, reason });
    let told = 0;
    for (const client of this.state.clients.values()) {
      if (!client.offered.has(proxyId)) continue;
      client.peer.send({ type: 'withdrawn', proxyId, reason });
      told++;
    }
    if (told > 0) deps.log.info({ proxyId, reason, clients: told }, 'proxy withdrawn: its clients told');
  }
}
