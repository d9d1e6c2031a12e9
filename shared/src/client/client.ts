/**
 * The client orchestration the Node CLI and the browser extension share: an origo session, a
 * pool of proxy connections, one MUTP (or Parallel HTTP) download per object, and a record of
 * each download sent to origo. MutpClient is the facade over the parts that do each:
 * origo-failover.ts (the session, over several origo instances, with back-off), link-pool.ts (the
 * proxy links; their transports: transport-choice.ts), proxy-exclusions.ts (proxies not to ask
 * for) and download-records.ts (what origo is told); its configuration is client-config.ts.
 */
import {
  ByteRange,
  DEFAULT_SCHEDULER,
  failedStage,
  PollutionKind,
  ProxyInfo,
  StageLayout,
  StagedAnswer,
  windowForPath,
} from '..';
import { sha256 } from '@noble/hashes/sha256';
import {
  ClientConfig,
  ClientOptions,
  DEFAULT_CLIENT_CONFIG,
  DownloadMode,
  GetOptions,
  GetResult,
  limitsFor,
  origoUrlsOf,
} from './client-config';
import { runDownload } from './download';
import { DownloadRecords } from './download-records';
import { ClientError } from './errors';
import { ClientHost } from './host';
import { runHttpDownload } from './http-download';
import { LinkPool } from './link-pool';
import { OrigoDown } from './origo-backoff';
import { OrigoFailover } from './origo-failover';
import { OrigoSession } from './origo-session';
import { ProxyExclusions } from './proxy-exclusions';
import { ProxyLink } from './proxy-link';
import { TransportOpener } from './transport-choice';

// Defined in client-config.ts; importers (index.ts, the playback and staging code) keep taking them from here.
export { DEFAULT_CLIENT_CONFIG, origoUrlsOf } from './client-config';
export type { ClientConfig, ClientOptions, DownloadMode, GetOptions, GetResult } from './client-config';

export class MutpClient {
  private readonly config: ClientConfig;
  private readonly origo: OrigoFailover;
  private readonly exclusions: ProxyExclusions;
  private readonly links: LinkPool;
  private readonly records: DownloadRecords;
  /** Ends the host's network-change notices (close()). */
  private readonly stopNetworkWatch?: () => void;
  /** Network changes seen (networkChanges()): a segment series asks origo for its set again after one. */
  private networkChangeCount = 0;

  constructor(
    private readonly host: ClientHost,
    config: ClientOptions,
  ) {
    this.config = { ...DEFAULT_CLIENT_CONFIG, ...config };
    const origoUrls = origoUrlsOf(config);
    if (origoUrls.length === 0) throw new TypeError('MutpClient needs an origo URL');
    this.exclusions = new ProxyExclusions(host.clock, () => this.links.goingAway(), this.config.trace);
    this.origo = new OrigoFailover(host, origoUrls, this.config, (proxyId, reason) =>
      this.exclusions.withdrawn(proxyId, reason),
    );
    const transports = new TransportOpener(host, this.config);
    this.links = new LinkPool(host, this.config, this.origo, this.exclusions, transports);
    this.records = new DownloadRecords(this.config, (session) => this.origo.liveSession(session));
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
    this.networkChangeCount++;
    this.exclusions.forgetFailures();
    // Links with transfers under way reconnect on their own; idle ones close.
    this.links.networkChanged();
    // Not a lost instance: the next session goes to the same one.
    this.origo.drop('network changed');
  }

  /**
   * How many network changes this client has seen: a segment series that chose its proxy set
   * before the last one asks origo for it again (StagingClient.networkChanges), since origo offers
   * proxies by the client's address (locality) and that address changed.
   */
  networkChanges(): number {
    return this.networkChangeCount;
  }

  /**
   * Whether a `mode` download has open links to go through without origo (it is away): a caller
   * that answers at once while origo is down (the extension's downloader) asks this first.
   */
  hasOpenLinks(mode: DownloadMode): boolean {
    return mode !== 'http' && this.links.openLinks(1, mode, []).length > 0;
  }

  /** True while origo is away: no session is open, and one was (StagingClient.origoAway). */
  origoAway(): boolean {
    return !this.origo.isOpen && this.origo.lastSession() !== undefined;
  }

  /** Undefined unless origo is in its back-off period (it is then not tried until it ends). */
  origoDown(): OrigoDown | undefined {
    return this.origo.down();
  }

  /**
   * Opens the origo session now, unless it is open, being opened or in its back-off period, so the
   * first download does not wait for the handshake (a page about to play calls this). A failure
   * counts like any attempt (back-off included); it never rejects.
   */
  prepare(timeoutMs = this.config.origoTimeoutMs): void {
    this.origo.prepare(Math.min(timeoutMs, this.config.origoTimeoutMs));
  }

  /** The origo instance the client is on (or tries next). */
  get origoUrl(): string {
    return this.origo.url;
  }

  /** Downloads `url` through `proxies` proxies in `mode`; rejects with a ClientError. */
  async get(url: string, o: GetOptions): Promise<GetResult> {
    const mode = o.mode;
    const limits = limitsFor(this.config, o);
    if (mode === 'http') {
      const { session, proxies } = await this.origo.withSession(o.signal, limits.origoMs, async (session) => ({
        session,
        proxies:
          o.use !== undefined && o.use.length > 0
            ? o.use.slice(0, o.proxies)
            : await this.origo.offers(
                session,
                o.proxies,
                'uncoded',
                [...this.exclusions.avoided(), ...(o.exclude ?? [])],
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
        verifySignature: this.host.verifySignature,
        onPolluters: (polluters) => this.onPolluters(session, polluters),
        onConflict: (statements) => this.records.conflict(session, url, o.range, statements),
        onProgress: o.onProgress,
      });
      this.records.complete(session, url, 'http', result, undefined, proxies.length);
      return result;
    }
    const { session, links } =
      this.withoutOrigo(o) ??
      (await this.origo.withSession(o.signal, limits.origoMs, async (session) => ({
        session,
        links: await this.links.connect(session, o.proxies, mode, o.exclude ?? [], limits, o.use),
      })));
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
        receiveDrops: this.host.receiveDrops,
        receiverConfig: {
          maxObjectBytes: this.config.maxObjectBytes,
          ...(this.config.stallTimeoutMs !== undefined ? { stallTimeoutMs: this.config.stallTimeoutMs } : {}),
          ...(o.integrity ? { integrity: o.integrity } : {}),
        },
        onProgress: o.onProgress,
        ...(this.config.disabledFeatures ? { disabledFeatures: this.config.disabledFeatures } : {}),
        onPolluters: (polluters) => this.onPolluters(session, polluters),
        onConflict: (statements) => this.records.conflict(session, url, o.range, statements),
      });
      this.records.complete(session, url, mode, result, scheduler, links.length);
      return result;
    } catch (e) {
      const error = e instanceof ClientError ? e : new ClientError('download-failed', String(e));
      this.records.failed(session, url, mode, scheduler, links, error);
      throw error;
    }
  }

  /**
   * Origo is away (killed, restarting, cut off) while links opened before are up: the download
   * goes through those, with what the client already holds (the offers and per-proxy tokens they
   * were opened with), instead of failing. Undefined when origo's session is open (the usual path,
   * which may add proxies) or no such link is open; a new session is begun in the background.
   */
  private withoutOrigo(o: GetOptions): { session: OrigoSession; links: ProxyLink[] } | undefined {
    const session = this.origo.lastSession();
    if (o.mode === 'http' || this.origo.isOpen || session === undefined) return undefined;
    const links = this.links.openLinks(o.proxies, o.mode, o.exclude ?? [], o.use);
    if (links.length === 0) return undefined;
    this.config.trace?.(`origo away: downloading through ${links.length} open link(s)`);
    this.origo.prepare(this.config.origoTimeoutMs);
    return { session, links };
  }

  /**
   * Up to `count` proxies for `mode` chosen by origo, none of `exclude` nor recently failed: a
   * set to stage objects at (stage()) and then download them from (GetOptions.use), so staged
   * objects are fetched from the proxies that hold them. Right after origo's return an empty
   * offer is asked again within the origo limit (OrigoFailover.offers), unless `awaitProxies` is
   * false (a handoff: without newcomers the set simply stays).
   */
  async chooseProxies(
    count: number,
    mode: DownloadMode,
    o: Pick<GetOptions, 'exclude' | 'signal' | 'origoTimeoutMs'> & { awaitProxies?: boolean } = {},
  ): Promise<ProxyInfo[]> {
    const limits = limitsFor(this.config, o);
    const proxies = await this.origo.withSession(o.signal, limits.origoMs, (session) => {
      const exclude = [...this.exclusions.avoided(), ...(o.exclude ?? [])];
      const offerMode = mode === 'http' ? 'uncoded' : mode;
      return o.awaitProxies === false
        ? session.requestProxies(count, offerMode, exclude, limits.origoMs)
        : this.origo.offers(session, count, offerMode, exclude, limits.origoMs);
    });
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
      session = await this.origo.open(this.config.origoTimeoutMs);
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
   * Proxies that said they are going away (ERROR GoingAway: they drain) or that origo withdrew
   * (`withdrawn`). Their transfers under way go on; new downloads skip them, and a segment series
   * replaces them between two segments.
   */
  leavingProxies(): string[] {
    return this.exclusions.leaving();
  }

  /**
   * Calls `listener` with each proxy that says it is going away or that origo withdraws, when it
   * does (a segment series begins its handoff then, while the segment under way finishes).
   * Returns the unsubscribe function.
   */
  onProxyLeaving(listener: (proxyId: string) => void): () => void {
    return this.exclusions.onLeaving(listener);
  }

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

  /**
   * A download proved these proxies polluting: report each to origo (always, records or not: it
   * is what lets origo stop offering them), drop the connection, and do not ask for them again.
   */
  private onPolluters(session: OrigoSession, polluters: { proxyId: string; kind: PollutionKind }[]): void {
    for (const p of polluters) {
      if (!this.exclusions.isPolluter(p.proxyId)) this.origo.liveSession(session).sendReport(p.proxyId, p.kind);
      this.exclusions.polluted(p.proxyId);
      this.links.drop(p.proxyId, 'excluded as a polluter');
    }
  }

  /** Closes every proxy connection and the origo session. */
  close(): void {
    this.stopNetworkWatch?.();
    // The session's token is kept for the next session.
    this.links.closeAll();
    this.origo.drop();
  }
}
