/**
 * The Node implementation of the WebRTC surface MUTP uses (`RtcFactory`, shared/src/transport.ts)
 * over node-datachannel's native API (libdatachannel). Used by the proxy (answerer) and by Node
 * clients and tests (offerer). The W3C polyfill of node-datachannel is deliberately not used: it
 * showed a rare "remote candidate without ICE transport" race (shared notes/environment.md).
 *
 * Facts this relies on:
 * - the offerer's channels are unordered with no retransmissions (MUTP repairs loss itself);
 * - remote candidates that arrive before the remote description are queued here and applied
 *   right after it, so signalling order does not matter;
 * - `bufferedAmount` + `setBufferedAmountLowThreshold` / `onBufferedAmountLow` give the late-binding
 *   wake-up;
 * - native threads keep the process alive until node-datachannel's `cleanup()`: call
 *   `releaseNodeRtc()` once at process exit (or in a test's afterAll).
 *
 * The channel's lifecycle (open and close reported once, the close reason, the low-water wake-up)
 * is DatagramChannelBase (@mutp/shared), which the extension's browser channel extends too.
 */
import nodeDataChannel from 'node-datachannel';
import type { DataChannel, PeerConnection, RtcConfig } from 'node-datachannel';
import { DatagramChannelBase } from '@mutp/shared';
import { TurnBudget, TurnBudgetStats, TurnClock } from './turn-budget';
import type {
  ChannelLabel,
  DatagramChannel,
  IceCandidate,
  PeerState,
  RtcFactory,
  RtcPeer,
  SessionDescription,
} from '@mutp/shared';

export interface NodeRtcOptions {
  /** Local address ICE binds to (e.g. 127.0.0.1 in tests, the public interface on an edge VM). */
  bindAddress?: string;
  portRangeBegin?: number;
  portRangeEnd?: number;
  /**
   * Path MTU libdatachannel assumes (default 1280). 1400 lets messages of up to 1276 bytes travel
   * unsplit (docs/protocol.md §1); only set it where the path carries 1400-byte UDP datagrams.
   */
  mtu?: number;
  /** One UDP port for every peer connection (needs portRangeBegin = portRangeEnd). */
  enableIceUdpMux?: boolean;
  /** STUN/TURN URLs, e.g. `stun:stun.example.org:3478`. None by default. */
  iceServers?: string[];
  /** Name prefix of the peers in libdatachannel's logs. */
  name?: string;
  /**
   * Received messages a channel hands on per event-loop turn; the rest of a turn's are dropped
   * (turn-budget.ts: the JS thread fell that far behind node-datachannel's unbounded native
   * queue). None by default.
   */
  maxMessagesPerTurn?: number;
}

const turnClock = new TurnClock();
const receiveStats: TurnBudgetStats = { delivered: 0, dropped: 0, largestTurn: 0 };

/**
 * What the channels with a `maxMessagesPerTurn` received in this process so far: handed on,
 * dropped, the largest turn. A copy.
 */
export function nodeRtcReceiveStats(): TurnBudgetStats {
  return { ...receiveStats };
}

/**
 * Messages the channels with a `maxMessagesPerTurn` dropped unread in this process so far (no
 * copy: the client's receivers read it with every feedback, ClientHost.receiveDrops).
 */
export function nodeRtcReceiveDrops(): number {
  return receiveStats.dropped;
}

/** Options for the channels MUTP uses: unordered, unreliable (no retransmissions). */
/** Retries of a remote candidate that arrived before libdatachannel's ICE transport existed. */
const CANDIDATE_RETRIES = 20;
const CANDIDATE_RETRY_MS = 10;

export const MUTP_CHANNEL_CONFIG = { unordered: true, maxRetransmits: 0 } as const;

const PEER_STATES: ReadonlySet<string> = new Set<PeerState>([
  'new',
  'connecting',
  'connected',
  'disconnected',
  'failed',
  'closed',
]);

/** Creates peers over node-datachannel. */
export function createNodeRtcFactory(options: NodeRtcOptions = {}): RtcFactory {
  const config: RtcConfig = { iceServers: options.iceServers ?? [] };
  if (options.bindAddress !== undefined) config.bindAddress = options.bindAddress;
  if (options.portRangeBegin !== undefined) config.portRangeBegin = options.portRangeBegin;
  if (options.portRangeEnd !== undefined) config.portRangeEnd = options.portRangeEnd;
  if (options.mtu !== undefined) config.mtu = options.mtu;
  if (options.enableIceUdpMux !== undefined) config.enableIceUdpMux = options.enableIceUdpMux;
  const prefix = options.name ?? 'mutp';
  const perTurn = options.maxMessagesPerTurn;
  if (perTurn !== undefined && !(Number.isInteger(perTurn) && perTurn >= 1))
    throw new RangeError('maxMessagesPerTurn must be a positive integer');
  const budget = perTurn === undefined ? undefined : () => new TurnBudget(perTurn, turnClock, receiveStats);
  let counter = 0;
  return {
    createPeer(role) {
      return new NodePeer(`${prefix}-${role}-${++counter}`, role, config, budget);
    },
  };
}

/**
 * Releases node-datachannel's native threads and callbacks (its `cleanup()`), closing every peer
 * connection still open. Without it the process does not exit. Call once, after closing peers.
 */
export function releaseNodeRtc(): void {
  nodeDataChannel.cleanup();
}

class NodePeer implements RtcPeer {
  onLocalDescription?: (description: SessionDescription) => void;
  onLocalCandidate?: (candidate: IceCandidate) => void;
  onChannel?: (channel: DatagramChannel) => void;
  onStateChange?: (state: PeerState) => void;

  private readonly pc: PeerConnection;
  private readonly channels = new Set<NodeChannel>();
  private currentState: PeerState = 'new';
  private hasRemoteDescription = false;
  /** Candidates that came before the remote description (applied right after it). */
  private pendingCandidates: IceCandidate[] = [];
  private closed = false;

  constructor(
    name: string,
    private readonly role: 'offerer' | 'answerer',
    config: RtcConfig,
    private readonly budget?: () => TurnBudget,
  ) {
    // The offerer makes its offer in startOffer(), after its channels exist; the answerer answers
    // as soon as it has the offer (libdatachannel's automatic negotiation).
    this.pc = new nodeDataChannel.PeerConnection(name, { ...config, disableAutoNegotiation: role === 'offerer' });
    this.pc.onLocalDescription(
      guard((sdp, type) => {
        if (this.closed || (type !== 'offer' && type !== 'answer')) return;
        this.onLocalDescription?.({ type, sdp });
      }),
    );
    this.pc.onLocalCandidate(
      guard((candidate, mid) => {
        if (!this.closed) this.onLocalCandidate?.({ candidate, mid });
      }),
    );
    this.pc.onStateChange(
      guard((state) => {
        if (!PEER_STATES.has(state)) return;
        this.setState(state as PeerState);
      }),
    );
    this.pc.onDataChannel(
      guard((dc) => {
        if (this.closed) {
          safely(() => dc.close());
          return;
        }
        const channel = this.track(new NodeChannel(dc, this.budget?.()));
        if (this.onChannel) this.onChannel(channel);
        else channel.close(); // nobody wants it
      }),
    );
  }

  get state(): PeerState {
    return this.currentState;
  }

  createChannel(label: ChannelLabel): DatagramChannel {
    if (this.role !== 'offerer') throw new Error('only the offerer creates channels');
    if (this.closed) throw new Error('peer connection is closed');
    return this.track(new NodeChannel(this.pc.createDataChannel(label, MUTP_CHANNEL_CONFIG), this.budget?.()));
  }

  startOffer(): void {
    if (this.role !== 'offerer') throw new Error('only the offerer makes an offer');
    if (this.closed) throw new Error('peer connection is closed');
    this.pc.setLocalDescription('offer');
  }

  setRemoteDescription(description: SessionDescription): void {
    if (this.closed) return;
    try {
      this.pc.setRemoteDescription(description.sdp, description.type);
    } catch {
      // A description libdatachannel rejects (malformed, wrong state) fails this peer, not the caller.
      this.close();
      return;
    }
    this.hasRemoteDescription = true;
    const pending = this.pendingCandidates;
    this.pendingCandidates = [];
    for (const candidate of pending) this.applyCandidate(candidate);
  }

  addRemoteCandidate(candidate: IceCandidate): void {
    if (this.closed) return;
    if (!this.hasRemoteDescription) {
      // Bounded: a peer never has more than a few dozen candidates.
      if (this.pendingCandidates.length < 64) this.pendingCandidates.push(candidate);
      return;
    }
    this.applyCandidate(candidate);
  }

  private applyCandidate(candidate: IceCandidate, attempt = 0): void {
    // An empty candidate is the end-of-candidates marker of the browser API.
    if (candidate.candidate === '' || this.closed) return;
    try {
      this.pc.addRemoteCandidate(candidate.candidate, candidate.mid);
    } catch {
      // libdatachannel sets up its ICE transport asynchronously after the remote description
      // ("Got a remote candidate without ICE transport"): try again shortly, a bounded number of
      // times. A candidate that never applies is dropped; the others usually suffice, and a peer
      // that cannot connect fails by its connect timeout. Never throw into the signalling path.
      if (attempt < CANDIDATE_RETRIES)
        setTimeout(() => this.applyCandidate(candidate, attempt + 1), CANDIDATE_RETRY_MS);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const channel of this.channels) channel.close();
    this.channels.clear();
    safely(() => this.pc.close());
    this.setState('closed');
  }

  private track(channel: NodeChannel): NodeChannel {
    this.channels.add(channel);
    channel.onRelease = () => this.channels.delete(channel);
    return channel;
  }

  private setState(state: PeerState): void {
    if (state === this.currentState) return;
    if (this.currentState === 'closed') return; // final
    this.currentState = state;
    this.onStateChange?.(state);
  }
}

class NodeChannel extends DatagramChannelBase {
  /**
   * libdatachannel's bufferedAmount was 0 when last read and every message since was sent at
   * once (sendMessageBinary answered true): only a queued message raises it, so it is still 0
   * and the pump's check before each datagram needs no call into the native side.
   */
  private knownEmpty = false;

  constructor(
    private readonly dc: DataChannel,
    private readonly budget?: TurnBudget,
  ) {
    super(dc.getLabel());
    dc.onOpen(guard(() => this.markOpen()));
    dc.onClosed(guard(() => this.markClosed(this.lastError)));
    dc.onError((error) => {
      this.lastError = error;
    });
    dc.onMessage(
      guard((message) => {
        if (this.closed || typeof message === 'string') return; // MUTP is binary only
        if (this.budget && !this.budget.admit()) return;
        const bytes =
          message instanceof ArrayBuffer
            ? new Uint8Array(message)
            : new Uint8Array(message.buffer, message.byteOffset, message.byteLength);
        this.onMessage?.(bytes);
      }),
    );
    dc.onBufferedAmountLow(guard(() => this.bufferedAmountLow()));
    // A channel the remote side opened may already be open when it is handed to us: report it
    // once, after the caller had a chance to set onOpen.
    if (safely(() => dc.isOpen(), false)) setImmediate(() => this.markOpen());
  }

  get bufferedAmount(): number {
    if (this.closed || this.knownEmpty) return 0;
    let amount: number;
    try {
      amount = this.dc.bufferedAmount();
    } catch {
      return 0;
    }
    this.knownEmpty = amount === 0;
    return amount;
  }

  get isOpen(): boolean {
    if (this.closed) return false;
    try {
      return this.dc.isOpen();
    } catch {
      return false;
    }
  }

  /**
   * Copies `bytes` before it returns (libdatachannel takes a copy): the caller may reuse them.
   * One call into the native side per message: on a channel libdatachannel has not opened or has
   * closed, sendMessageBinary throws.
   */
  readonly copiesOnSend = true;

  send(bytes: Uint8Array): boolean {
    if (this.closed) return false;
    // libdatachannel's send() answers false when it queued the message instead of sending it at
    // once: that is still accepted. Only a closed channel (or a throw) drops the message.
    try {
      if (!this.dc.sendMessageBinary(bytes)) this.knownEmpty = false;
      return true;
    } catch {
      return false;
    }
  }

  protected setPlatformLowWaterMark(bytes: number): void {
    safely(() => this.dc.setBufferedAmountLowThreshold(bytes));
  }

  protected closePlatformChannel(): void {
    safely(() => this.dc.close());
  }
}

/**
 * Wraps a callback node-datachannel calls from native code. An exception escaping into it would
 * abort the whole process (a C++ terminate); rethrown on the next turn instead, it is an ordinary
 * uncaught exception with its stack (and fails a test that caused it).
 */
function guard<A extends unknown[]>(f: (...args: A) => void): (...args: A) => void {
  return (...args: A) => {
    try {
      f(...args);
    } catch (error) {
      setImmediate(() => {
        throw error;
      });
    }
  };
}

/** node-datachannel throws on calls to a channel or peer that libdatachannel already closed. */
function safely<T>(f: () => T, fallback?: T): T {
  try {
    return f();
  } catch {
    return fallback as T;
  }
}
