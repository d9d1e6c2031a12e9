/**
 * One client–proxy connection: an RTCPeerConnection with the two MUTP channels, set up through
 * origo's signalling relay, shared by every transfer to that proxy (told apart by transferId).
 */
import {
  DATA_CHANNEL_LABEL,
  DatagramChannel,
  decode,
  ErrorCode,
  FEEDBACK_CHANNEL_LABEL,
  MessageType,
  ProxyInfo,
  RtcFactory,
  RtcPeer,
  SourceStats,
} from '..';
import { ClientError } from './errors';
import { Clock, withTimeout } from './host';
import { OrigoSession } from './origo-session';

export interface TransferHandler {
  onDatagram(bytes: Uint8Array): void;
  onLinkClosed(reason: string): void;
}

const CONNECT_TIMEOUT = 'connect timeout';

export class ProxyLink {
  private peer?: RtcPeer;
  private data?: DatagramChannel;
  private feedback?: DatagramChannel;
  private readonly transfers = new Map<number, TransferHandler>();
  private closedReason?: string;
  private goingAwayReason?: string;
  /** Called once, when the proxy first says it is going away. */
  onGoingAway?: () => void;

  /** Why the link closed, once it has. */
  get closeReason(): string | undefined {
    return this.closedReason;
  }

  /**
   * The proxy said it is going away (ERROR GoingAway: it drains), with its reason: transfers under
   * way go on, new ones belong elsewhere. Undefined while it has not.
   */
  get goingAway(): string | undefined {
    return this.goingAwayReason;
  }

  /** Whether open() gave up for want of an answer within its timeout (not a refusal or a failure). */
  get timedOut(): boolean {
    return this.closedReason === CONNECT_TIMEOUT;
  }
  private signals?: ReturnType<OrigoSession['openConnection']>;
  /**
   * The shortest REQUEST-to-META time a transfer on this link saw, ms: the round trip (an origin
   * fetch only adds to it, and the minimum drops those). Infinity until one answered.
   */
  private shortestAnswerMs = Infinity;
  /** The delivery rate the last transfer on this link measured, bytes/s (0: none yet). */
  private measuredRateBps = 0;

  constructor(
    readonly proxy: ProxyInfo,
    readonly connectionId: string,
  ) {}

  get alive(): boolean {
    return this.closedReason === undefined && this.data?.isOpen === true && this.feedback?.isOpen === true;
  }

  /** Connects through origo; resolves once both channels are open. */
  open(session: OrigoSession, rtc: RtcFactory, clock: Clock, timeoutMs: number): Promise<void> {
    const peer = rtc.createPeer('offerer');
    this.peer = peer;
    const opened = new Promise<void>((resolve, reject) => {
      const fail = (reason: string) => {
        reject(new ClientError('connect-failed', `proxy ${this.proxy.name}: ${reason}`));
        this.close(reason);
      };
      this.signals = session.openConnection(this.proxy.proxyId, this.connectionId, {
        onDescription: (d) => peer.setRemoteDescription(d),
        onCandidate: (c) => peer.addRemoteCandidate(c),
        // Once both channels are open the peer connection no longer needs origo: a signalling
        // blip (origo restart, the proxy reconnecting to origo) must not drop a working link.
        onClosed: (reason) => {
          if (!this.alive) fail(reason);
        },
      });
      peer.onLocalDescription = (d) => this.signals?.sendDescription(d);
      peer.onLocalCandidate = (c) => this.signals?.sendCandidate(c);
      peer.onStateChange = (state) => {
        if (state === 'failed' || state === 'closed') fail(`peer connection ${state}`);
      };
      let open = 0;
      const channel = (label: typeof DATA_CHANNEL_LABEL | typeof FEEDBACK_CHANNEL_LABEL) => {
        const ch = peer.createChannel(label);
        ch.onOpen = () => {
          if (++open === 2) resolve();
        };
        ch.onMessage = (bytes) => this.dispatch(bytes);
        ch.onClose = () => fail(`channel ${label} closed`);
        return ch;
      };
      this.data = channel(DATA_CHANNEL_LABEL);
      this.feedback = channel(FEEDBACK_CHANNEL_LABEL);
      peer.startOffer();
    });
    return withTimeout(clock, opened, timeoutMs, () => {
      this.close(CONNECT_TIMEOUT);
      return new ClientError('connect-failed', `proxy ${this.proxy.name}: no connection within ${timeoutMs} ms`);
    });
  }

  /** Client-to-proxy messages go on the feedback channel, never behind bulk data. */
  send(bytes: Uint8Array): boolean {
    return this.alive && this.feedback!.send(bytes);
  }

  /** Learns the path from a finished transfer's view of this proxy, for the next transfer's window. */
  observe(stats: Pick<SourceStats, 'answerMs' | 'rateBps'>): void {
    if (stats.answerMs !== undefined && stats.answerMs >= 0)
      this.shortestAnswerMs = Math.min(this.shortestAnswerMs, stats.answerMs);
    if (stats.rateBps > 0) this.measuredRateBps = stats.rateBps;
  }

  /**
   * The path as transfers on this link measured it: the round trip (undefined before any), and
   * the larger of the rate last measured and the capacity origo reported for the proxy.
   */
  get path(): { rttMs?: number; capacityBps: number } {
    const reported = Number.isFinite(this.proxy.capacityBps) && this.proxy.capacityBps > 0 ? this.proxy.capacityBps : 0;
    return {
      rttMs: Number.isFinite(this.shortestAnswerMs) ? this.shortestAnswerMs : undefined,
      capacityBps: Math.max(reported, this.measuredRateBps),
    };
  }

  attach(transferId: number, handler: TransferHandler): void {
    this.transfers.set(transferId >>> 0, handler);
  }

  detach(transferId: number): void {
    this.transfers.delete(transferId >>> 0);
  }

  close(reason = 'closed by the client'): void {
    if (this.closedReason !== undefined) return;
    this.closedReason = reason;
    this.signals?.close(reason);
    this.data?.close();
    this.feedback?.close();
    this.peer?.close();
    const handlers = [...this.transfers.values()];
    this.transfers.clear();
    for (const h of handlers) h.onLinkClosed(reason);
  }

  private dispatch(bytes: Uint8Array): void {
    // Every MUTP message carries its type at byte 1 and its transferId at bytes 2..5 (docs/protocol.md §3).
    if (bytes.length < 6) return;
    if (bytes[1] === MessageType.Error) this.noteGoingAway(bytes);
    const transferId = ((bytes[2] << 24) | (bytes[3] << 16) | (bytes[4] << 8) | bytes[5]) >>> 0;
    this.transfers.get(transferId)?.onDatagram(bytes);
  }

  /** An ERROR GoingAway, for the connection or refusing one transfer, marks the whole link as leaving. */
  private noteGoingAway(bytes: Uint8Array): void {
    if (this.goingAwayReason !== undefined) return;
    const m = decode(bytes);
    if (m.ok && m.value.type === MessageType.Error && m.value.code === ErrorCode.GoingAway) {
      this.goingAwayReason = m.value.message || 'the proxy is going away';
      this.onGoingAway?.();
    }
  }
}
