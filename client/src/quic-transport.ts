/**
 * The Node client's QUIC transport: a WebTransport session from @mutp/quic (the same native
 * module the proxy serves with), authenticating the proxy by the certificate hashes origo gave,
 * or, for a proxy offered without hashes (an operator's CA-issued certificate), the WebPKI way:
 * a chain to the system's roots (or the extra ones given) that names the URL's host.
 * The client's own congestion control only paces its small requests and feedback.
 */
import { QuicClient, QuicSession } from '@mutp/quic';
import type { LinkTransport, QuicOpener, QuicTarget } from '@mutp/shared/client';

/** First PTO three times this: a handshake at 27 % loss gets through in about a second. */
const INITIAL_RTT_MS = 100;

export interface NodeQuicOptions {
  /** Roots trusted besides the system's for proxies with a CA's certificate (PEM): a private or test CA. */
  extraRootCertificatesPem?: string;
}

/** Opens QUIC transports with these options. */
export function nodeQuicOpener(options: NodeQuicOptions = {}): QuicOpener {
  return (target) => openNodeQuic(target, options);
}

/** How the proxy's certificate is checked: by the offered hashes, else by its chain and host name. */
function serverAuthentication(target: QuicTarget, options: NodeQuicOptions) {
  const hashes: readonly string[] | undefined = target.certificateHashes;
  if (hashes !== undefined && hashes.length > 0)
    return { serverCertificateHashes: hashes.map((h) => new Uint8Array(Buffer.from(h, 'base64'))) };
  return { extraRootCertificatesPem: options.extraRootCertificatesPem };
}

async function openNodeQuic(target: QuicTarget, options: NodeQuicOptions): Promise<LinkTransport> {
  const link = new NodeQuicLink();
  const session = await QuicClient.connect({
    url: target.url,
    ...serverAuthentication(target, options),
    initialRttMs: INITIAL_RTT_MS,
    connectTimeoutMs: Math.max(1, Math.ceil(target.timeoutMs)),
    onDatagram: (data, receivedAt) => link.received(data, receivedAt),
    onClosed: (_code, reason) => link.ended(reason || 'session closed'),
  });
  link.session = session;
  return link;
}

class NodeQuicLink implements LinkTransport {
  readonly kind = 'quic';
  session?: QuicSession;
  onDatagram?: (bytes: Uint8Array, receivedAt?: number) => void;
  onClose?: (reason: string) => void;
  private open = true;

  /** Ours, not the native session's (a call into the addon per datagram): its close event ends us. */
  get isOpen(): boolean {
    return this.open && this.session !== undefined;
  }

  /** A client sends only feedback: queued, so the JS thread never waits on the connection's lock. */
  send(bytes: Uint8Array): boolean {
    return this.isOpen && this.session!.queueDatagram(bytes);
  }

  close(reason = 'closed by the client'): void {
    if (!this.open) return;
    this.open = false;
    this.session?.close(0, reason.slice(0, 100));
  }

  received(data: Uint8Array, receivedAt: number): void {
    if (this.open) this.onDatagram?.(data, receivedAt);
  }

  ended(reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.onClose?.(reason);
  }
}
