/** The server side of one WebSocket: the per-socket state the session layer keeps. */
import { OrigoToClient, OrigoToProxy } from '@mutp/shared';
import { WebSocket } from 'ws';
import { OrigoConfig } from '../config';
import { TokenBucket } from '../limits';

/** Which path the socket came in on. */
export type Kind = 'proxy' | 'client';
type Outgoing = OrigoToProxy | OrigoToClient;

export class Session {
  /** proxyId or clientId once the greeting (register / hello) succeeded. */
  id?: string;
  invalid = 0;
  /** The greeting is being checked (async: token verification); frames meanwhile are refused. */
  greeting = false;
  /** Answered the last ping. */
  alive = true;
  /** origo has closed (or is closing) this socket: later frames are ignored. */
  closed = false;
  greetingTimer?: NodeJS.Timeout;
  readonly bucket: TokenBucket;

  constructor(
    readonly kind: Kind,
    readonly socket: WebSocket,
    readonly address: string,
    readonly remote: string,
    private readonly config: OrigoConfig,
    private readonly onTooSlow: (session: Session) => void,
  ) {
    this.bucket = new TokenBucket(config.messageRatePerSecond, config.messageBurst);
  }

  get label(): string {
    return this.id !== undefined ? `${this.kind}:${this.id}` : `${this.kind}@${this.remote}`;
  }

  send(message: Outgoing): void {
    if (this.socket.readyState !== WebSocket.OPEN) return;
    if (this.socket.bufferedAmount > this.config.maxSocketBufferBytes) {
      // The peer does not read: drop it rather than buffer without bound.
      this.onTooSlow(this);
      return;
    }
    this.socket.send(JSON.stringify(message));
  }

  close(code: number, reason: string): void {
    this.closed = true;
    clearTimeout(this.greetingTimer);
    if (this.socket.readyState === WebSocket.OPEN || this.socket.readyState === WebSocket.CONNECTING) {
      this.socket.close(code, reason);
    }
  }
}
