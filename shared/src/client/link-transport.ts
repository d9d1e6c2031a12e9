/**
 * What carries one proxy link's datagrams (LinkTransport, link-transport-types.ts), and the WebRTC
 * one: a peer connection with the two MUTP channels (transport.ts), set up through origo's
 * signalling relay. The link's logic (routing, liveness, reconnection) is the core's LinkEndpoint;
 * a transport only moves datagrams.
 */
import { DATA_CHANNEL_LABEL, DatagramChannel, FEEDBACK_CHANNEL_LABEL, ProxyInfo, RtcFactory } from '..';
import { ClientError } from './errors';
import { Clock, withTimeout } from './host';
import type { LinkTransport, QuicOpener } from './link-transport-types';
import { OrigoSession } from './origo-session';

export type { LinkTransport } from './link-transport-types';

/** A connection attempt that got no answer within its time (not a refusal or a failure). */
export class ConnectTimeoutError extends ClientError {
  constructor(detail: string) {
    super('connect-failed', detail);
  }

  static after(proxyName: string, timeoutMs: number): ConnectTimeoutError {
    return new ConnectTimeoutError(`proxy ${proxyName}: no connection within ${timeoutMs} ms`);
  }
}

/**
 * Opens a WebRTC transport to `proxy` through origo's signalling: resolves once both channels are
 * open, rejects with ClientError connect-failed (ConnectTimeoutError after `timeoutMs`).
 */
export function openWebRtcTransport(
  session: OrigoSession,
  rtc: RtcFactory,
  proxy: ProxyInfo,
  connectionId: string,
  clock: Clock,
  timeoutMs: number,
): Promise<LinkTransport> {
  const transport = new WebRtcTransport(session, rtc, proxy, connectionId);
  return withTimeout(clock, transport.opened, timeoutMs, () => {
    transport.close('connect timeout');
    return ConnectTimeoutError.after(proxy.name, timeoutMs);
  }).then(() => transport);
}

class WebRtcTransport implements LinkTransport {
  readonly kind = 'webrtc';
  readonly opened: Promise<void>;
  onDatagram?: (bytes: Uint8Array) => void;
  onClose?: (reason: string) => void;
  private readonly peer;
  private data?: DatagramChannel;
  private feedback?: DatagramChannel;
  private readonly signals: ReturnType<OrigoSession['openConnection']>;
  private closed = false;

  constructor(session: OrigoSession, rtc: RtcFactory, proxy: ProxyInfo, connectionId: string) {
    const peer = rtc.createPeer('offerer');
    this.peer = peer;
    let fail: (reason: string) => void = () => undefined;
    this.opened = new Promise<void>((resolve, reject) => {
      let open = 0;
      fail = (reason: string) => {
        if (this.closed) return;
        const wasOpen = this.isOpen || open === 2;
        this.close(reason);
        if (wasOpen) this.onClose?.(reason);
        else reject(new ClientError('connect-failed', `proxy ${proxy.name}: ${reason}`));
      };
      const channel = (label: typeof DATA_CHANNEL_LABEL | typeof FEEDBACK_CHANNEL_LABEL) => {
        const ch = peer.createChannel(label);
        ch.onOpen = () => {
          if (++open === 2) resolve();
        };
        ch.onMessage = (bytes) => {
          if (!this.closed) this.onDatagram?.(bytes);
        };
        ch.onClose = () => fail(`channel ${label} closed`);
        return ch;
      };
      this.data = channel(DATA_CHANNEL_LABEL);
      this.feedback = channel(FEEDBACK_CHANNEL_LABEL);
    });
    this.signals = session.openConnection(proxy.proxyId, connectionId, {
      onDescription: (d) => peer.setRemoteDescription(d),
      onCandidate: (c) => peer.addRemoteCandidate(c),
      // Once both channels are open the peer connection no longer needs origo: a signalling blip
      // (origo restart, the proxy reconnecting to origo) must not drop a working transport.
      onClosed: (reason) => {
        if (!this.isOpen) fail(reason);
      },
    });
    peer.onLocalDescription = (d) => this.signals.sendDescription(d);
    peer.onLocalCandidate = (c) => this.signals.sendCandidate(c);
    peer.onStateChange = (state) => {
      if (state === 'failed' || state === 'closed') fail(`peer connection ${state}`);
    };
    peer.startOffer();
  }

  get isOpen(): boolean {
    return !this.closed && this.data?.isOpen === true && this.feedback?.isOpen === true;
  }

  /** Client-to-proxy messages go on the feedback channel, never behind bulk data. */
  send(bytes: Uint8Array): boolean {
    return this.isOpen && this.feedback!.send(bytes);
  }

  close(reason = 'closed by the client'): void {
    if (this.closed) return;
    this.closed = true;
    this.signals.close(reason);
    this.data?.close();
    this.feedback?.close();
    this.peer.close();
  }
}

/**
 * Opens a QUIC transport to `proxy`'s offered endpoint, presenting `token` (origo's client token:
 * the proxy admits the client by it, with no signalling through origo). Rejects with
 * ConnectTimeoutError after `timeoutMs`; a transport that opens later is closed.
 */
export function openQuicTransport(
  open: QuicOpener,
  proxy: ProxyInfo,
  token: string,
  clock: Clock,
  timeoutMs: number,
): Promise<LinkTransport> {
  const endpoint = proxy.quic;
  if (endpoint === undefined)
    return Promise.reject(new ClientError('connect-failed', `proxy ${proxy.name}: no QUIC endpoint offered`));
  const url = new URL(endpoint.url);
  url.searchParams.set('token', token);
  let timedOut = false;
  const hashes = endpoint.certificateHashes;
  const opening = open({ url: url.toString(), ...(hashes ? { certificateHashes: hashes } : {}), timeoutMs }).then(
    (transport) => {
      if (timedOut) transport.close('connect timeout');
      return transport;
    },
    (e: unknown) => {
      const why = e instanceof Error ? e.message : String(e);
      throw new ClientError('connect-failed', `proxy ${proxy.name}: QUIC: ${why}`);
    },
  );
  return withTimeout(clock, opening, timeoutMs, () => {
    timedOut = true;
    return ConnectTimeoutError.after(proxy.name, timeoutMs);
  });
}
