/**
 * The part of WebRTC that MUTP uses, so the client orchestration runs unchanged over the
 * browser's RTCPeerConnection (extension) and over node-datachannel (Node client, proxy): see
 * the node-rtc workspace for the Node implementation.
 *
 * Every client–proxy pair has one peer connection with two data channels, both unordered with
 * no retransmissions: `mutp-data` (META, DATA, ERROR from the proxy) and `mutp-feedback`
 * (REQUEST, FEEDBACK, STOP from the client), so feedback never waits behind bulk data. The client
 * makes the offer and creates both channels; the proxy answers.
 */
import { IceCandidate, SessionDescription } from './signalling';

export const DATA_CHANNEL_LABEL = 'mutp-data';
export const FEEDBACK_CHANNEL_LABEL = 'mutp-feedback';
export const CHANNEL_LABELS = [DATA_CHANNEL_LABEL, FEEDBACK_CHANNEL_LABEL] as const;
export type ChannelLabel = (typeof CHANNEL_LABELS)[number];

export type PeerState = 'new' | 'connecting' | 'connected' | 'disconnected' | 'failed' | 'closed';

/** One unordered, unreliable data channel carrying binary messages. */
export interface DatagramChannel {
  readonly label: string;
  /** Bytes queued in the channel and not yet handed to the network. */
  readonly bufferedAmount: number;
  readonly isOpen: boolean;
  /** Queues one message; false (message dropped) when the channel is not open. */
  send(bytes: Uint8Array): boolean;
  /** send() copies the bytes before it returns: the caller may reuse them for the next message. */
  readonly copiesOnSend?: boolean;
  /** Calls `onLow` whenever bufferedAmount falls to `bytes` or below (late binding's wake-up). */
  setLowWaterMark(bytes: number, onLow: () => void): void;
  /**
   * Bytes this channel wants queued to keep the wire busy between two wake-ups, where it differs
   * from the sender's default (a wake-up that comes from another thread takes longer to arrive).
   */
  readonly preferredLowWater?: number;
  onOpen?: () => void;
  onMessage?: (bytes: Uint8Array) => void;
  onClose?: (reason?: string) => void;
  close(): void;
}

export interface RtcPeer {
  /** Offerer: creates a channel (before the offer is made). */
  createChannel(label: ChannelLabel): DatagramChannel;
  /** Offerer: makes the offer; the local description arrives through onLocalDescription. */
  startOffer(): void;
  setRemoteDescription(description: SessionDescription): void;
  addRemoteCandidate(candidate: IceCandidate): void;
  onLocalDescription?: (description: SessionDescription) => void;
  onLocalCandidate?: (candidate: IceCandidate) => void;
  /** Answerer: a channel the offerer created. */
  onChannel?: (channel: DatagramChannel) => void;
  onStateChange?: (state: PeerState) => void;
  readonly state: PeerState;
  close(): void;
}

/** Creates peer connections; injected into the client (browser or Node) and the proxy. */
export interface RtcFactory {
  createPeer(role: 'offerer' | 'answerer'): RtcPeer;
}
