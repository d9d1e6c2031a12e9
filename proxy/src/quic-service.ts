/**
 * The proxy's QUIC endpoint: a WebTransport server (@mutp/quic, quinn with our own loss-blind rate
 * controller) whose sessions carry MUTP messages as QUIC datagrams. A session is a peer like a
 * WebRTC one (PeerManager: same limits, drain, TransferHost), but no signalling goes through
 * origo, so the proxy admits it itself: the CONNECT's `?token=` must be a client token origo
 * signed (ClientTokenVerifier), whose subject is the client id its limits count against.
 * Certificates are self-signed and rotated (quic-certificates.ts), their hashes going to origo; or
 * an operator's CA-issued pair of files (quic-ca-certificate.ts), re-read when they change, with
 * no hashes: clients validate it by its chain and the URL's host name.
 */
import type { Logger } from 'pino';
import type { ClientTokenVerifier } from './client-tokens';
import type { ProxyMetrics } from './metrics';
import type { PeerManager } from './peer-manager';
import { CaCertificateFiles } from './quic-ca-certificate';
import type { QuicCaConfig } from './quic-cert-config';
import { CertificateRotation, QuicCertificate } from './quic-certificates';
import { QuicSessionChannel, type QuicSessionServer } from './quic-session-channel';

/** The part of @mutp/quic's QuicServer the endpoint uses (a seam for tests). */
export interface QuicServerApi extends QuicSessionServer {
  readonly port: number;
  acceptSession(sessionId: number): void;
  rejectSession(sessionId: number, httpStatus: number): void;
  reloadCertificate(certificatePem: string, privateKeyPem: string): void;
  close(): Promise<void>;
}

export interface QuicServerEvents {
  onSessionRequest(request: { sessionId: number; path: string; remoteAddress: string }): void;
  onDatagram(sessionId: number, bytes: Uint8Array): void;
  onSendBufferLow(sessionId: number): void;
  onSessionClosed(sessionId: number, reason: string): void;
}

export interface QuicListenOptions {
  host: string;
  port: number;
  certificate: QuicCertificate;
  /** The proxy's upload limit (bytes/s, 0 = none): no session is paced above it. */
  maxRateBps: number;
  events: QuicServerEvents;
}

/** Starts a server: @mutp/quic in production, a fake in tests. */
export type QuicListen = (o: QuicListenOptions) => Promise<QuicServerApi>;

export interface QuicServiceOptions {
  host: string;
  port: number;
  /** The URL to advertise, or derived from the advertised HTTP URL's host and the bound port. */
  advertisedUrl?: string;
  certificateDays: number;
  generateCertificate: (validityDays: number) => QuicCertificate;
  /**
   * An operator's CA-issued certificate instead of self-signed ones; `host` is the QUIC URL's
   * (quicUrlHost), which it must name.
   */
  caCertificate?: { files: QuicCaConfig; host: string };
  maxRateBps: number;
  peers: PeerManager;
  tokens: ClientTokenVerifier;
  logger: Logger;
  metrics?: ProxyMetrics;
  listen: QuicListen;
  /** The certificates' hashes changed (a rotation): report them to origo. */
  onHashesChanged?: (hashes: string[]) => void;
}

/** What the endpoint's certificate comes from: a rotation of self-signed ones, or an operator's files. */
type CertificateSource = Pick<CertificateRotation, 'certificate' | 'hashes' | 'start' | 'stop'>;

/** The endpoint as origo offers it: with hashes for self-signed certificates, without for a CA's. */
export interface OfferedQuicEndpoint {
  url: string;
  certificateHashes?: string[];
}

/** The host name or IP address of a QUIC URL (or of the HTTP URL it is derived from), without IPv6 brackets. */
export function quicUrlHost(url: string): string {
  return new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
}

/** HTTP statuses a refused CONNECT gets. */
const STATUS = { unauthorized: 401, notFound: 404, unavailable: 503 } as const;
/** The path clients CONNECT to. */
export const QUIC_PATH = '/mutp';

export class QuicService {
  private server?: QuicServerApi;
  private certificates?: CertificateSource;
  private caFiles?: CaCertificateFiles;
  private readonly channels = new Map<number, QuicSessionChannel>();
  private readonly log: Logger;
  private closed = false;
  private readonly counters = { sessionsRequested: 0, sessionsAccepted: 0, sessionsRefused: 0, unauthorized: 0 };

  constructor(private readonly o: QuicServiceOptions) {
    this.log = o.logger.child({ component: 'quic' });
  }

  /** Binds the UDP port; resolves with the bound port. Rejects when the CA certificate files are unusable. */
  async start(): Promise<number> {
    const certificates = this.certificateSource();
    this.certificates = certificates;
    this.server = await this.o.listen({
      host: this.o.host,
      port: this.o.port,
      certificate: certificates.certificate,
      maxRateBps: this.o.maxRateBps,
      events: {
        onSessionRequest: (r) => this.onSessionRequest(r.sessionId, r.path, r.remoteAddress),
        onDatagram: (id, bytes) => this.channels.get(id)?.onMessage?.(bytes),
        onSendBufferLow: (id) => this.channels.get(id)?.drained(),
        onSessionClosed: (id, reason) => this.onSessionClosed(id, reason),
      },
    });
    certificates.start();
    return this.server.port;
  }

  private certificateSource(): CertificateSource {
    const ca = this.o.caCertificate;
    if (ca !== undefined) {
      this.caFiles = new CaCertificateFiles({
        files: ca.files,
        host: ca.host,
        now: () => Date.now(),
        onChange: (c) => this.server?.reloadCertificate(c.certificatePem, c.privateKeyPem),
        logger: this.log,
      });
      return this.caFiles;
    }
    return new CertificateRotation({
      validityDays: this.o.certificateDays,
      generate: this.o.generateCertificate,
      now: () => Date.now(),
      onSwitch: (c) => {
        this.server?.reloadCertificate(c.certificatePem, c.privateKeyPem);
        this.log.info({ notAfter: new Date(c.notAfter).toISOString() }, 'QUIC certificate rotated');
      },
      onHashesChanged: (hashes) => this.o.onHashesChanged?.(hashes),
    });
  }

  /**
   * The current and (when announced) next certificate hashes, base64: what origo hands clients.
   * None with a CA's certificate.
   */
  certificateHashes(): string[] {
    return this.certificates?.hashes() ?? [];
  }

  /** Self-signed certificates: their hashes go to origo with every heartbeat. */
  get reportsHashes(): boolean {
    return this.o.caCertificate === undefined;
  }

  /** What to register with origo: the URL, and the hashes unless the certificate is a CA's. */
  endpoint(url: string): OfferedQuicEndpoint {
    return this.reportsHashes ? { url, certificateHashes: this.certificateHashes() } : { url };
  }

  /** https://host:port/mutp on the advertised HTTP URL's host (origo requires the same host). */
  url(advertisedHttpUrl: string): string {
    if (this.o.advertisedUrl !== undefined) return this.o.advertisedUrl;
    const host = new URL(advertisedHttpUrl).host.replace(/:\d+$/, '');
    return `https://${host}:${this.server?.port ?? this.o.port}${QUIC_PATH}`;
  }

  stats() {
    return {
      sessions: this.channels.size,
      ...this.counters,
      certificate: this.caFiles ? { source: 'ca-files', ...this.caFiles.stats() } : { source: 'self-signed' },
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.certificates?.stop();
    await this.server?.close();
    this.channels.clear();
  }

  private onSessionRequest(sessionId: number, path: string, remoteAddress: string): void {
    const server = this.server!;
    this.counters.sessionsRequested++;
    let url: URL;
    try {
      url = new URL(path, 'https://proxy');
    } catch {
      this.o.metrics?.quicSessions.inc({ outcome: 'not-found' });
      server.rejectSession(sessionId, STATUS.notFound);
      return;
    }
    if (url.pathname !== QUIC_PATH) {
      this.o.metrics?.quicSessions.inc({ outcome: 'not-found' });
      server.rejectSession(sessionId, STATUS.notFound);
      return;
    }
    this.o.tokens.verify(url.searchParams.get('token') ?? undefined).then(
      (check) => {
        if (this.closed) return;
        if (!check.ok) {
          this.counters.unauthorized++;
          this.o.metrics?.quicSessions.inc({ outcome: 'unauthorized' });
          this.log.info({ remoteAddress, reason: check.reason }, 'QUIC session refused: token');
          server.rejectSession(sessionId, STATUS.unauthorized);
          return;
        }
        const refused = this.o.peers.acceptSession(`q${sessionId}`, check, () => {
          server.acceptSession(sessionId);
          const channel = new QuicSessionChannel(server, sessionId);
          this.channels.set(sessionId, channel);
          return { channel, close: (reason) => channel.closeSession(reason) };
        });
        if (refused !== undefined) {
          this.counters.sessionsRefused++;
          this.o.metrics?.quicSessions.inc({ outcome: 'refused' });
          server.rejectSession(sessionId, STATUS.unavailable);
        } else {
          this.counters.sessionsAccepted++;
          this.o.metrics?.quicSessions.inc({ outcome: 'accepted' });
        }
      },
      (err: unknown) => {
        this.log.error({ err }, 'token verification failed');
        server.rejectSession(sessionId, STATUS.unavailable);
      },
    );
  }

  private onSessionClosed(sessionId: number, reason: string): void {
    const channel = this.channels.get(sessionId);
    if (channel === undefined) return;
    this.channels.delete(sessionId);
    channel.closedByPeer(reason);
    this.o.peers.sessionClosed(`q${sessionId}`, `session closed: ${reason}`);
  }
}
