/**
 * `@mutp/quic`: QUIC datagrams (RFC 9221) over WebTransport (HTTP/3) for Node, through a native
 * addon (quic/native: napi-rs, wtransport on quinn) with MutpRate, a loss-blind rate controller that
 * backs off on queueing delay (quic/README.md). A server for the proxy (browsers connect with
 * `new WebTransport(url, { serverCertificateHashes })`) and a client for the Node client.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

/** Where `bash quic/build.sh` puts the addon. */
export const NATIVE_ADDON_PATH = join(__dirname, '..', 'dist', 'mutp_quic.node');

/**
 * The addon this process loads: `MUTP_QUIC_ADDON` names another build (a candidate measured
 * against the installed one, e.g. with bench:cpu, whose proxies inherit the environment).
 */
function addonPath(): string {
  return process.env.MUTP_QUIC_ADDON || NATIVE_ADDON_PATH;
}

/** Rate controller options, all in bytes per second. */
export interface RateOptions {
  /** Start at this rate instead of slow start (the proxy knows its upload limit). */
  initialRateBps?: number;
  /** Cap for every session of this server (or this client); 0 or absent: none. */
  maxRateBps?: number;
  /** The rate never falls below this (default 64 KiB/s). */
  minRateBps?: number;
}

/** QUIC transport tuning, shared by the server and the client. */
export interface TransportOptions {
  /** Max idle timeout (default 30 s); keep-alives every third of it unless `keepAliveMs`. */
  idleTimeoutMs?: number;
  keepAliveMs?: number;
  /** RTT assumed before the first sample (default 100 ms; quinn's own default is 333 ms). */
  initialRttMs?: number;
  /** Datagram send buffer (default 64 KiB): small, so that late binding picks what is sent late. */
  datagramSendBufferBytes?: number;
  /** Datagram receive buffer (default 1 MiB). */
  datagramReceiveBufferBytes?: number;
  rate?: RateOptions;
}

export interface SessionRequest {
  sessionId: number;
  /** The request's path with its query, e.g. `/mutp?token=...`. */
  path: string;
  remoteAddress: string;
  remotePort: number;
}

export interface SessionInfo {
  /** Largest payload `sendDatagram` takes now. */
  maxDatagramSize: number;
  /** Datagram send-buffer bytes not yet sent. */
  bufferedBytes: number;
  rttMs: number;
  /** The rate controller's windowed (10 s) minimum RTT. */
  minRttMs: number;
  /** The rate controller's current rate, bytes/s. */
  rateBps: number;
  /** The session's cap (`setRateCap`), 0 = none. */
  capBps: number;
  /** Last delivery-rate sample, bytes/s. */
  deliveryRateBps: number;
  /** The controller competes TCP-like: a standing queue that is not its own (quic/README.md). */
  competing: boolean;
  /** How often it entered that mode. */
  competingEntries: number;
  lostPackets: number;
  sentPackets: number;
  congestionWindow: number;
}

export interface GeneratedCertificate {
  certificatePem: string;
  privateKeyPem: string;
  /** SHA-256 of the DER certificate, for `serverCertificateHashes`. */
  sha256: Uint8Array;
  /** Milliseconds since the epoch. */
  notBefore: number;
  notAfter: number;
}

interface NativeEvent {
  kind: 'request' | 'open' | 'datagrams' | 'closed' | 'low';
  sessionId: number;
  path?: string;
  remoteAddress?: string;
  remotePort?: number;
  code?: number;
  reason?: string;
  /** Per datagram: session id, length, microseconds it waited before the batch's dispatch. */
  meta?: Uint32Array;
  data?: Buffer;
  dropped?: number;
}

interface NativeTransport {
  idleTimeoutMs?: number;
  keepAliveMs?: number;
  initialRttMs?: number;
  datagramSendBufferBytes?: number;
  datagramReceiveBufferBytes?: number;
}

interface NativeServer {
  readonly port: number;
  readonly sessionCount: number;
  readonly retriesSent: number;
  acceptSession(sessionId: number): boolean;
  rejectSession(sessionId: number, httpStatus: number): number;
  sendDatagram(sessionId: number, data: Uint8Array): boolean;
  sessionInfo(sessionId: number): SessionInfo | null;
  bufferedBytes(sessionId: number): number;
  setRateCap(sessionId: number, bytesPerSecond: number): boolean;
  setLowWaterMark(sessionId: number, bytes: number): boolean;
  closeSession(sessionId: number, code: number, reason: string): boolean;
  reloadCertificate(certificatePem: string, privateKeyPem: string): void;
  close(): Promise<void>;
}

interface NativeClient {
  readonly closed: boolean;
  /** Process-wide: the shared datagram batches name the session by it. */
  readonly sessionId: number;
  sendDatagram(data: Uint8Array): boolean;
  queueDatagram(data: Uint8Array): boolean;
  info(): SessionInfo;
  setRateCap(bytesPerSecond: number): void;
  setLowWaterMark(bytes: number): void;
  close(code: number, reason: string): void;
}

interface NativeAddon {
  generateCertificate(options: { names: string[]; validityDays: number }): GeneratedCertificate;
  certificateHash(certificatePem: string): Uint8Array;
  listen(
    options: {
      host: string;
      port: number;
      certificatePem: string;
      privateKeyPem: string;
      maxSessions: number;
      maxPendingSessions: number;
      retryAbovePendingSessions?: number;
      handshakeTimeoutMs?: number;
      requestTimeoutMs?: number;
      transport: NativeTransport;
      rate?: RateOptions;
    },
    onEvent: (event: NativeEvent) => void,
  ): NativeServer;
  /** Where every client session's datagrams go (one batch for all sessions); `connect` needs it. */
  setClientDatagramHandler(onEvent: (event: NativeEvent) => void): void;
  connect(
    options: {
      url: string;
      serverCertificateHashes?: Uint8Array[];
      extraRootCertificatesPem?: string;
      connectTimeoutMs?: number;
      transport: NativeTransport;
      rate?: RateOptions;
    },
    onEvent: (event: NativeEvent) => void,
  ): Promise<NativeClient>;
}

let addon: NativeAddon | undefined;

/** The native addon, loaded on first use. */
function native(): NativeAddon {
  if (addon) return addon;
  const path = addonPath();
  if (!existsSync(path)) {
    throw new Error(
      `@mutp/quic: the native addon ${path} is missing: build it with \`bash quic/build.sh\` (needs Rust; scripts/setup.sh runs it)`,
    );
  }
  addon = createRequire(__filename)(path) as NativeAddon;
  return addon;
}

function nativeTransport(o: TransportOptions): NativeTransport {
  return {
    idleTimeoutMs: o.idleTimeoutMs,
    keepAliveMs: o.keepAliveMs,
    initialRttMs: o.initialRttMs,
    datagramSendBufferBytes: o.datagramSendBufferBytes,
    datagramReceiveBufferBytes: o.datagramReceiveBufferBytes,
  };
}

/**
 * Calls `each(sessionId, payload, receivedAt)` for every datagram of a batch (views into one
 * buffer), with when it arrived (performance.now() time): a batch is read at
 * once, so the arrival spacing a rate estimate needs comes from the native side's timestamps.
 */
function forEachDatagram(
  event: NativeEvent,
  each: (sessionId: number, data: Buffer, receivedAt: number) => void,
): void {
  const { meta, data } = event;
  if (!meta || !data) return;
  const now = performance.now();
  let offset = 0;
  for (let i = 0; i + 2 < meta.length; i += 3) {
    const end = offset + meta[i + 1];
    each(meta[i], data.subarray(offset, end), now - meta[i + 2] / 1000);
    offset = end;
  }
}

/**
 * Every client session's datagrams arrive in shared batches (the native side queues them
 * together, so the JS thread is called once per batch, not once per session): routed here by
 * session id. Installed once per JS realm (a Jest test file loads this module again; its handler
 * then replaces the previous realm's).
 */
interface ClientDatagramHandler {
  onDatagram: (data: Buffer, receivedAt: number) => void;
  onDatagramsDropped?: (count: number) => void;
}
const clientDatagramHandlers = new Map<number, ClientDatagramHandler>();
let clientDatagramsInstalled = false;

/** How the client sessions' datagrams reached JavaScript in this realm (diagnostics, tests). */
export interface ClientBatchStats {
  /** Calls of the JS thread with datagrams. */
  batches: number;
  datagrams: number;
  /** Batches that carried datagrams of more than one session. */
  sharedBatches: number;
}
const batchStats: ClientBatchStats = { batches: 0, datagrams: 0, sharedBatches: 0 };

export function clientBatchStats(): ClientBatchStats {
  return { ...batchStats };
}

function countBatch(meta: Uint32Array | undefined): void {
  if (!meta || meta.length < 3) return;
  batchStats.batches++;
  batchStats.datagrams += meta.length / 3;
  for (let i = 3; i + 2 < meta.length; i += 3)
    if (meta[i] !== meta[0]) {
      batchStats.sharedBatches++;
      return;
    }
}

/** Client datagrams the shared queue dropped in this realm so far (quicClientReceiveDrops). */
let clientDatagramsDropped = 0;

/**
 * Datagrams of this process's client sessions that the shared queue dropped unread so far
 * (more than 16 MiB waited for the JS thread): monotonic, all sessions together, as
 * node-rtc's nodeRtcReceiveDrops, with which the Node client hands it to its receivers
 * (ClientHost.receiveDrops: its sources are then told the rate it handles).
 */
export function quicClientReceiveDrops(): number {
  return clientDatagramsDropped;
}

function installClientDatagrams(n: NativeAddon): void {
  if (clientDatagramsInstalled) return;
  n.setClientDatagramHandler((event) => {
    if (event.kind !== 'datagrams') return;
    countBatch(event.meta);
    clientDatagramsDropped += event.dropped ?? 0;
    // The queue is shared: a drop is not one session's, so every open session hears of it.
    if (event.dropped) for (const h of clientDatagramHandlers.values()) h.onDatagramsDropped?.(event.dropped);
    forEachDatagram(event, (id, data, receivedAt) => clientDatagramHandlers.get(id)?.onDatagram(data, receivedAt));
  });
  clientDatagramsInstalled = true;
}

/**
 * A self-signed ECDSA P-256 X.509v3 certificate for `serverCertificateHashes`. `validityDays`
 * must be 1..14 (browsers refuse longer); `notBefore` is a minute in the past.
 */
export function generateCertificate(options: { names: string[]; validityDays: number }): GeneratedCertificate {
  return native().generateCertificate(options);
}

/** SHA-256 of the DER of the first certificate of a PEM text (e.g. an operator's certificate). */
export function certificateHash(certificatePem: string): Uint8Array {
  return native().certificateHash(certificatePem);
}

export interface QuicServerOptions extends TransportOptions {
  /** IP address to bind (`0.0.0.0`, `::`, `127.0.0.1`). */
  host: string;
  /** 0: an ephemeral port (see `QuicServer.port`). */
  port: number;
  certificatePem: string;
  privateKeyPem: string;
  /** Sessions at once; requests beyond are answered 429 without asking `onSessionRequest`. */
  maxSessions: number;
  /** Connections in handshake or awaiting `acceptSession`/`rejectSession` at once; more are refused. */
  maxPendingSessions: number;
  /**
   * Address validation: while at least this many connections are pending, a connection attempt
   * from an address not yet validated is answered with a stateless Retry (one more round trip for
   * the client; a forged source gets no state and a reply smaller than its Initial). 0: always.
   * Default: a quarter of `maxPendingSessions`.
   */
  retryAbovePendingSessions?: number;
  /** QUIC handshake plus the CONNECT request (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Time `onSessionRequest` has to answer before the request is rejected with 429 (default 2 s). */
  requestTimeoutMs?: number;
  /** Answer with `server.acceptSession(id)` or `server.rejectSession(id, status)`. */
  onSessionRequest: (request: SessionRequest) => void;
  /**
   * The session is open on the server (after `acceptSession`); `sendDatagram` and `sessionInfo`
   * work from here. It may come a moment after the client's connect resolved.
   */
  onSessionOpen?: (sessionId: number) => void;
  /** Each datagram is a view into a batch buffer: copy it to keep it past the next batch. */
  /** `receivedAt`: when it arrived, on performance.now()'s clock (the batch may be read later). */
  onDatagram: (sessionId: number, data: Buffer, receivedAt: number) => void;
  onSessionClosed?: (sessionId: number, code: number, reason: string) => void;
  /** The session's send buffer drained to its low-water mark (after it was above it or full). */
  onSendBufferLow?: (sessionId: number) => void;
  /** Datagrams dropped because JavaScript fell behind (more than 16 MiB waiting). */
  onDatagramsDropped?: (count: number) => void;
}

/** A WebTransport server for MUTP datagrams. Keeps the process alive until `close()`. */
export class QuicServer {
  private constructor(private readonly inner: NativeServer) {}

  /** Binds and starts accepting. Rejects on a bad certificate/key or an address in use. */
  static async listen(options: QuicServerOptions): Promise<QuicServer> {
    const n = native();
    const onEvent = (event: NativeEvent): void => {
      switch (event.kind) {
        case 'datagrams':
          if (event.dropped) options.onDatagramsDropped?.(event.dropped);
          forEachDatagram(event, options.onDatagram);
          break;
        case 'request':
          options.onSessionRequest({
            sessionId: event.sessionId,
            path: event.path ?? '',
            remoteAddress: event.remoteAddress ?? '',
            remotePort: event.remotePort ?? 0,
          });
          break;
        case 'open':
          options.onSessionOpen?.(event.sessionId);
          break;
        case 'closed':
          options.onSessionClosed?.(event.sessionId, event.code ?? 0, event.reason ?? '');
          break;
        case 'low':
          options.onSendBufferLow?.(event.sessionId);
          break;
      }
    };
    const inner = n.listen(
      {
        host: options.host,
        port: options.port,
        certificatePem: options.certificatePem,
        privateKeyPem: options.privateKeyPem,
        maxSessions: options.maxSessions,
        maxPendingSessions: options.maxPendingSessions,
        retryAbovePendingSessions: options.retryAbovePendingSessions,
        handshakeTimeoutMs: options.handshakeTimeoutMs,
        requestTimeoutMs: options.requestTimeoutMs,
        transport: nativeTransport(options),
        rate: options.rate,
      },
      onEvent,
    );
    return new QuicServer(inner);
  }

  /** The bound UDP port. */
  get port(): number {
    return this.inner.port;
  }

  /** Retry packets sent so far (address validation asked of a connection attempt). */
  get retriesSent(): number {
    return this.inner.retriesSent;
  }

  /** Sessions accepted and not closed. */
  get sessionCount(): number {
    return this.inner.sessionCount;
  }

  /** False when the request is unknown, already answered or expired. */
  acceptSession(sessionId: number): boolean {
    return this.inner.acceptSession(sessionId);
  }

  /**
   * Rejects a session request. wtransport 0.7 sends only 403, 404 and 429: 404 and 429 are sent
   * as such, 503 as 429, anything else as 403. Returns the status sent, 0 when the request is
   * unknown, already answered or expired.
   */
  rejectSession(sessionId: number, httpStatus: number): number {
    return this.inner.rejectSession(sessionId, httpStatus);
  }

  /**
   * Queues a datagram. False when the session is gone, the datagram is larger than the session's
   * `maxDatagramSize`, or the send buffer is full (then `onSendBufferLow` follows).
   */
  sendDatagram(sessionId: number, data: Uint8Array): boolean {
    return this.inner.sendDatagram(sessionId, data);
  }

  sessionInfo(sessionId: number): SessionInfo | undefined {
    return this.inner.sessionInfo(sessionId) ?? undefined;
  }

  /** Bytes in the session's datagram send buffer, 0 when it is gone (cheaper than sessionInfo). */
  bufferedBytes(sessionId: number): number {
    return this.inner.bufferedBytes(sessionId);
  }

  /** Per-session rate cap in bytes/s (e.g. the client's reported cap); 0 = none. */
  setRateCap(sessionId: number, bytesPerSecond: number): boolean {
    return this.inner.setRateCap(sessionId, bytesPerSecond);
  }

  /** `onSendBufferLow` fires when the send buffer drains to `bytes` (default: half the buffer). */
  setLowWaterMark(sessionId: number, bytes: number): boolean {
    return this.inner.setLowWaterMark(sessionId, bytes);
  }

  /** Closes the session's QUIC connection with an application error code and reason. */
  closeSession(sessionId: number, code = 0, reason = ''): boolean {
    return this.inner.closeSession(sessionId, code, reason);
  }

  /** New handshakes use this certificate; live sessions stay. Throws on a bad certificate/key. */
  reloadCertificate(certificatePem: string, privateKeyPem: string): void {
    this.inner.reloadCertificate(certificatePem, privateKeyPem);
  }

  /** Closes every session and the socket; `onSessionClosed` fires for each first. */
  close(): Promise<void> {
    return this.inner.close();
  }
}

export interface QuicClientOptions extends TransportOptions {
  /** `https://host:port/path?query`. */
  url: string;
  /**
   * SHA-256 hashes of acceptable server certificates (as browsers' `serverCertificateHashes`).
   * Absent: the certificate is validated the WebPKI way, a chain to a trusted root (the system's,
   * plus `extraRootCertificatesPem`) naming the URL's host.
   */
  serverCertificateHashes?: Uint8Array[];
  /** Roots trusted besides the system's (PEM; WebPKI validation only): a private or test CA. */
  extraRootCertificatesPem?: string;
  /** Handshake plus session request (default 10 s). */
  connectTimeoutMs?: number;
  /** `receivedAt`: when it arrived, on performance.now()'s clock (the batch may be read later). */
  onDatagram: (data: Buffer, receivedAt: number) => void;
  onClosed?: (code: number, reason: string) => void;
  onSendBufferLow?: () => void;
  /** Datagrams dropped because JavaScript fell behind: counted for all client sessions together. */
  onDatagramsDropped?: (count: number) => void;
}

export type QuicConnectErrorCode = 'refused' | 'timeout' | 'certificate' | 'url' | 'failed';

/** Why `QuicClient.connect` failed. */
export class QuicConnectError extends Error {
  constructor(
    readonly code: QuicConnectErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'QuicConnectError';
  }
}

const CONNECT_ERROR_CODES: readonly QuicConnectErrorCode[] = ['refused', 'timeout', 'certificate', 'url', 'failed'];

/** A client's WebTransport session. Keeps the process alive until it is closed. */
export class QuicSession {
  constructor(private readonly inner: NativeClient) {}

  /** As `QuicServer.sendDatagram`. */
  sendDatagram(data: Uint8Array): boolean {
    return this.inner.sendDatagram(data);
  }

  /**
   * Queues a datagram for the addon's runtime to send: this thread never waits on the
   * connection's lock (sendDatagram does, while the runtime handles packets). For a receiver's
   * small feedback: no send-buffer accounting, no `onSendBufferLow`. False when the session is
   * closed or 256 datagrams wait already; one larger than `maxDatagramSize` is dropped there, as
   * the network may drop any datagram.
   */
  queueDatagram(data: Uint8Array): boolean {
    return this.inner.queueDatagram(data);
  }

  info(): SessionInfo {
    return this.inner.info();
  }

  setRateCap(bytesPerSecond: number): void {
    this.inner.setRateCap(bytesPerSecond);
  }

  setLowWaterMark(bytes: number): void {
    this.inner.setLowWaterMark(bytes);
  }

  get closed(): boolean {
    return this.inner.closed;
  }

  /** Closes the connection; `onClosed` then fires with this code and reason. */
  close(code = 0, reason = ''): void {
    this.inner.close(code, reason);
  }
}

export const QuicClient = {
  /** Connects; rejects with a `QuicConnectError` (refusal, timeout, certificate mismatch...). */
  async connect(options: QuicClientOptions): Promise<QuicSession> {
    const n = native();
    installClientDatagrams(n);
    let sessionId: number | undefined;
    const onEvent = (event: NativeEvent): void => {
      switch (event.kind) {
        case 'closed':
          if (sessionId !== undefined) clientDatagramHandlers.delete(sessionId);
          options.onClosed?.(event.code ?? 0, event.reason ?? '');
          break;
        case 'low':
          options.onSendBufferLow?.();
          break;
      }
    };
    try {
      const inner = await n.connect(
        {
          url: options.url,
          serverCertificateHashes: options.serverCertificateHashes,
          extraRootCertificatesPem: options.extraRootCertificatesPem,
          connectTimeoutMs: options.connectTimeoutMs,
          transport: nativeTransport(options),
          rate: options.rate,
        },
        onEvent,
      );
      // Registered once the session exists: its first datagrams may wait a moment in the addon.
      sessionId = inner.sessionId;
      if (!inner.closed) clientDatagramHandlers.set(sessionId, options);
      return new QuicSession(inner);
    } catch (e) {
      // Not `instanceof Error`: the addon's errors come from the main realm (Jest runs tests in another).
      const m = (e as { message?: unknown } | undefined)?.message;
      const message = typeof m === 'string' ? m : String(e);
      const colon = message.indexOf(': ');
      const code = message.slice(0, colon) as QuicConnectErrorCode;
      if (colon > 0 && CONNECT_ERROR_CODES.includes(code)) throw new QuicConnectError(code, message.slice(colon + 2));
      throw new QuicConnectError('failed', message);
    }
  },
};
