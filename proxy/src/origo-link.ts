/**
 * The proxy's WebSocket to origo: registers (secret, name, HTTP URL, capacity, limits, modes),
 * beats every heartbeatIntervalMs with its load, and relays WebRTC signalling for client
 * connections to and from the PeerManager. Every frame from origo is validated with the shared
 * schemas. It reconnects by itself with capped exponential backoff when origo closes or restarts
 * and registers again with the proxyId origo gave it. An `error` {code: 'unauthorized'} is fatal:
 * the link stops and reports it (a wrong secret must not spin).
 *
 * Several origo instances (sharing their state) may be given: the link starts at a random one, so
 * a fleet of proxies spreads over them, and moves to the next one whenever a connection fails or
 * is lost, keeping its proxyId (and key) from one instance to the next.
 */
import {
  ByteRange,
  IceCandidate,
  MAX_SIGNAL_BYTES,
  Mode,
  origoToProxy,
  parseSignal,
  ProxyToOrigo,
  QuicEndpoint,
  SessionDescription,
  SIGNALLING_VERSION,
  StagedByProxy,
  StageHint,
  TokenPublicKey,
} from '@mutp/shared';
import type { Logger } from 'pino';
import WebSocket from 'ws';
import type { SignalSink } from './peer-manager';

export interface Load {
  activeTransfers: number;
  uploadBps: number;
  capacityBps: number;
  /** Shutting down: origo stops offering this proxy (sent only when true). */
  draining?: boolean;
  /** The QUIC certificates' hashes (current, next): origo offers clients the latest it heard. */
  quicCertificateHashes?: string[];
}

export interface OrigoLinkOptions {
  /** Origo's proxy endpoint, or the endpoints of several origo instances (tried in rotation). */
  url: string | readonly string[];
  /** This proxy's key (or origo's insecure shared dev secret). */
  secret: string;
  /** The id the key belongs to (origo --proxy-keys); absent in shared-secret mode (origo assigns one). */
  proxyId?: string;
  name: string;
  httpUrl: string;
  capacityBps: number;
  maxTransfers: number;
  modes: Mode[];
  /** The QUIC endpoint, when the proxy runs one (asked at each registration: hashes rotate). */
  quic?: () => QuicEndpoint;
  /** The public half of the key the proxy signs its METAs with (AssertionKey), for origo to publish. */
  assertionKey: string;
  /** Its region and the client prefixes that region serves (locality); origo keeps prefixes only with a region. */
  region?: string;
  regionPrefixes?: readonly string[];
  /** The optional MUTP features it declares (SourceEndpoint.declaredFeatures; docs/protocol.md §13). */
  capabilities?: readonly string[];
  logger: Logger;
  load: () => Load;
  onSignal: (message: {
    connectionId: string;
    clientId: string;
    description?: SessionDescription;
    candidate?: IceCandidate;
  }) => void;
  onConnectionClosed: (connectionId: string, reason: string) => void;
  /** A client's staging hint (answer it with sendStaged); without a handler hints are answered 'failed'. */
  onStage?: (hint: StageHint) => void;
  /** Origo found the version this proxy stated for a URL stale (a conflict's verdict). */
  onStale?: (m: { url: string; range?: ByteRange; digest: string }) => void;
  /** Origo refused the proxy for good (wrong secret): the proxy should stop. */
  onFatal: (error: Error) => void;
  /** Registered; `tokenKey` verifies client tokens (also after an origo restart with a new key). */
  onRegistered?: (proxyId: string, tokenKey: TokenPublicKey) => void;
  reconnectInitialMs?: number;
  reconnectMaxMs?: number;
  /** Gives up on a connection attempt after this long. */
  connectTimeoutMs?: number;
  /** Uniform in [0, 1): picks the first instance and jitters the backoff (tests pass a seeded one). */
  random?: () => number;
}

export type OrigoLinkState = 'connecting' | 'registering' | 'registered' | 'waiting' | 'stopped';

export interface OrigoLinkStats {
  state: OrigoLinkState;
  proxyId?: string;
  /** The origo instance the link is on (or trying), credentials stripped. */
  origo: string;
  connects: number;
  registrations: number;
  /** Moves to another origo instance after a failed or lost connection. */
  failovers: number;
  invalidFrames: number;
  signalsDropped: number;
}

/** Origo's close code for a proxy it refuses or stops accepting (origo's CLOSE.unauthorized). */
const UNAUTHORIZED_CLOSE = 4001;

/**
 * What an operator should do about origo's reason for refusing this proxy: the reason names the
 * cause (a key, an address origo will not offer, a ban), so the advice follows it rather than
 * always pointing at the key.
 */
export function refusalAdvice(reason: string): string {
  if (/^(httpUrl|quic\.url) refused/.test(reason)) {
    return (
      'Origo does not accept the address this proxy advertises: on one machine run both with --local-dev; ' +
      'on an edge VM give --advertised-http-url a public name'
    );
  }
  if (/revoked/.test(reason)) {
    return "This proxy's key was revoked: give it a new key in origo's --proxy-keys file and in --secret / MUTP_PROXY_SECRET";
  }
  if (/proven false/.test(reason)) return 'Origo will not offer this proxy until the ban ends';
  if (/secret|key|proxy id/.test(reason)) {
    return "Check --secret / MUTP_PROXY_SECRET and --proxy-id / MUTP_PROXY_ID against origo's --proxy-keys file";
  }
  return 'Origo refuses to register this proxy';
}

export class OrigoLinkError extends Error {
  override readonly name = 'OrigoLinkError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export class OrigoLink implements SignalSink {
  private ws?: WebSocket;
  private currentState: OrigoLinkState = 'stopped';
  private id?: string;
  private attempt = 0;
  private reconnectTimer?: NodeJS.Timeout;
  private heartbeatTimer?: NodeJS.Timeout;
  private lastHeardAt = 0;
  private stopped = true;
  private readonly log: Logger;
  private readonly counters = { connects: 0, registrations: 0, failovers: 0, invalidFrames: 0, signalsDropped: 0 };
  private readonly urls: readonly string[];
  private readonly random: () => number;
  /** The instance (index in `urls`) the current or next connection goes to. */
  private current: number;

  constructor(private readonly options: OrigoLinkOptions) {
    this.log = options.logger.child({ component: 'origo' });
    this.id = options.proxyId;
    this.urls = typeof options.url === 'string' ? [options.url] : [...options.url];
    if (this.urls.length === 0) throw new Error('OrigoLink needs at least one origo URL');
    this.random = options.random ?? Math.random;
    this.current = Math.min(this.urls.length - 1, Math.floor(this.random() * this.urls.length));
  }

  get state(): OrigoLinkState {
    return this.currentState;
  }

  get proxyId(): string | undefined {
    return this.id;
  }

  /** The origo instance the link is on (or trying next). */
  get origoUrl(): string {
    return this.urls[this.current];
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  /** Closes the socket and stops reconnecting. */
  async close(): Promise<void> {
    this.stopped = true;
    this.currentState = 'stopped';
    clearTimeout(this.reconnectTimer);
    this.stopHeartbeat();
    const ws = this.ws;
    this.ws = undefined;
    if (!ws) return;
    if (ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        ws.terminate();
        resolve();
      }, 1000);
      ws.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1001, 'proxy shutting down');
    });
  }

  /** Sends a heartbeat with the current load now, not at the next beat (e.g. draining began). */
  heartbeatNow(): void {
    if (this.currentState === 'registered') this.send({ type: 'heartbeat', ...this.options.load() });
  }

  stats(): OrigoLinkStats {
    return { state: this.currentState, proxyId: this.id, origo: shownUrl(this.origoUrl), ...this.counters };
  }

  // ---------------------------------------------------------------- SignalSink

  signal(message: { connectionId: string; description?: SessionDescription; candidate?: IceCandidate }): void {
    this.send({ type: 'signal', ...message });
  }

  connectionClosed(connectionId: string, reason: string): void {
    this.send({ type: 'connection-closed', connectionId, reason: reason.slice(0, 256) });
  }

  // ---------------------------------------------------------------- connection

  private connect(): void {
    if (this.stopped) return;
    this.currentState = 'connecting';
    this.counters.connects++;
    const url = this.origoUrl;
    this.log.debug({ origo: shownUrl(url) }, 'connecting to origo');
    const ws = new WebSocket(url, {
      maxPayload: MAX_SIGNAL_BYTES,
      handshakeTimeout: this.options.connectTimeoutMs ?? 10_000,
      perMessageDeflate: false,
    });
    this.ws = ws;
    ws.on('open', () => {
      if (ws !== this.ws) return;
      this.currentState = 'registering';
      this.lastHeardAt = performance.now();
      this.send({
        type: 'register',
        version: SIGNALLING_VERSION,
        secret: this.options.secret,
        ...(this.id ? { proxyId: this.id } : {}),
        name: this.options.name,
        httpUrl: this.options.httpUrl,
        capacityBps: this.options.capacityBps,
        maxTransfers: this.options.maxTransfers,
        modes: this.options.modes,
        ...(this.options.quic ? { quic: this.options.quic() } : {}),
        assertionKey: this.options.assertionKey,
        ...(this.options.region !== undefined ? { region: this.options.region } : {}),
        ...(this.options.region !== undefined && this.options.regionPrefixes?.length
          ? { prefixes: [...this.options.regionPrefixes] }
          : {}),
        ...(this.options.capabilities ? { capabilities: [...this.options.capabilities] } : {}),
      });
    });
    ws.on('message', (data: WebSocket.RawData, isBinary: boolean) => {
      if (ws !== this.ws) return;
      this.lastHeardAt = performance.now();
      if (isBinary) {
        this.counters.invalidFrames++;
        return;
      }
      this.onFrame(data.toString());
    });
    ws.on('pong', () => {
      if (ws === this.ws) this.lastHeardAt = performance.now();
    });
    ws.on('error', (e) => {
      // 'close' follows; keep the log quiet while origo is simply down.
      this.log.debug({ err: e.message }, 'origo socket error');
    });
    ws.on('close', (code, reason) => {
      if (ws !== this.ws) return;
      this.ws = undefined;
      this.stopHeartbeat();
      if (this.stopped) return;
      this.log.warn({ code, reason: reason.toString(), origo: shownUrl(url) }, 'origo connection closed');
      // Refused without its error frame (lost, or from another origo version): as fatal, on its close reason.
      if (code === UNAUTHORIZED_CLOSE) return this.refused(reason.toString() || 'unauthorized');
      this.moveOn();
      this.scheduleReconnect();
    });
  }

  /** After a failed or lost connection: the next instance gets the next attempt. */
  private moveOn(): void {
    if (this.urls.length === 1) return;
    this.current = (this.current + 1) % this.urls.length;
    this.counters.failovers++;
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    this.currentState = 'waiting';
    const initial = this.options.reconnectInitialMs ?? 500;
    // 5 s, not more: a restarted origo offers only the proxies that registered since (issue 34), so
    // each second of a proxy's back-off after origo's return is a second its clients go without it.
    // A refused connection costs origo nothing; the jitter below spreads a fleet's return.
    const max = this.options.reconnectMaxMs ?? 5_000;
    // The backoff grows once per round over every instance: the others are tried promptly when
    // one dies, and a fleet does not hammer origo while all of them are down.
    const round = Math.floor(this.attempt / this.urls.length);
    const base = Math.min(max, initial * 2 ** Math.min(round, 20));
    this.attempt++;
    // Jitter so a fleet of proxies does not reconnect in lockstep after an origo restart.
    const delay = Math.round(base * (0.5 + 0.5 * this.random()));
    this.log.info({ delayMs: delay, attempt: this.attempt, origo: shownUrl(this.origoUrl) }, 'reconnecting to origo');
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
  }

  private onFrame(frame: string): void {
    const parsed = parseSignal(origoToProxy, frame);
    if (!parsed.ok) {
      this.counters.invalidFrames++;
      this.log.warn({ error: parsed.error }, 'invalid message from origo');
      return;
    }
    const m = parsed.value;
    switch (m.type) {
      case 'registered': {
        const first = this.counters.registrations === 0;
        if (this.id !== undefined && this.id !== m.proxyId)
          this.log.warn({ was: this.id, now: m.proxyId }, 'origo assigned a new proxyId');
        this.id = m.proxyId;
        this.attempt = 0;
        this.counters.registrations++;
        this.currentState = 'registered';
        this.log.info(
          { proxyId: m.proxyId, first, origo: shownUrl(this.origoUrl), instance: this.current },
          'registered with origo',
        );
        this.startHeartbeat(m.heartbeatIntervalMs);
        this.options.onRegistered?.(m.proxyId, m.tokenKey);
        break;
      }
      case 'signal':
        this.options.onSignal(m);
        break;
      case 'connection-closed':
        this.options.onConnectionClosed(m.connectionId, m.reason);
        break;
      case 'stage':
        if (this.options.onStage) this.options.onStage(m);
        else {
          this.sendStaged({
            type: 'staged',
            clientId: m.clientId,
            requestId: m.requestId,
            status: 'failed',
            originMs: 0,
            cached: false,
            bytes: 0,
            error: 'not-staging',
          });
        }
        break;
      case 'stale':
        this.options.onStale?.(m);
        break;
      case 'error':
        if (m.code === 'unauthorized') {
          this.refused(m.message);
        } else {
          this.log.warn({ code: m.code, message: m.message }, 'error from origo');
        }
        break;
    }
  }

  /** Origo refuses this proxy (`error unauthorized`, or a 4001 close): fatal, with origo's reason and what to do. */
  private refused(reason: string): void {
    if (this.stopped) return;
    const advice = refusalAdvice(reason);
    this.log.fatal({ code: 'unauthorized', message: reason, advice }, 'origo refused this proxy (unauthorized)');
    void this.close();
    this.options.onFatal(new OrigoLinkError('unauthorized', `origo refused this proxy: ${reason}. ${advice}`));
  }

  private startHeartbeat(intervalMs: number): void {
    this.stopHeartbeat();
    const beat = () => {
      const ws = this.ws;
      if (!ws || ws.readyState !== WebSocket.OPEN) return;
      // Origo silent for three intervals (no message, no pong): the link is dead, start over.
      if (performance.now() - this.lastHeardAt > 3 * intervalMs + 1000) {
        this.log.warn('origo silent, reconnecting');
        ws.terminate();
        return;
      }
      const load = this.options.load();
      this.send({ type: 'heartbeat', ...load });
      ws.ping();
    };
    this.heartbeatTimer = setInterval(beat, intervalMs);
    beat();
  }

  private stopHeartbeat(): void {
    clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
  }

  /** A hint's outcome; dropped when origo is not connected (the client's wait for it times out). */
  sendStaged(answer: StagedByProxy): void {
    this.send(answer);
  }

  private send(message: ProxyToOrigo): void {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) {
      if (message.type === 'signal' || message.type === 'connection-closed') this.counters.signalsDropped++;
      return;
    }
    ws.send(JSON.stringify(message));
  }
}

/** A URL for logs and stats: no user name or password, should one be in it. */
function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.href;
  } catch {
    return url;
  }
}
