/**
 * The browser implementation of the WebRTC surface MUTP uses (`RtcFactory`,
 * shared/src/client/rtc.ts) over the native RTCPeerConnection, for the downloader frame (MV3
 * service workers have no RTCPeerConnection). Mirrors node-rtc/src/webrtc.ts:
 * - channels are unordered with no retransmissions, binary (`binaryType = 'arraybuffer'`);
 * - candidates trickle as `{candidate, mid}`; remote ones that arrive before the remote
 *   description are queued and applied right after it (signalling order does not matter);
 * - `bufferedAmountLowThreshold` + `bufferedamountlow` give the late-binding wake-up;
 * - close() reports the state 'closed' at once (browsers fire no event for a local close).
 * The channel's lifecycle (open and close reported once, the close reason, the low-water
 * wake-up) is DatagramChannelBase (@mutp/shared), which node-rtc's channel extends too.
 */
import { DatagramChannelBase } from '@mutp/shared';
import type {
  ChannelLabel,
  DatagramChannel,
  IceCandidate,
  PeerState,
  RtcFactory,
  RtcPeer,
  SessionDescription,
} from '@mutp/shared';

export interface BrowserRtcOptions {
  /** STUN/TURN URLs; none by default (proxies are reached directly). */
  iceServers?: string[];
  /** The RTCPeerConnection constructor (tests inject one). */
  RTCPeerConnection?: typeof RTCPeerConnection;
}

/** Channel options MUTP needs: unordered, unreliable. */
export const MUTP_CHANNEL_INIT: RTCDataChannelInit = { ordered: false, maxRetransmits: 0 };

const PEER_STATES: ReadonlySet<string> = new Set<PeerState>([
  'new',
  'connecting',
  'connected',
  'disconnected',
  'failed',
  'closed',
]);

export function createBrowserRtcFactory(options: BrowserRtcOptions = {}): RtcFactory {
  const Ctor = options.RTCPeerConnection ?? globalThis.RTCPeerConnection;
  const config: RTCConfiguration = { iceServers: (options.iceServers ?? []).map((urls) => ({ urls })) };
  return {
    createPeer(role) {
      if (typeof Ctor !== 'function') throw new Error('RTCPeerConnection is not available here');
      return new BrowserPeer(new Ctor(config), role);
    },
  };
}

class BrowserPeer implements RtcPeer {
  onLocalDescription?: (description: SessionDescription) => void;
  onLocalCandidate?: (candidate: IceCandidate) => void;
  onChannel?: (channel: DatagramChannel) => void;
  onStateChange?: (state: PeerState) => void;

  private currentState: PeerState = 'new';
  private readonly channels = new Set<BrowserChannel>();
  private hasRemoteDescription = false;
  private pendingCandidates: IceCandidate[] = [];
  /** Remote descriptions and candidates are applied in order, one at a time. */
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly pc: RTCPeerConnection,
    private readonly role: 'offerer' | 'answerer',
  ) {
    pc.onicecandidate = (event) => {
      if (this.closed || !event.candidate || !event.candidate.candidate) return; // null / '' = end of candidates
      this.onLocalCandidate?.({ candidate: event.candidate.candidate, mid: event.candidate.sdpMid ?? '0' });
    };
    pc.onconnectionstatechange = () => this.updateState();
    // Engines without connectionState fall back to the ICE state.
    pc.oniceconnectionstatechange = () => {
      if (pc.connectionState === undefined) this.updateState();
    };
    pc.ondatachannel = (event) => {
      if (this.closed) {
        event.channel.close();
        return;
      }
      const channel = this.track(new BrowserChannel(event.channel));
      if (this.onChannel) this.onChannel(channel);
      else channel.close();
    };
  }

  get state(): PeerState {
    return this.currentState;
  }

  createChannel(label: ChannelLabel): DatagramChannel {
    if (this.role !== 'offerer') throw new Error('only the offerer creates channels');
    if (this.closed) throw new Error('peer connection is closed');
    return this.track(new BrowserChannel(this.pc.createDataChannel(label, MUTP_CHANNEL_INIT)));
  }

  startOffer(): void {
    if (this.role !== 'offerer') throw new Error('only the offerer makes an offer');
    if (this.closed) throw new Error('peer connection is closed');
    this.pc
      .createOffer()
      .then((offer) => this.pc.setLocalDescription(offer))
      .then(() => this.emitLocalDescription())
      .catch(() => this.fail());
  }

  setRemoteDescription(description: SessionDescription): void {
    if (this.closed) return;
    this.enqueue(async () => {
      await this.pc.setRemoteDescription({ type: description.type, sdp: description.sdp });
      this.hasRemoteDescription = true;
      if (description.type === 'offer') {
        await this.pc.setLocalDescription(await this.pc.createAnswer());
        this.emitLocalDescription();
      }
      const pending = this.pendingCandidates;
      this.pendingCandidates = [];
      for (const candidate of pending) await this.applyCandidate(candidate);
    });
  }

  addRemoteCandidate(candidate: IceCandidate): void {
    if (this.closed) return;
    if (!this.hasRemoteDescription) {
      if (this.pendingCandidates.length < 64) this.pendingCandidates.push(candidate);
      return;
    }
    this.enqueue(() => this.applyCandidate(candidate));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const channel of this.channels) channel.close();
    this.channels.clear();
    try {
      this.pc.close();
    } catch {
      // already closed
    }
    this.setState('closed');
  }

  private async applyCandidate(candidate: IceCandidate): Promise<void> {
    // libdatachannel may write the SDP attribute form ("a=candidate:..."); the browser wants "candidate:...".
    const text = candidate.candidate.replace(/^a=/, '');
    if (text === '') return;
    try {
      await this.pc.addIceCandidate({ candidate: text, sdpMid: candidate.mid });
    } catch {
      // A candidate the browser cannot use (e.g. an mDNS name it cannot resolve) is skipped; the others may work.
    }
  }

  private emitLocalDescription(): void {
    const d = this.pc.localDescription;
    if (this.closed || !d || (d.type !== 'offer' && d.type !== 'answer')) return;
    this.onLocalDescription?.({ type: d.type, sdp: d.sdp });
  }

  private enqueue(step: () => Promise<void>): void {
    this.chain = this.chain.then(step).catch(() => this.fail());
  }

  private fail(): void {
    if (!this.closed) this.setState('failed');
  }

  private updateState(): void {
    if (this.closed) return;
    const s = this.pc.connectionState ?? iceToPeerState(this.pc.iceConnectionState);
    if (PEER_STATES.has(s)) this.setState(s as PeerState);
  }

  private track(channel: BrowserChannel): BrowserChannel {
    this.channels.add(channel);
    channel.onRelease = () => this.channels.delete(channel);
    return channel;
  }

  private setState(state: PeerState): void {
    if (state === this.currentState || this.currentState === 'closed') return;
    this.currentState = state;
    this.onStateChange?.(state);
  }
}

function iceToPeerState(ice: RTCIceConnectionState): PeerState {
  switch (ice) {
    case 'checking':
      return 'connecting';
    case 'connected':
    case 'completed':
      return 'connected';
    default:
      return ice as PeerState;
  }
}

class BrowserChannel extends DatagramChannelBase {
  constructor(private readonly dc: RTCDataChannel) {
    super(dc.label);
    dc.binaryType = 'arraybuffer';
    dc.onopen = () => this.markOpen();
    dc.onclose = () => this.markClosed(this.lastError);
    dc.onerror = (event) => {
      const error = (event as RTCErrorEvent).error;
      this.lastError = error?.message || 'data channel error';
    };
    dc.onmessage = (event: MessageEvent) => {
      if (this.closed) return;
      const data: unknown = event.data;
      if (data instanceof ArrayBuffer) this.onMessage?.(new Uint8Array(data));
      else if (ArrayBuffer.isView(data))
        this.onMessage?.(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      // strings (and Blobs, which binaryType rules out) are not MUTP
    };
    dc.onbufferedamountlow = () => this.bufferedAmountLow();
    // A channel the remote side opened may already be open: report it once, after onOpen is set.
    if (dc.readyState === 'open') queueMicrotask(() => this.markOpen());
  }

  get bufferedAmount(): number {
    return this.closed ? 0 : this.dc.bufferedAmount;
  }

  get isOpen(): boolean {
    return !this.closed && this.dc.readyState === 'open';
  }

  send(bytes: Uint8Array): boolean {
    if (!this.isOpen) return false;
    try {
      this.dc.send(bytes as Uint8Array<ArrayBuffer>);
      return true;
    } catch {
      // OperationError: the send queue is full; the message is lost like a dropped datagram
      return false;
    }
  }

  protected setPlatformLowWaterMark(bytes: number): void {
    this.dc.bufferedAmountLowThreshold = bytes;
  }

  protected closePlatformChannel(): void {
    try {
      this.dc.close();
    } catch {
      // already closed
    }
  }
}
