/**
 * What a MutpClient is configured with (ClientConfig, and what must be given: ClientOptions), what
 * one request asks for (GetOptions) and gets (GetResult), and the limits a request runs under.
 */
import { ByteRange, Codec, DEFAULT_GENERATION_SIZE, DEFAULT_SYMBOL_SIZE, Mode, ProxyInfo, SchedulerName } from '..';
import type { Feature } from '../wire';
import type { DownloadProgress, DownloadResult } from './download';
import type { HttpDownloadResult } from './http-download';
import type { BackoffPolicy } from './origo-backoff';
import type { TransportPreference } from './transport-choice';

export type DownloadMode = 'http' | Mode;

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
  /**
   * Optional MUTP features this client leaves off, as a release without them would (tests and
   * rolling upgrades; docs/protocol.md §13): not declared in hello nor REQUEST, and not used.
   */
  disabledFeatures?: readonly Feature[];
  /**
   * The region this client believes it is in (configured or measured), sent with each proxy
   * request: origo follows it only when the client's address is in no prefix a region declared,
   * and only towards a region with enough proxies (docs/signalling.md, selection rule 6).
   */
  region?: string;
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

/** How long a request waits for origo and for each proxy connection. */
export interface Limits {
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

/** The client's limits, shortened by the request's own. */
export function limitsFor(
  config: Pick<ClientConfig, 'origoTimeoutMs' | 'connectTimeoutMs'>,
  o: Pick<GetOptions, 'origoTimeoutMs' | 'connectTimeoutMs'>,
): Limits {
  const shorter = (own: number, asked: number | undefined) =>
    asked !== undefined && Number.isFinite(asked) && asked > 0 ? Math.min(own, asked) : own;
  return {
    origoMs: shorter(config.origoTimeoutMs, o.origoTimeoutMs),
    connectMs: shorter(config.connectTimeoutMs, o.connectTimeoutMs),
  };
}
