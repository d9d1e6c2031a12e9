/**
 * Client peer connections of this proxy: one answerer RTCPeerConnection per connectionId that
 * origo relays an offer for, each with a TransferHost serving its channels. Bounded in total, per
 * client id and per client network (client ids are free: one network holds at most 1/minNetworks
 * of the slots); peers that never connect, or stay disconnected, are closed after a while.
 */
import {
  CHANNEL_LABELS,
  DatagramChannel,
  networkShare,
  shareKey,
  type IceCandidate,
  RtcFactory,
  RtcPeer,
  type SenderConfig,
  type SessionDescription,
} from '@mutp/shared';
import type { Logger } from 'pino';
import { TransferHost, TransferHostStats, TransferServices } from './transfer-host';

/**
 * A session's (QUIC) senders size their in-flight target by the smoothed RTT: the transport's
 * controller (MutpRate) keeps the queue shallow, and beside a TCP flow it runs with that flow's
 * standing queue, which a min-RTT target would cut to a fraction of the rate.
 */
const SESSION_SENDER_CONFIG: Partial<SenderConfig> = { inFlightRtt: 'smoothed' };

/**
 * A peer that never connects holds its slot this long: ICE over a real path takes a few seconds
 * at most, and offers that never connect are the cheapest way to hold slots (issue 31).
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Where the proxy's half of the signalling goes (origo). */
export interface SignalSink {
  signal(message: { connectionId: string; description?: SessionDescription; candidate?: IceCandidate }): void;
  connectionClosed(connectionId: string, reason: string): void;
}

export interface PeerManagerOptions {
  rtc: RtcFactory;
  services: TransferServices;
  logger: Logger;
  maxPeers: number;
  maxPeersPerClient: number;
  /** The fewest client networks that can hold every peer slot (each at most 1/n); default 1. */
  minNetworks?: number;
  /** A peer not connected this long after its offer is closed (it holds a slot meanwhile). */
  connectTimeoutMs?: number;
  /** A disconnected peer that does not come back within this is closed. */
  disconnectGraceMs?: number;
}

interface Entry {
  connectionId: string;
  clientId: string;
  network: string;
  /** Closes what carries the peer's datagrams (its RTCPeerConnection, its QUIC session). */
  closeTransport: () => void;
  host: TransferHost;
  timer?: NodeJS.Timeout;
  /** A WebRTC peer's connection (a QUIC session has none: no signalling goes through origo). */
  peer?: RtcPeer;
}

/** What carries one QUIC peer's datagrams: its session, as a channel the TransferHost serves. */
export interface SessionTransport {
  channel: DatagramChannel;
  close(reason: string): void;
}

export class PeerManager {
  sink?: SignalSink;
  /** Set when the proxy drains (goAway()): new offers are refused with this reason; existing peers stay. */
  private refusingNew?: string;
  private readonly peers = new Map<string, Entry>();
  private readonly perClient = new Map<string, number>();
  private readonly perNetwork = new Map<string, number>();
  private readonly networkPeers: number;
  private readonly log: Logger;
  private ignoredSignals = 0;
  private refusedPeers = 0;

  constructor(private readonly options: PeerManagerOptions) {
    this.log = options.logger.child({ component: 'peers' });
    this.networkPeers = networkShare(options.maxPeers, options.minNetworks ?? 1);
  }

  get size(): number {
    return this.peers.size;
  }

  /** A `signal` from origo: an offer for a new connection, or a candidate for a known one. */
  handleSignal(message: {
    connectionId: string;
    clientId: string;
    clientNetwork?: string;
    description?: SessionDescription;
    candidate?: IceCandidate;
  }): void {
    const entry = this.peers.get(message.connectionId);
    if (message.description) {
      if (message.description.type !== 'offer' || entry) {
        // Only fresh offers: renegotiation is not part of MUTP.
        this.ignoredSignals++;
        this.log.debug({ connectionId: message.connectionId }, 'ignored a description');
        return;
      }
      this.accept(
        message.connectionId,
        message.clientId,
        shareKey(message.clientId, message.clientNetwork),
        message.description,
      );
      return;
    }
    if (!entry?.peer || entry.clientId !== message.clientId || !message.candidate) {
      this.ignoredSignals++;
      return;
    }
    try {
      entry.peer.addRemoteCandidate(message.candidate);
    } catch (e) {
      this.log.debug({ connectionId: entry.connectionId, err: e }, 'bad remote candidate');
    }
  }

  /** Origo says the client closed (or lost) the connection. */
  handleClosed(connectionId: string, reason: string): void {
    this.remove(connectionId, `client: ${reason}`, false);
  }

  /**
   * The proxy drains: every connected client is told (ERROR GoingAway, so it moves its next
   * segments elsewhere between two of them) and new peers are refused with `reason`.
   */
  goAway(reason: string): void {
    this.refusingNew = reason;
    for (const entry of this.peers.values()) entry.host.goAway(reason);
  }

  closeAll(reason = 'proxy shutting down'): void {
    for (const id of [...this.peers.keys()]) this.remove(id, reason, true);
  }

  stats(): { peers: number; ignoredSignals: number; refusedPeers: number; hosts: TransferHostStats[] } {
    return {
      peers: this.peers.size,
      ignoredSignals: this.ignoredSignals,
      refusedPeers: this.refusedPeers,
      hosts: [...this.peers.values()].map((e) => e.host.stats()),
    };
  }

  /**
   * Why a new peer of `clientId` is refused now (draining, the peer limits), undefined when it may
   * come in. WebRTC offers and QUIC sessions count against the same limits.
   */
  private refusal(connectionId: string, clientId: string, network: string): string | undefined {
    const o = this.options;
    let reason = this.refusingNew;
    if (reason === undefined && this.peers.size >= o.maxPeers) reason = 'overloaded: peer limit';
    if (reason === undefined && (this.perClient.get(clientId) ?? 0) >= o.maxPeersPerClient)
      reason = 'overloaded: client peer limit';
    if (reason === undefined && (this.perNetwork.get(network) ?? 0) >= this.networkPeers)
      reason = 'overloaded: client network peer limit';
    if (reason === undefined) return undefined;
    this.refusedPeers++;
    this.log.info({ connectionId, clientId, reason }, 'refused a peer');
    return reason;
  }

  private add(entry: Entry): void {
    this.peers.set(entry.connectionId, entry);
    this.perClient.set(entry.clientId, (this.perClient.get(entry.clientId) ?? 0) + 1);
    this.perNetwork.set(entry.network, (this.perNetwork.get(entry.network) ?? 0) + 1);
    this.options.services.metrics.peers.set(this.peers.size);
    entry.host.onClosed = (reason) => this.remove(entry.connectionId, reason, true);
  }

  /**
   * A QUIC session whose client origo's token vouched for: served like a WebRTC peer, within the
   * same limits. Returns why it is refused (the caller refuses the session), or undefined.
   */
  acceptSession(
    connectionId: string,
    client: { clientId: string; network?: string },
    open: () => SessionTransport,
  ): string | undefined {
    if (this.peers.has(connectionId)) return 'duplicate session';
    const { clientId } = client;
    const network = shareKey(clientId, client.network);
    const refused = this.refusal(connectionId, clientId, network);
    if (refused !== undefined) return refused;
    const transport = open();
    const services = this.options.services;
    const host = new TransferHost(
      clientId,
      { ...services, senderConfig: { ...services.senderConfig, ...SESSION_SENDER_CONFIG } },
      network,
    );
    this.add({
      connectionId,
      clientId,
      network,
      host,
      closeTransport: () => transport.close('closed by the proxy'),
    });
    host.attach(transport.channel);
    this.log.info({ connectionId, clientId }, 'QUIC peer accepted');
    return undefined;
  }

  /** A QUIC session ended from the client's side or the network's. */
  sessionClosed(connectionId: string, reason: string): void {
    this.remove(connectionId, reason, false);
  }

  private accept(connectionId: string, clientId: string, network: string, offer: SessionDescription): void {
    const o = this.options;
    const refused = this.refusal(connectionId, clientId, network);
    if (refused !== undefined) {
      this.sink?.connectionClosed(connectionId, refused);
      return;
    }
    let peer: RtcPeer;
    try {
      peer = o.rtc.createPeer('answerer');
    } catch (e) {
      this.log.error({ err: e, connectionId }, 'cannot create a peer connection');
      this.sink?.connectionClosed(connectionId, 'internal error');
      return;
    }
    const host = new TransferHost(clientId, o.services, network);
    const entry: Entry = { connectionId, clientId, network, peer, host, closeTransport: () => peer.close() };
    this.add(entry);

    peer.onLocalDescription = (description) => this.sink?.signal({ connectionId, description });
    peer.onLocalCandidate = (candidate) => this.sink?.signal({ connectionId, candidate });
    peer.onChannel = (channel: DatagramChannel) => {
      if ((CHANNEL_LABELS as readonly string[]).includes(channel.label)) host.attach(channel);
      else channel.close();
    };
    peer.onStateChange = (state) => {
      if (state === 'connected') this.setTimer(entry, undefined);
      else if (state === 'disconnected') this.setTimer(entry, o.disconnectGraceMs ?? 10_000, 'disconnected too long');
      else if (state === 'failed' || state === 'closed') this.remove(connectionId, `peer ${state}`, true);
    };
    this.setTimer(entry, o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, 'not connected in time');
    this.log.info({ connectionId, clientId }, 'peer accepted');
    try {
      peer.setRemoteDescription(offer);
    } catch (e) {
      this.log.warn({ err: e, connectionId }, 'bad offer');
      this.remove(connectionId, 'bad offer', true);
    }
  }

  private setTimer(entry: Entry, ms: number | undefined, reason = ''): void {
    clearTimeout(entry.timer);
    entry.timer = ms === undefined ? undefined : setTimeout(() => this.remove(entry.connectionId, reason, true), ms);
  }

  private remove(connectionId: string, reason: string, notify: boolean): void {
    const entry = this.peers.get(connectionId);
    if (!entry) return;
    this.peers.delete(connectionId);
    clearTimeout(entry.timer);
    const left = (this.perClient.get(entry.clientId) ?? 1) - 1;
    if (left > 0) this.perClient.set(entry.clientId, left);
    else this.perClient.delete(entry.clientId);
    const inNetwork = (this.perNetwork.get(entry.network) ?? 1) - 1;
    if (inNetwork > 0) this.perNetwork.set(entry.network, inNetwork);
    else this.perNetwork.delete(entry.network);
    this.options.services.metrics.peers.set(this.peers.size);
    entry.host.onClosed = undefined;
    entry.host.close(reason);
    if (entry.peer) entry.peer.onStateChange = undefined;
    entry.closeTransport();
    this.log.info({ connectionId, clientId: entry.clientId, reason }, 'peer closed');
    // Origo relayed a WebRTC peer's signalling and is told; a QUIC session's client sees it close.
    if (notify && entry.peer) this.sink?.connectionClosed(connectionId, reason.slice(0, 256));
  }
}
