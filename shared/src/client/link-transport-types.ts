/**
 * What carries a proxy link's datagrams, and how a host opens a QUIC one: the types host.ts,
 * link-transport.ts and the links share. A leaf (it imports nothing), so the host's interface
 * and the transports that use the host do not import each other.
 */

export interface LinkTransport {
  /** Which kind it is, for traces and records ('webrtc', 'quic'). */
  readonly kind: string;
  readonly isOpen: boolean;
  /** Sends one datagram to the proxy; false when it was dropped (not open, or its buffer is full). */
  send(bytes: Uint8Array): boolean;
  /** Closes it; onClose is not called for a close the link asked for. */
  close(reason?: string): void;
  /** `receivedAt`: when it arrived (performance.now() clock), where the transport reads in batches. */
  onDatagram?: (bytes: Uint8Array, receivedAt?: number) => void;
  /** It closed or failed under the link. */
  onClose?: (reason: string) => void;
}

/** Where and how to open a QUIC transport to one proxy (its offered endpoint, and the client's origo token). */
export interface QuicTarget {
  /** The proxy's WebTransport URL, with the token already in its query. */
  url: string;
  /**
   * SHA-256 of the certificates the proxy may present, base64: nothing else is accepted. Absent:
   * a CA-issued certificate, validated by its chain and the URL's host name.
   */
  certificateHashes?: readonly string[];
  /** The attempt is given up after this long (the caller also stops waiting then). */
  timeoutMs: number;
}

/**
 * Opens a QUIC transport (a WebTransport session carrying MUTP messages as QUIC datagrams); the
 * caller bounds it in time and closes one that opens too late.
 */
export type QuicOpener = (target: QuicTarget) => Promise<LinkTransport>;
