/**
 * The client orchestration the Node CLI and the browser extension share: an origo session, a
 * pool of proxy connections, one MUTP (or Parallel HTTP) download per object, and a record of
 * each download sent to origo.
 *
 * With several origo instances (sharing state) the session goes to one of them, picked at random
 * at first (clients spread over the instances) and kept while it works; a failed connect or a
 * lost session moves it to the next one, presenting the token of the last session so the client
 * keeps its id. A download that loses origo before its proxies are connected retries on the next
 * instance; once connected it no longer needs origo.
 *
 * With a back-off policy (the extension sets one), a connection attempt that fails on every
 * instance marks origo down for a while (origo-backoff.ts): requests in that period fail at once
 * with 'origo-down' instead of each trying again. The attempt belongs to the client, not to the
 * request that started it: it runs to its own timeout even when every caller gave up, so a hung
 * origo is marked down however impatient the callers are.
 */
import {
  ByteRange,
  Codec,
  DEFAULT_GENERATION_SIZE,
  DEFAULT_RECEIVER_CONFIG,
  failedStage,
  DEFAULT_SCHEDULER,
  DEFAULT_SYMBOL_SIZE,
  DownloadRecord,
  Mode,
  PollutionKind,
  ProxyInfo,
  SchedulerName,
  StageLayout,
  StagedAnswer,
  windowForPath,
  WithdrawReason,
} from '..';
import { DownloadProgress, DownloadResult, runDownload } from './download';
import { sha256 } from '@noble/hashes/sha256';
import { ClientError } from './errors';
import { ClientHost } from './host';
import { HttpDownloadResult, runHttpDownload } from './http-download';
import { BackoffPolicy, describeDown, OrigoBackoff, OrigoDown } from './origo-backoff';
import { OrigoSession } from './origo-session';
import { LinkTransport, openQuicTransport, openWebRtcTransport } from './link-transport';
import { openPreferringQuic, TransportPreference } from './transport-choice';
import { ProxyLink, RetrySoon, TransportConnector } from './proxy-link';

export type DownloadMode = 'http' | Mode;

const why = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** Each attempt to reconnect a source lost mid-download gets this long (they repeat until the stall timeout). */
const RECONNECT_ATTEMPT_MS = 5000;
/**
 * After a disconnection origo has this long to answer a ping on the open session; when it does
 * not, a new session is made (a socket that sat through the gap can hold its messages for seconds
 * after the network is back, in TCP's retransmission back-off, while a new one goes through).
 */
const ORIGO_PROBE_MS = 1500;
/**
 * A new origo session while reconnecting gets this long, plus a second per failed attempt: short,
 * so a connection begun in the gap (whose SYN backs off) is soon replaced by one that starts after
 * it; growing, so a slow path still gets through.
 */
const RECONNECT_ORIGO_MS = 2000;
/** Between two attempts to reach origo while reconnecting. */
const RECONNECT_ORIGO_RETRY_MS = 250;
/**
 * Tries per proxy connection. libdatachannel 0.24 (node-datachannel 0.33.4) loses about one
 * handshake in a hundred to races in its DTLS start (libdatachannel #1632, node-datachannel #443;
 * fixed upstream, not released), and such a failure comes within milliseconds, sometimes twice
 * in a row: a fast failure is tried again up to this many times in all. A connection that times
 * out is tried once more only (the proxy may simply be unreachable: each try costs the timeout).
 */
const LINK_ATTEMPTS = 3;
/** A proxy whose QUIC endpoint failed is reached over WebRTC alone for this long (no head start wasted). */
const QUIC_FAILURE_MEMORY_MS = 60_000;
/** A proxy that could not be reached is not asked for again for this long. */
const FAILED_PROXY_EXCLUSION_MS = 60_000;
/** A proxy that polluted a download is not asked for again by this client for an hour. */
const POLLUTER_EXCLUSION_MS = 60 * 60_000;
/**
 * A proxy origo withdrew (`withdrawn`: draining, reported, revoked) is kept out of this client's
 * downloads this long; origo itself no longer offers it. At most this many are remembered.
 */
const WITHDRAWN_EXCLUSION_MS = 10 * 60_000;
const MAX_WITHDRAWN = 256;

export interface ClientConfig {
  /** origo's client endpoint, e.g. ws://127.0.0.1:8700/v1/client (or several: `origoUrls`). */
  origoUrl?: string;
  /** The client endpoints of several origo instances sharing state (after `origoUrl` if both are given). */
  origoUrls?: readonly string[];
  codecs: Record<Mode, Codec>;
  /**
   * The strict window in packets, or 'path': sized from what earlier transfers measured of these
   * proxies (window-size.ts; DEFAULT_WINDOW until a transfer has).
   */
  window: number | 'path';
  generationSize: number;
  symbolSize: number;
  connectTimeoutMs: number;
  /** How long origo gets to welcome the client or answer it; a silent instance is then left for the next. */
  origoTimeoutMs: number;
  maxObjectBytes: number;
  /**
   * A download with no progress for this long fails; it is also the longest disconnection a
   * download survives and resumes from (the Receiver keeps what it decoded meanwhile).
   * Default: the Receiver's (15 s).
   */
  stallTimeoutMs?: number;
  /** Diagnostics: one line per connection event (a link lost, a reconnection tried, made or given up). */
  trace?: (line: string) => void;
  /** Accept a plain ws:// origo on a non-loopback host (a man in the middle could inject proxies). */
  insecureOrigo?: boolean;
  /** Send a record of every download to origo. */
  records: boolean;
  /** Leave origo alone for a growing while after a failed connection attempt (default: no back-off). */
  origoBackoff?: BackoffPolicy;
  /** How a URL appears in those records (the extension keeps origin + path: no signed tokens). Default: as it is. */
  recordUrl?: (url: string) => string;
  /**
   * Which transport proxy links use: 'auto' (QUIC where the proxy offers it and the host can open
   * it, WebRTC beside it after a head start or a failure: transport-choice.ts), 'quic' (only QUIC:
   * proxies without it cannot be reached), 'webrtc' (never QUIC). Default 'auto'.
   */
  transport?: TransportPreference;
}

export const DEFAULT_CLIENT_CONFIG = {
  window: 'path' as const,
  generationSize: DEFAULT_GENERATION_SIZE,
  symbolSize: DEFAULT_SYMBOL_SIZE,
  connectTimeoutMs: 10_000,
  origoTimeoutMs: 10_000,
  maxObjectBytes: 256 * 1024 * 1024,
  records: true,
};

export interface GetOptions {
  mode: DownloadMode;
  proxies: number;
  scheduler?: SchedulerName;
  /** Proxy ids not to use (besides the ones that failed recently). */
  exclude?: string[];
  /**
   * Download through these proxies (from chooseProxies: the set the object was staged at);
   * origo is asked only for replacements of those that cannot be reached.
   */
  use?: readonly ProxyInfo[];
  /** Only these bytes of the resource: proxies fetch just them from the origin (see range.ts). */
  range?: ByteRange;
  signal?: AbortSignal;
  /**
   * Shorter limits for this request (the caller has a deadline): for origo (connection attempt
   * including the welcome, and its answer to a proxy request) and for each proxy connection. The
   * client's own `origoTimeoutMs` and `connectTimeoutMs` stay the upper bounds.
   */
  origoTimeoutMs?: number;
  connectTimeoutMs?: number;
  onProgress?: (progress: DownloadProgress) => void;
  /**
   * 'unchecked' only to measure what integrity costs (bench:e2e --integrity-baseline): the
   * download believes the first proxy and checks nothing (ReceiverConfig.integrity). No product
   * path sets it.
   */
  integrity?: 'checked' | 'unchecked';
}

interface Limits {
  origoMs: number;
  connectMs: number;
}

export type GetResult = DownloadResult | HttpDownloadResult;

/** What a MutpClient needs at least: codecs and one origo URL, as `origoUrl` or in `origoUrls`. */
export type ClientOptions = Partial<Omit<ClientConfig, 'origoUrl' | 'origoUrls'>> &
  Pick<ClientConfig, 'codecs'> &
  ({ origoUrl: string; origoUrls?: readonly string[] } | { origoUrl?: string; origoUrls: readonly string[] });

/** The origo URLs of a config in the order tried, duplicates dropped. */
export function origoUrlsOf(config: Pick<ClientConfig, 'origoUrl' | 'origoUrls'>): string[] {
  const all = [...(config.origoUrl !== undefined ? [config.origoUrl] : []), ...(config.origoUrls ?? [])];
  return all.filter((url, i) => all.indexOf(url) === i);
}

export class MutpClient {
  private session?: OrigoSession;
  private readonly config: ClientConfig;
  /** Live connections by proxy id, reused across downloads. */
  private readonly links = new Map<string, ProxyLink>();
  private connecting?: Promise<OrigoSession>;
  private readonly origoUrls: readonly string[];
  /** The origo instance (index in origoUrls) the next session goes to. */
  private nextOrigo: number;
  /** The token of the last session that had one: presented to whichever instance comes next. */
  private token?: string;
  /** Per-proxy tokens (OrigoSession.tokenFor), kept across sessions. */
  private readonly proxyTokens = new Map<string, string>();
  private readonly pendingLinks = new Map<string, Promise<ProxyLink>>();
  private nextLink = 0;
  /** Proxies whose QUIC endpoint failed, by when: WebRTC alone for a while. */
  private readonly quicFailedAt = new Map<string, number>();
  /** Proxies that failed to connect, by when; excluded when asking origo for a while. */
  private readonly failedAt = new Map<string, number>();
  /** Proxies a download excluded as polluters, by when; not asked for again for a long while. */
  private readonly pollutedAt = new Map<string, number>();
  /** Proxies origo withdrew, by when (insertion order: the oldest is forgotten first). */
  private readonly withdrawnAt = new Map<string, number>();
  private readonly leavingListeners = new Set<(proxyId: string) => void>();
  private readonly backoff?: OrigoBackoff;
  /** The origo check after a disconnection, shared by the links reconnecting at once. */
  private probing?: Promise<OrigoSession>;
  /** Ends the host's network-change notices (close()). */
  private readonly stopNetworkWatch?: () => void;

  constructor(
    private readonly host: ClientHost,
    config: ClientOptions,
  ) {
    this.config = { ...DEFAULT_CLIENT_CONFIG, ...config };
    this.origoUrls = origoUrlsOf(config);
    if (this.origoUrls.length === 0) throw new TypeError('MutpClient needs an origo URL');
    this.nextOrigo = (host.random() >>> 0) % this.origoUrls.length;
    if (this.config.origoBackoff) this.backoff = new OrigoBackoff(this.config.origoBackoff, host.clock);
    this.stopNetworkWatch = host.onNetworkChange?.(() => this.networkChanged());
  }

  /**
   * The host's network changed (Wi-Fi to cellular, a new address). Connections bound to the old
   * address are dead, but would take seconds of silence to be judged so: every proxy link and the
   * origo session are closed now. Downloads under way reconnect at once and resume with what they
   * decoded (a segment cannot finish on dead links, so this is the one handoff made mid-segment);
   * proxies that failed on the old network may be tried again.
   */
  networkChanged(): void {
    this.config.trace?.('network changed: reconnecting to origo and the proxies');
    this.failedAt.clear();
    // Links with transfers under way reconnect on their own; idle ones close.
    for (const link of this.links.values()) link.transportLost('network changed');
    // Not a lost instance: the next session goes to the same one.
    this.dropSession('network changed');
  }

  /** Closes every proxy link and the origo session, keeping the token for the next session. */
  private dropConnections(reason?: string): void {
    const links = [...this.links.values()];
    this.links.clear();
    for (const link of links) link.close(reason);
    this.dropSession(reason);
  }

  private dropSession(reason?: string): void {
    const session = this.session;
    this.token = session?.token ?? this.token;
    this.session = undefined;
    session?.close(reason);
  }

  /** Undefined unless origo is in its back-off period (it is then not tried until it ends). */
  origoDown(): OrigoDown | undefined {
    if (this.session?.isOpen || this.connecting) return undefined;
    return this.backoff?.down();
  }

  /**
   * Opens the origo session now, unless it is open, being opened or in its back-off period, so the
   * first download does not wait for the handshake (a page about to play calls this). A failure
   * counts like any attempt (back-off included); it never rejects.
   */
  prepare(timeoutMs = this.config.origoTimeoutMs): void {
    if (this.session?.isOpen || this.connecting || this.backoff?.down()) return;
    this.origo(Math.min(timeoutMs, this.config.origoTimeoutMs)).catch(() => undefined);
  }

  /** The origo instance the client is on (or tries next). */
  get origoUrl(): string {
    return this.session?.url ?? this.origoUrls[this.nextOrigo];
  }

  /**
   * The origo session, opened (again) when needed: origo may restart between downloads. Each
   * instance is tried once, from the one the last session was on (or the one after it, when that
   * session was lost), until one welcomes the client.
   */
  private origo(timeoutMs: number): Promise<OrigoSession> {
    if (this.session?.isOpen) return Promise.resolve(this.session);
    // Concurrent downloads share one connection attempt.
    if (this.connecting) return this.connecting;
    const down = this.backoff?.down();
    if (down) return Promise.reject(new ClientError('origo-down', describeDown(down)));
    const lost = this.session;
    this.token = lost?.token ?? this.token;
    this.session = undefined;
    lost?.close();
    const attempt = this.openSession(timeoutMs).then(
      (session) => {
        this.backoff?.succeeded();
        return session;
      },
      (e: unknown) => {
        this.backoff?.failed(causeOf(e));
        throw e;
      },
    );
    this.connecting = attempt;
    void attempt.then(
      () => this.clearConnecting(attempt),
      () => this.clearConnecting(attempt),
    );
    return attempt;
  }

  private async openSession(timeoutMs: number): Promise<OrigoSession> {
    const errors: unknown[] = [];
    for (let tried = 0; tried < this.origoUrls.length; tried++) {
      const index = this.nextOrigo;
      const session = new OrigoSession(
        this.origoUrls[index],
        this.host.webSocket,
        this.host.clock,
        timeoutMs,
        this.token,
        this.config.insecureOrigo,
        this.proxyTokens,
      );
      session.onWithdrawn = (proxyId, reason) => this.withdrawn(proxyId, reason);
      try {
        await session.connect();
      } catch (e) {
        errors.push(e);
        this.nextOrigo = (index + 1) % this.origoUrls.length;
        continue;
      }
      session.onClose = () => {
        // Lost while in use (not replaced, not closed by us): the next session tries the next instance.
        if (this.session !== session) return;
        this.token = session.token ?? this.token;
        this.nextOrigo = (index + 1) % this.origoUrls.length;
      };
      this.session = session;
      return session;
    }
    if (errors.length === 1) throw errors[0];
    const reasons = errors.map((e) => (e instanceof Error ? e.message : String(e)));
    throw new ClientError('origo-unreachable', `no origo instance answered: ${reasons.join('; ')}`);
  }

  /**
   * Runs `step` on an origo session. When the session is lost under it (origo died or stopped
   * answering), `step` runs again on a new session, on the next instance, while attempts remain;
   * any other failure is the answer. The abort signal is honoured at every wait, and nothing new
   * starts once it has fired.
   */
  private async withOrigo<T>(
    signal: AbortSignal | undefined,
    limits: Limits,
    step: (session: OrigoSession) => Promise<T>,
  ): Promise<T> {
    const attempts = Math.max(2, this.origoUrls.length);
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw cancelledError();
      const session = await unlessAborted(this.origo(limits.origoMs), signal);
      try {
        return await unlessAborted(step(session), signal);
      } catch (e) {
        if (session.isOpen || signal?.aborted || attempt >= attempts) throw e;
      }
    }
  }

  private clearConnecting(attempt: Promise<OrigoSession>): void {
    if (this.connecting === attempt) this.connecting = undefined;
  }

  /** Downloads `url` through `proxies` proxies in `mode`; rejects with a ClientError. */
  async get(url: string, o: GetOptions): Promise<GetResult> {
    const mode = o.mode;
    const limits = this.limitsFor(o);
    if (mode === 'http') {
      const { session, proxies } = await this.withOrigo(o.signal, limits, async (session) => ({
        session,
        proxies:
          o.use !== undefined && o.use.length > 0
            ? o.use.slice(0, o.proxies)
            : await session.requestProxies(
                o.proxies,
                'uncoded',
                [...this.avoided(), ...(o.exclude ?? [])],
                limits.origoMs,
              ),
      }));
      if (proxies.length === 0) throw new ClientError('no-proxies', 'origo has no proxy to offer');
      const result = await runHttpDownload(proxies, url, this.host.fetch, this.host.clock, {
        range: o.range,
        signal: o.signal,
        maxBytes: this.config.maxObjectBytes,
        sha256: this.host.sha256 ?? sha256,
        tokenFor: (proxy) => session.tokenFor(proxy),
      });
      this.report(session, url, 'http', result, undefined, proxies.length);
      return result;
    }
    const { session, links } = await this.withOrigo(o.signal, limits, async (session) => ({
      session,
      links: await this.connect(session, o.proxies, mode, o.exclude ?? [], limits, o.use),
    }));
    const scheduler = o.scheduler ?? DEFAULT_SCHEDULER[mode];
    try {
      const result = await runDownload(links, this.host.clock, {
        url,
        mode,
        scheduler,
        window: this.windowFor(links),
        generationSize: this.config.generationSize,
        symbolSize: this.config.symbolSize,
        codec: this.config.codecs[mode],
        // 0 is the connection's own id (CONNECTION_TRANSFER_ID), never a transfer's.
        transferId: this.host.random() >>> 0 || 1,
        range: o.range,
        signal: o.signal,
        sha256: this.host.sha256 ?? sha256,
        verifySignature: this.host.verifySignature,
        receiverConfig: {
          maxObjectBytes: this.config.maxObjectBytes,
          ...(this.config.stallTimeoutMs !== undefined ? { stallTimeoutMs: this.config.stallTimeoutMs } : {}),
          ...(o.integrity ? { integrity: o.integrity } : {}),
        },
        onProgress: o.onProgress,
        onPolluters: (polluters) => this.onPolluters(session, polluters),
        onConflict: (statements) => this.onConflict(session, url, o.range, statements),
      });
      this.report(session, url, mode, result, scheduler, links.length);
      return result;
    } catch (e) {
      const error = e instanceof ClientError ? e : new ClientError('download-failed', String(e));
      this.reportFailure(session, url, mode, scheduler, links, error);
      throw error;
    }
  }

  /**
   * Up to `count` proxies for `mode` chosen by origo, none of `exclude` nor recently failed: a
   * set to stage objects at (stage()) and then download them from (GetOptions.use), so staged
   * objects are fetched from the proxies that hold them.
   */
  async chooseProxies(
    count: number,
    mode: DownloadMode,
    o: Pick<GetOptions, 'exclude' | 'signal' | 'origoTimeoutMs'> = {},
  ): Promise<ProxyInfo[]> {
    const limits = this.limitsFor(o);
    const proxies = await this.withOrigo(o.signal, limits, (session) =>
      session.requestProxies(
        count,
        mode === 'http' ? 'uncoded' : mode,
        [...this.avoided(), ...(o.exclude ?? [])],
        limits.origoMs,
      ),
    );
    if (proxies.length === 0) throw new ClientError('no-proxies', 'origo has no proxy to offer');
    return proxies;
  }

  /**
   * Staging hint (SoftStage): asks `proxies` to fetch `url` (or `range` of it) from its origin
   * into their caches now, so a later download of it does not wait for the origin. Resolves with
   * each proxy's answer (staged with its origin fetch time, or failed and why); never rejects: a
   * hint that cannot be sent comes back failed ('no-session', 'timeout'). With `mode` (the mode the
   * object will be downloaded in) the hint carries this client's layout for it, and the proxies
   * also prepare the object's encoder (wirehair solves its code before the first packet).
   */
  async stage(
    url: string,
    proxies: readonly (ProxyInfo | string)[],
    o: { range?: ByteRange; timeoutMs?: number; mode?: DownloadMode } = {},
  ): Promise<StagedAnswer[]> {
    const ids = proxies.map((p) => (typeof p === 'string' ? p : p.proxyId));
    let session: OrigoSession | undefined;
    try {
      session = await this.origo(this.config.origoTimeoutMs);
    } catch {
      session = undefined;
    }
    const timeoutMs = o.timeoutMs ?? this.config.origoTimeoutMs;
    if (session === undefined) {
      return ids.map((proxyId) => failedStage('none', proxyId, 'no-session'));
    }
    const layout: StageLayout | undefined =
      o.mode !== undefined && o.mode !== 'http'
        ? { mode: o.mode, symbolSize: this.config.symbolSize, generationSize: this.config.generationSize }
        : undefined;
    return session.stage(url, ids, o.range, timeoutMs, layout);
  }

  /**
   * One attempt at a new transport to `proxy` after its link was lost mid-download (a
   * disconnection, a network change); the link's endpoint repeats attempts, backing off, until
   * its transfers' stall timeout. Origo comes first, checked (liveOrigo): the signalling goes
   * through it, and its answer says the network is back. An origo that does not answer yet is
   * tried again soon, each time with a second more.
   */
  private reconnector(proxy: ProxyInfo): TransportConnector {
    let origoFailures = 0;
    return async (timeoutMs) => {
      let session: OrigoSession;
      try {
        session = await this.liveOrigo(Math.min(this.config.origoTimeoutMs, RECONNECT_ORIGO_MS + 1000 * origoFailures));
      } catch (e) {
        origoFailures++;
        throw new RetrySoon(`origo not reachable yet: ${why(e)}`, RECONNECT_ORIGO_RETRY_MS);
      }
      origoFailures = 0;
      return this.openTransport(session, proxy, timeoutMs);
    };
  }

  /** A transport to `proxy` by the configured preference (QUIC first where it can be had). */
  private openTransport(session: OrigoSession, proxy: ProxyInfo, timeoutMs: number): Promise<LinkTransport> {
    const clock = this.host.clock;
    const preference = this.config.transport ?? 'auto';
    const webrtc = () => openWebRtcTransport(session, this.host.rtc, proxy, this.connectionId(), clock, timeoutMs);
    const quicOpener = this.host.quic;
    const token = session.tokenFor(proxy);
    if (preference === 'webrtc') return webrtc();
    if (proxy.quic === undefined || quicOpener === undefined || token === undefined) {
      if (preference === 'auto') return webrtc();
      const why = proxy.quic === undefined ? 'it offers no QUIC endpoint' : 'this client cannot open QUIC';
      return Promise.reject(new ClientError('connect-failed', `proxy ${proxy.name}: ${why}`));
    }
    const quic = () =>
      openQuicTransport(quicOpener, proxy, token, clock, timeoutMs).catch((e: unknown) => {
        this.quicFailedAt.set(proxy.proxyId, clock.now());
        this.config.trace?.(`${proxy.name}: QUIC failed (${why(e)})`);
        throw e;
      });
    if (preference === 'quic') return quic();
    const failedAt = this.quicFailedAt.get(proxy.proxyId);
    if (failedAt !== undefined && clock.now() - failedAt < QUIC_FAILURE_MEMORY_MS) return webrtc();
    this.quicFailedAt.delete(proxy.proxyId);
    return openPreferringQuic(quic, webrtc, clock);
  }

  private connectionId(): string {
    return `c${(this.host.random() >>> 0).toString(36)}${this.nextLink++}`;
  }

  /**
   * Whether origo answers a ping on the open session now (without one there is nothing to tell:
   * true). A session that does not answer is closed, as liveOrigo would: the reconnection that
   * follows opens a new one at once instead of pinging this stuck one again.
   */
  private async origoAnswers(): Promise<boolean> {
    const session = this.session;
    if (!session?.isOpen) return true;
    if (await session.ping(ORIGO_PROBE_MS)) return true;
    this.config.trace?.(`origo: no answer to a ping within ${ORIGO_PROBE_MS} ms, the network is down`);
    if (this.session === session) session.close(`no answer to a ping within ${ORIGO_PROBE_MS} ms`);
    return false;
  }

  /**
   * The origo session after a disconnection, known to work: the open one if origo answers a
   * ping within ORIGO_PROBE_MS, else a new one within `timeoutMs`. Links reconnecting at the
   * same time share one check.
   */
  private liveOrigo(timeoutMs: number): Promise<OrigoSession> {
    if (this.probing) return this.probing;
    const probe = (async () => {
      const current = this.session;
      if (current?.isOpen) {
        if (await current.ping(ORIGO_PROBE_MS)) return current;
        this.config.trace?.(`origo: no answer to a ping within ${ORIGO_PROBE_MS} ms, opening a new session`);
        if (this.session === current) current.close(`no answer to a ping within ${ORIGO_PROBE_MS} ms`);
      }
      return this.origo(timeoutMs);
    })();
    this.probing = probe;
    const clear = () => {
      if (this.probing === probe) this.probing = undefined;
    };
    void probe.then(clear, clear);
    return probe;
  }

  /** The client's limits, shortened by the request's own. */
  private limitsFor(o: Pick<GetOptions, 'origoTimeoutMs' | 'connectTimeoutMs'>): Limits {
    const shorter = (own: number, asked: number | undefined) =>
      asked !== undefined && Number.isFinite(asked) && asked > 0 ? Math.min(own, asked) : own;
    return {
      origoMs: shorter(this.config.origoTimeoutMs, o.origoTimeoutMs),
      connectMs: shorter(this.config.connectTimeoutMs, o.connectTimeoutMs),
    };
  }

  /** `count` live links (fewer if origo has fewer proxies), reusing open ones. */
  private async connect(
    session: OrigoSession,
    count: number,
    mode: Mode,
    excluded: string[],
    limits: Limits,
    preferred: readonly ProxyInfo[] = [],
  ): Promise<ProxyLink[]> {
    for (const [id, link] of this.links) if (link.state === 'closed') this.links.delete(id);
    const chosen: ProxyLink[] = [];
    const failed: string[] = [];
    // Why each proxy could not be reached, for the error when none could.
    const reasons: string[] = [];
    const note = (r: PromiseRejectedResult) => reasons.push(why(r.reason));
    const leaving = new Set(this.leavingProxies());
    // Going away: origo is asked for others in their place, as for proxies that cannot be reached.
    const staying = preferred.filter((p) => !leaving.has(p.proxyId));
    if (staying.length > 0) {
      const wanted = staying.slice(0, count);
      const opened = await Promise.allSettled(wanted.map((proxy) => this.linkTo(session, proxy, limits.connectMs)));
      if (!session.isOpen) throw new ClientError('origo-unreachable', 'origo was lost while connecting to proxies');
      opened.forEach((r, i) => {
        if (r.status === 'fulfilled') chosen.push(r.value);
        else {
          failed.push(wanted[i].proxyId);
          this.failedAt.set(wanted[i].proxyId, this.host.clock.now());
          note(r);
        }
      });
    }
    for (let attempt = 0; attempt < 3 && chosen.length < count; attempt++) {
      const exclude = [...this.avoided(), ...excluded, ...failed, ...chosen.map((l) => l.proxy.proxyId)];
      const offered = await session.requestProxies(count - chosen.length, mode, exclude, limits.origoMs);
      if (offered.length === 0) break;
      const opened = await Promise.allSettled(offered.map((proxy) => this.linkTo(session, proxy, limits.connectMs)));
      // Their signalling went with origo: no proxy is to blame, the caller tries another instance.
      if (!session.isOpen) throw new ClientError('origo-unreachable', 'origo was lost while connecting to proxies');
      opened.forEach((r, i) => {
        if (r.status === 'fulfilled') chosen.push(r.value);
        else {
          this.failedAt.set(offered[i].proxyId, this.host.clock.now());
          note(r);
        }
      });
    }
    if (chosen.length === 0) {
      const detail = reasons.length > 0 ? ` (${reasons.join('; ')})` : ' (origo offered none)';
      throw new ClientError('no-proxies', `no proxy could be reached for mode ${mode}${detail}`);
    }
    return chosen;
  }

  /** Proxies not to ask origo for now: recently failed, polluting, or going away. */
  private avoided(): string[] {
    const now = this.host.clock.now();
    for (const [id, at] of this.failedAt) if (at < now - FAILED_PROXY_EXCLUSION_MS) this.failedAt.delete(id);
    for (const [id, at] of this.pollutedAt) if (at < now - POLLUTER_EXCLUSION_MS) this.pollutedAt.delete(id);
    return [...this.failedAt.keys(), ...this.pollutedAt.keys(), ...this.leavingProxies()];
  }

  /**
   * Proxies that said they are going away (ERROR GoingAway: they drain) or that origo withdrew
   * (`withdrawn`). Their transfers under way go on; new downloads skip them, and a segment series
   * replaces them between two segments.
   */
  leavingProxies(): string[] {
    const now = this.host.clock.now();
    for (const [id, at] of this.withdrawnAt) if (at < now - WITHDRAWN_EXCLUSION_MS) this.withdrawnAt.delete(id);
    const goingAway = [...this.links.values()].filter((l) => l.goingAway !== undefined).map((l) => l.proxy.proxyId);
    return [...new Set([...goingAway, ...this.withdrawnAt.keys()])];
  }

  /**
   * Calls `listener` with each proxy that says it is going away or that origo withdraws, when it
   * does (a segment series begins its handoff then, while the segment under way finishes).
   * Returns the unsubscribe function.
   */
  onProxyLeaving(listener: (proxyId: string) => void): () => void {
    this.leavingListeners.add(listener);
    return () => this.leavingListeners.delete(listener);
  }

  private announceLeaving(proxyId: string): void {
    for (const listener of [...this.leavingListeners]) listener(proxyId);
  }

  private withdrawn(proxyId: string, reason: WithdrawReason): void {
    this.config.trace?.(`origo withdrew proxy ${proxyId} (${reason}): no new downloads from it`);
    this.withdrawnAt.delete(proxyId);
    this.withdrawnAt.set(proxyId, this.host.clock.now());
    if (this.withdrawnAt.size > MAX_WITHDRAWN) this.withdrawnAt.delete(this.withdrawnAt.keys().next().value!);
    this.announceLeaving(proxyId);
  }

  /**
   * A download proved these proxies polluting: report each to origo (always, records or not: it
   * is what lets origo stop offering them), drop the connection, and do not ask for them again.
   */
  /** The configured window, or one sized from the links' measured paths (the slowest round trip). */
  private windowFor(links: readonly ProxyLink[]): number {
    if (this.config.window !== 'path') return this.config.window;
    let capacityBps = 0;
    let rttMs = 0;
    for (const link of links) {
      const path = link.path;
      capacityBps += path.capacityBps;
      if (path.rttMs === undefined) return windowForPath(undefined, this.config.symbolSize);
      rttMs = Math.max(rttMs, path.rttMs);
    }
    return windowForPath({ capacityBps, rttMs }, this.config.symbolSize);
  }

  private onPolluters(session: OrigoSession, polluters: { proxyId: string; kind: PollutionKind }[]): void {
    for (const p of polluters) {
      if (!this.pollutedAt.has(p.proxyId)) this.liveSession(session).sendReport(p.proxyId, p.kind);
      this.pollutedAt.set(p.proxyId, this.host.clock.now());
      this.links.get(p.proxyId)?.close('excluded as a polluter');
      this.links.delete(p.proxyId);
    }
  }

  private linkTo(session: OrigoSession, proxy: ProxyInfo, timeoutMs: number): Promise<ProxyLink> {
    const existing = this.links.get(proxy.proxyId);
    if (existing?.alive) return Promise.resolve(existing);
    // A link reconnecting on its own is the connection to wait for, not a reason for a second one.
    if (existing?.state === 'reconnecting') return existing.ready().then(() => existing);
    // Concurrent downloads wait for the same connection instead of opening a second one.
    const pending = this.pendingLinks.get(proxy.proxyId);
    if (pending) return pending;
    const opening = this.openLinkRetrying(session, proxy, timeoutMs);
    this.pendingLinks.set(proxy.proxyId, opening);
    const forget = () => this.pendingLinks.delete(proxy.proxyId);
    opening.then(forget, forget);
    return opening;
  }

  /** A fresh link per try (see LINK_ATTEMPTS); the last failure is the answer. */
  private async openLinkRetrying(session: OrigoSession, proxy: ProxyInfo, timeoutMs: number): Promise<ProxyLink> {
    let timeouts = 0;
    for (let attempt = 1; ; attempt++) {
      if (!session.isOpen) throw new ClientError('origo-unreachable', 'the origo session is closed');
      const link = new ProxyLink(proxy, {
        clock: this.host.clock,
        reconnect: this.reconnector(proxy),
        networkAnswers: () => this.origoAnswers(),
        reconnectAttemptMs: Math.min(this.config.connectTimeoutMs, RECONNECT_ATTEMPT_MS),
        reconnection: { windowMs: this.config.stallTimeoutMs ?? DEFAULT_RECEIVER_CONFIG.stallTimeoutMs },
        trace: this.config.trace,
      });
      link.onGoingAway = () => this.announceLeaving(proxy.proxyId);
      try {
        await link.connect((ms) => this.openTransport(session, proxy, ms), timeoutMs);
        this.links.set(proxy.proxyId, link);
        return link;
      } catch (e) {
        if (link.timedOut) timeouts++;
        // Origo is gone: retrying through it would only time out.
        if (!session.isOpen || attempt >= LINK_ATTEMPTS || timeouts >= 2) throw e;
        this.config.trace?.(`${proxy.name}: connection attempt ${attempt} failed (${why(e)}), trying again`);
      }
    }
  }

  private report(
    session: OrigoSession,
    url: string,
    mode: DownloadMode,
    r: GetResult,
    scheduler: string | undefined,
    sources: number,
  ): void {
    if (!this.config.records) return;
    const record: DownloadRecord = {
      url: this.recordUrl(url),
      mode,
      scheduler,
      sources,
      bytes: r.object.length,
      durationMs: r.durationMs,
      goodputBps: r.goodputBps,
      normalizedGoodput: Math.min(1, r.normalizedGoodput),
      status: 'complete',
      // Counts are in packets; Parallel HTTP bytes are counted in symbol-sized packets too.
      proxies: r.sources.map((s) => {
        const packets = Math.ceil(s.bytes / this.config.symbolSize);
        return {
          proxyId: s.proxyId,
          received: 'received' in s ? s.received : packets,
          useful: 'useful' in s ? s.useful : s.share === 1 ? packets : 0,
          share: s.share,
        };
      }),
    };
    this.liveSession(session).sendRecord(record);
  }

  private reportFailure(
    session: OrigoSession,
    url: string,
    mode: Mode,
    scheduler: string,
    links: ProxyLink[],
    error: ClientError,
  ): void {
    if (!this.config.records) return;
    const shown = this.recordUrl(url);
    this.liveSession(session).sendRecord({
      url: shown,
      mode,
      scheduler,
      sources: links.length,
      bytes: 0,
      durationMs: 0,
      goodputBps: 0,
      normalizedGoodput: 0,
      status: 'failed',
      error: error.message.split(url).join(shown).slice(0, 512),
      // Which proxies took part: origo refuses a record about none (nothing in it to check).
      proxies: links.slice(0, 32).map((l) => ({ proxyId: l.proxy.proxyId, received: 0, useful: 0, share: 0 })),
    });
  }

  /** Where a download's record or report goes: its own session, or the one that replaced it since. */
  /**
   * Hands a conflict's signed METAs to origo, which judges them against the origin. Only for a
   * URL this client would show origo anyway (recordUrl leaves it whole): origo must fetch the very
   * URL the proxies signed, and a redacted one (a signed CDN token in the query) stays here.
   */
  private onConflict(
    session: OrigoSession,
    url: string,
    range: ByteRange | undefined,
    statements: { proxyId: string; meta: Uint8Array }[],
  ): void {
    if (this.recordUrl(url) !== url) return;
    this.liveSession(session).sendConflict(url, range, statements);
  }

  private liveSession(session: OrigoSession): OrigoSession {
    return !session.isOpen && this.session?.isOpen ? this.session : session;
  }

  private recordUrl(url: string): string {
    return (this.config.recordUrl ? this.config.recordUrl(url) : url).slice(0, 4096) || 'about:redacted';
  }

  /** Closes every proxy connection and the origo session. */
  close(): void {
    this.stopNetworkWatch?.();
    this.dropConnections();
  }
}

/**
 * `promise`, or ClientError cancelled as soon as `signal` aborts: a caller that gives up while
 * origo or a proxy connection is slow is answered at once, not after their timeouts. What was
 * under way goes on (a connection that opens later is kept for the next download).
 */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  const cancelled = cancelledError;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(cancelled());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function cancelledError(): ClientError {
  return new ClientError('cancelled', 'aborted before the download started');
}

/** Why a connection attempt failed, without the 'origo-unreachable: ' its error message starts with. */
function causeOf(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  return message.replace(/^origo-unreachable: /, '').slice(0, 300);
}
