/**
 * The client orchestration the Node CLI and the browser extension share: an origo session, a
 * pool of proxy connections, one MUTP (or Parallel HTTP) download per object, and a record of
 * each download sent to origo.
 */
import {
  Codec,
  DEFAULT_GENERATION_SIZE,
  DEFAULT_SCHEDULER,
  DEFAULT_SYMBOL_SIZE,
  DEFAULT_WINDOW,
  DownloadRecord,
  Mode,
  PollutionKind,
  ProxyInfo,
  SchedulerName,
} from '..';
import { DownloadResult, runDownload } from './download';
import { sha256 } from '@noble/hashes/sha256';
import { ClientError } from './errors';
import { ClientHost } from './host';
import { HttpDownloadResult, runHttpDownload } from './http-download';
import { OrigoSession } from './origo-session';
import { ProxyLink } from './proxy-link';

export type DownloadMode = 'http' | Mode;

/** A proxy that could not be reached is not asked for again for this long. */
const FAILED_PROXY_EXCLUSION_MS = 60_000;
/** A proxy that polluted a download is not asked for again by this client for an hour. */
const POLLUTER_EXCLUSION_MS = 60 * 60_000;

export interface ClientConfig {
  /** origo's client endpoint, e.g. ws://127.0.0.1:8700/v1/client */
  origoUrl: string;
  codecs: Record<Mode, Codec>;
  window: number;
  generationSize: number;
  symbolSize: number;
  connectTimeoutMs: number;
  maxObjectBytes: number;
  /** Accept a plain ws:// origo on a non-loopback host (a man in the middle could inject proxies). */
  insecureOrigo?: boolean;
  /** Send a record of every download to origo. */
  records: boolean;
  /** How a URL appears in those records (the extension keeps origin + path: no signed tokens). Default: as it is. */
  recordUrl?: (url: string) => string;
}

export const DEFAULT_CLIENT_CONFIG = {
  window: DEFAULT_WINDOW,
  generationSize: DEFAULT_GENERATION_SIZE,
  symbolSize: DEFAULT_SYMBOL_SIZE,
  connectTimeoutMs: 10_000,
  maxObjectBytes: 256 * 1024 * 1024,
  records: true,
};

export interface GetOptions {
  mode: DownloadMode;
  proxies: number;
  scheduler?: SchedulerName;
  /** Proxy ids not to use (besides the ones that failed recently). */
  exclude?: string[];
  signal?: AbortSignal;
  onProgress?: (progress: { dof: number; totalDof: number; bytes: number }) => void;
}

export type GetResult = DownloadResult | HttpDownloadResult;

export class MutpClient {
  private session?: OrigoSession;
  private readonly config: ClientConfig;
  /** Live connections by proxy id, reused across downloads. */
  private readonly links = new Map<string, ProxyLink>();
  private connecting?: Promise<OrigoSession>;
  private readonly pendingLinks = new Map<string, Promise<ProxyLink>>();
  private nextLink = 0;
  /** Proxies that failed to connect, by when; excluded when asking origo for a while. */
  private readonly failedAt = new Map<string, number>();
  /** Proxies a download excluded as polluters, by when; not asked for again for a long while. */
  private readonly pollutedAt = new Map<string, number>();

  constructor(
    private readonly host: ClientHost,
    config: Partial<ClientConfig> & Pick<ClientConfig, 'origoUrl' | 'codecs'>,
  ) {
    this.config = { ...DEFAULT_CLIENT_CONFIG, ...config };
  }

  /** The origo session, opened (again) when needed: origo may restart between downloads. */
  private origo(): Promise<OrigoSession> {
    if (this.session?.isOpen) return Promise.resolve(this.session);
    // Concurrent downloads share one connection attempt.
    if (this.connecting) return this.connecting;
    const previousToken = this.session?.token;
    this.session?.close();
    const session = new OrigoSession(
      this.config.origoUrl,
      this.host.webSocket,
      this.host.clock,
      undefined,
      previousToken,
      this.config.insecureOrigo,
    );
    this.session = session;
    this.connecting = session.connect().then(
      () => session,
      (e: unknown) => {
        if (this.session === session) this.session = undefined;
        throw e;
      },
    );
    const attempt = this.connecting;
    void attempt.then(
      () => this.clearConnecting(attempt),
      () => this.clearConnecting(attempt),
    );
    return attempt;
  }

  private clearConnecting(attempt: Promise<OrigoSession>): void {
    if (this.connecting === attempt) this.connecting = undefined;
  }

  /** Downloads `url` through `proxies` proxies in `mode`; rejects with a ClientError. */
  async get(url: string, o: GetOptions): Promise<GetResult> {
    const session = await unlessAborted(this.origo(), o.signal);
    const mode = o.mode;
    if (mode === 'http') {
      const proxies = await unlessAborted(
        session.requestProxies(o.proxies, 'uncoded', [...this.recentlyFailed(), ...(o.exclude ?? [])]),
        o.signal,
      );
      if (proxies.length === 0) throw new ClientError('no-proxies', 'origo has no proxy to offer');
      const result = await runHttpDownload(proxies, url, this.host.fetch, this.host.clock, {
        signal: o.signal,
        maxBytes: this.config.maxObjectBytes,
        sha256: this.host.sha256 ?? sha256,
        token: session.token,
      });
      this.report(session, url, 'http', result, undefined, proxies.length);
      return result;
    }
    const links = await unlessAborted(this.connect(session, o.proxies, mode, o.exclude ?? []), o.signal);
    const scheduler = o.scheduler ?? DEFAULT_SCHEDULER[mode];
    try {
      const result = await runDownload(links, this.host.clock, {
        url,
        mode,
        scheduler,
        window: this.config.window,
        generationSize: this.config.generationSize,
        symbolSize: this.config.symbolSize,
        codec: this.config.codecs[mode],
        transferId: this.host.random() >>> 0,
        signal: o.signal,
        sha256: this.host.sha256 ?? sha256,
        receiverConfig: { maxObjectBytes: this.config.maxObjectBytes },
        onProgress: o.onProgress,
        onPolluters: (polluters) => this.onPolluters(session, polluters),
      });
      this.report(session, url, mode, result, scheduler, links.length);
      return result;
    } catch (e) {
      const error = e instanceof ClientError ? e : new ClientError('download-failed', String(e));
      this.reportFailure(session, url, mode, scheduler, links, error);
      throw error;
    }
  }

  /** `count` live links (fewer if origo has fewer proxies), reusing open ones. */
  private async connect(session: OrigoSession, count: number, mode: Mode, excluded: string[]): Promise<ProxyLink[]> {
    for (const [id, link] of this.links) if (!link.alive) this.links.delete(id);
    const chosen: ProxyLink[] = [];
    for (let attempt = 0; attempt < 3 && chosen.length < count; attempt++) {
      const exclude = [...this.recentlyFailed(), ...excluded, ...chosen.map((l) => l.proxy.proxyId)];
      const offered = await session.requestProxies(count - chosen.length, mode, exclude);
      if (offered.length === 0) break;
      const opened = await Promise.allSettled(offered.map((proxy) => this.linkTo(session, proxy)));
      opened.forEach((r, i) => {
        if (r.status === 'fulfilled') chosen.push(r.value);
        else this.failedAt.set(offered[i].proxyId, this.host.clock.now());
      });
    }
    if (chosen.length === 0) {
      throw new ClientError('no-proxies', `no proxy could be reached for mode ${mode}`);
    }
    return chosen;
  }

  private recentlyFailed(): string[] {
    const now = this.host.clock.now();
    for (const [id, at] of this.failedAt) if (at < now - FAILED_PROXY_EXCLUSION_MS) this.failedAt.delete(id);
    for (const [id, at] of this.pollutedAt) if (at < now - POLLUTER_EXCLUSION_MS) this.pollutedAt.delete(id);
    return [...this.failedAt.keys(), ...this.pollutedAt.keys()];
  }

  /**
   * A download proved these proxies polluting: report each to origo (always, records or not: it
   * is what lets origo stop offering them), drop the connection, and do not ask for them again.
   */
  private onPolluters(session: OrigoSession, polluters: { proxyId: string; kind: PollutionKind }[]): void {
    for (const p of polluters) {
      if (!this.pollutedAt.has(p.proxyId)) session.sendReport(p.proxyId, p.kind);
      this.pollutedAt.set(p.proxyId, this.host.clock.now());
      this.links.get(p.proxyId)?.close('excluded as a polluter');
      this.links.delete(p.proxyId);
    }
  }

  private linkTo(session: OrigoSession, proxy: ProxyInfo): Promise<ProxyLink> {
    const existing = this.links.get(proxy.proxyId);
    if (existing?.alive) return Promise.resolve(existing);
    // Concurrent downloads wait for the same connection instead of opening a second one.
    const pending = this.pendingLinks.get(proxy.proxyId);
    if (pending) return pending;
    // One retry with a fresh connection: a first attempt can lose an ICE race at start-up.
    const opening = this.openLink(session, proxy).catch(() => this.openLink(session, proxy));
    this.pendingLinks.set(proxy.proxyId, opening);
    const forget = () => this.pendingLinks.delete(proxy.proxyId);
    opening.then(forget, forget);
    return opening;
  }

  private async openLink(session: OrigoSession, proxy: ProxyInfo): Promise<ProxyLink> {
    const connectionId = `c${(this.host.random() >>> 0).toString(36)}${this.nextLink++}`;
    const link = new ProxyLink(proxy, connectionId);
    await link.open(session, this.host.rtc, this.host.clock, this.config.connectTimeoutMs);
    this.links.set(proxy.proxyId, link);
    return link;
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
    session.sendRecord(record);
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
    session.sendRecord({
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
      proxies: [],
    });
  }

  private recordUrl(url: string): string {
    return (this.config.recordUrl ? this.config.recordUrl(url) : url).slice(0, 4096) || 'about:redacted';
  }

  /** Closes every proxy connection and the origo session. */
  close(): void {
    for (const link of this.links.values()) link.close();
    this.links.clear();
    this.session?.close();
    this.session = undefined;
  }
}

/**
 * `promise`, or ClientError cancelled as soon as `signal` aborts: a caller that gives up while
 * origo or a proxy connection is slow is answered at once, not after their timeouts. What was
 * under way goes on (a connection that opens later is kept for the next download).
 */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  const cancelled = () => new ClientError('cancelled', 'aborted before the download started');
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
