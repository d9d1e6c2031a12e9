/**
 * The sockets as the broker sees them: one end of a WebSocket (sessions/session.ts implements it)
 * and the close codes origo ends them with.
 */
import type { OrigoToClient, OrigoToProxy } from '@mutp/shared';

/** WebSocket close codes origo uses (docs/signalling.md, "Limits and errors"). */
export const CLOSE = {
  goingAway: 1001,
  policy: 1008,
  tryAgainLater: 1013,
  protocol: 4000,
  unauthorized: 4001,
  replaced: 4002,
  heartbeatTimeout: 4003,
} as const;

/** One end of a socket, as the broker sees it. */
export interface Peer<Out> {
  /** For logs: the peer's kind and id (or address before its greeting). */
  readonly label: string;
  /** The remote IP address (per-address budgets). */
  readonly address: string;
  send(message: Out): void;
  close(code: number, reason: string): void;
}
export type ProxyPeer = Peer<OrigoToProxy>;
export type ClientPeer = Peer<OrigoToClient>;
