/**
 * Messages between the extension's parts. Page hook (MAIN world) ↔ isolated content script: a
 * MessagePort the hook hands over at document_start ("port A"), and "port B", which the content
 * script creates for the downloader requests. The hook never holds a port to the downloader frame:
 * the content script relays port B to its private port to the frame ("port C"), checking every
 * request (content/relay.ts). Port C reaches the frame with a one-time token the background
 * vouches for, so a page that loads downloader.html itself cannot attach a port to it. Downloader
 * frame and content script → background: runtime messages (statistics, the token).
 */
import { Counters } from './counters';
import { ByteRangeSpec } from './media';
import { ExtensionMode } from './settings';

/** Marks the window message that carries port A (the page never sees it: the content script stops it). */
export const HOOK_HELLO = 'mutp-hook-hello/1';
/** Marks the window message that gives the downloader frame port C (with the token as its value). */
export const DOWNLOADER_PORT = 'mutp-downloader-port/1';

// ---------------------------------------------------------------- port A: hook <-> content script

/** What the isolated content script tells the hook (from the settings). */
export interface HookConfig {
  /** Global switch and per-site switch combined. */
  enabled: boolean;
  /** Why not enabled: 'disabled' (globally) or 'site-disabled'. */
  disabledReason?: 'disabled' | 'site-disabled';
  mode: ExtensionMode;
  proxies: number;
  deadlineMs: number;
  urlPatterns: string[];
  exposeCounters: boolean;
}

export type ContentToHook =
  | { type: 'config'; config: HookConfig }
  /** Port B rides along in `ports[0]`. */
  | { type: 'downloader-port' }
  | { type: 'downloader-failed'; reason: string };

export type HookToContent =
  { type: 'need-downloader' } | { type: 'counters'; session: string; pageUrl: string; counters: Counters };

// ---------------------------------------------------------------- port B: hook <-> downloader

export interface GetRequest {
  type: 'get';
  id: number;
  /** Absolute URL the proxies fetch. */
  url: string;
  /** The page asked for these bytes of `url` (Range header). */
  range?: ByteRangeSpec;
  mode: ExtensionMode;
  proxies: number;
  /** Seconds of media, when the manifest says (statistics). */
  duration?: number;
  /**
   * The media segments the manifest lists after this one in the same playlist (at most
   * {@link MAX_UPCOMING}), for staging at the proxies ahead of the player's requests. The relay
   * keeps only those the page may read (as it checks `url`).
   */
  upcoming?: UpcomingSegment[];
  /** The playlist (rendition) `url` and `upcoming` belong to: staging follows each one apart. */
  track?: string;
  /**
   * The hook falls back to the network after this long (set by the content script, which works it
   * out from the settings as the hook does): the downloader's limits derive from it.
   */
  deadlineMs?: number;
}

/** A segment the player will ask for soon: a URL, or a byte range of it (EXT-X-BYTERANGE, DASH ranges). */
export interface UpcomingSegment {
  url: string;
  range?: { start: number; length: number };
}

/** Upcoming segments a request carries at most (the staging manager looks no further ahead). */
export const MAX_UPCOMING = 4;

export type HookToDownloader =
  { type: 'hello'; session: string; pageUrl: string } | GetRequest | { type: 'cancel'; id: number };

export interface GetSuccess {
  type: 'result';
  id: number;
  ok: true;
  /** The bytes the page asked for (transferred). */
  body: ArrayBuffer;
  status: 200 | 206;
  contentType: string;
  /** For 206. */
  contentRange?: string;
}

export interface GetFailure {
  type: 'result';
  id: number;
  ok: false;
  /** A ClientError code or one of the downloader's own reasons ('too-large', 'range-unsatisfiable', ...). */
  reason: string;
  message: string;
  /** Why origo could not be used, in short ('handshake-timeout', 'refused', 'origo-down', ...). */
  cause?: string;
}

export type DownloaderToHook = { type: 'ready' } | GetSuccess | GetFailure;

// ---------------------------------------------------------------- runtime messages (background)

export interface ProxyShareRecord {
  name: string;
  proxyId: string;
  /** Share of the useful packets (MUTP) or 1 for the Parallel HTTP winner. */
  share: number;
  /** Bytes (Parallel HTTP) or useful packets (MUTP) from this proxy. */
  useful: number;
  /** What carried the link (MUTP): 'quic' (WebTransport) or 'webrtc'. */
  transport?: string;
}

/** One download the downloader frame ran (or a request it failed), for the popup. */
export interface SegmentRecord {
  /** Wall clock, ms since the epoch. */
  at: number;
  url: string;
  ok: boolean;
  reason?: string;
  /** The failure in words (e.g. `origo-down (back-off 8 s, ...): ... handshake timed out ...`). */
  detail?: string;
  mode: ExtensionMode;
  /** Bytes handed to the page. */
  bytes: number;
  /** Bytes of the whole object MUTP fetched (≥ bytes for a range served from it). */
  objectBytes: number;
  /** Transfer time of the download (0 when served from the range cache). */
  durationMs: number;
  /** From the page's request to the answer (includes queueing and connecting). */
  totalMs: number;
  goodputBps: number;
  normalizedGoodput: number;
  /** Served from the downloader's range cache. */
  cached: boolean;
  range?: string;
  proxies: ProxyShareRecord[];
  /** Staging only: a proxy had staged this segment when its download started. */
  staged?: boolean;
  /**
   * Staging only: the frame's staging so far (hints sent and staged, segments staged and skipped,
   * how far ahead, at how many proxies each new segment is staged).
   */
  staging?: { ordersSent: number; hintsStaged: number; wasted: number; neededAhead: number; spread: number | null };
}

export type ToBackground =
  | { type: 'counters'; session: string; top: boolean; pageUrl: string; counters: Counters }
  | { type: 'segment'; session: string; record: SegmentRecord }
  /** Content script: the token it is about to give its downloader frame with port C. */
  | { type: 'downloader-grant'; token: string }
  /** Downloader frame: is this token one a content script of my tab granted? (Answer: {@link RedeemAnswer}.) */
  | { type: 'downloader-redeem'; token: string };

export interface RedeemAnswer {
  ok: boolean;
}

/** Tokens are 128 random bits in hex. */
export const TOKEN_PATTERN = /^[0-9a-f]{32}$/;

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null;
}
