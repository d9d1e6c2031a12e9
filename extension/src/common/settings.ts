/**
 * The extension's options, kept in `storage.local` under the key `settings`. Every reader goes
 * through {@link normalizeSettings}: a partial or hand-written object (a test setting options with
 * `chrome.storage.local.set({settings: {...}})`) gets the defaults for what it leaves out, and
 * anything out of range is clamped or dropped, never trusted.
 */
export const DOWNLOAD_MODES = ['http', 'uncoded', 'rlnc', 'fountain'] as const;
export type ExtensionMode = (typeof DOWNLOAD_MODES)[number];

export const SETTINGS_KEY = 'settings';

/**
 * How the extension reaches a proxy: `auto` prefers QUIC (WebTransport) where a proxy offers it
 * and starts WebRTC beside it after 1 s or a failure; `quic` never falls back; `webrtc` never
 * tries QUIC (a network that mangles UDP to the QUIC port, or to compare).
 */
export const TRANSPORTS = ['auto', 'quic', 'webrtc'] as const;
export type ExtensionTransport = (typeof TRANSPORTS)[number];

export interface Settings {
  /** Global switch: off = every request goes to the network untouched. */
  enabled: boolean;
  /**
   * origo's client endpoint: wss://, or ws:// to a loopback host only ({@link origoUrlProblem}).
   * Several origo instances of one deployment: comma-separated ({@link origoUrlList}).
   */
  origoUrl: string;
  mode: ExtensionMode;
  transport: ExtensionTransport;
  /** Proxies per download (N). */
  proxies: number;
  /** Host names (the top-level page's) where the extension stays out of the way. */
  disabledSites: string[];
  /**
   * Extra URL patterns whose GET requests are media objects to fetch through MUTP as they are
   * (the URL itself names the bytes, e.g. YouTube-style `videoplayback?...&range=a-b`). A pattern
   * is a glob over the whole URL (`*` = any characters) or `/regex/flags`.
   */
  urlPatterns: string[];
  /** No answer from MUTP within this long → the request goes to the network. */
  deadlineMs: number;
  /** Largest object fetched through MUTP (a range request fetches the whole object). */
  maxObjectBytes: number;
  /** Whole objects kept for range requests (LRU), bytes. */
  rangeCacheBytes: number;
  /** MUTP downloads run at once per page frame (1 = one segment at a time, all proxies on it). */
  concurrency: number;
  /**
   * Stage the segments the manifest lists next at the proxies before the player asks for them
   * (SoftStage), and keep one proxy set per page frame, changed only between segments.
   */
  staging: boolean;
  /**
   * Debug/test aid: the page-world hook exposes `window.__mutp.counters()` (off by default so
   * pages see nothing unusual).
   */
  exposeCounters: boolean;
}

export const DEFAULT_SETTINGS: Readonly<Settings> = Object.freeze({
  enabled: true,
  origoUrl: 'ws://127.0.0.1:8700/v1/client',
  mode: 'rlnc',
  transport: 'auto',
  proxies: 4,
  disabledSites: [],
  urlPatterns: ['*://*/videoplayback?*range=*'],
  deadlineMs: 10_000,
  maxObjectBytes: 64 * 1024 * 1024,
  rangeCacheBytes: 128 * 1024 * 1024,
  concurrency: 1,
  staging: true,
  exposeCounters: false,
});

const MAX_LIST = 256;
const MAX_ITEM = 1024;

function clampInt(value: unknown, min: number, max: number, fallback: number): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
  if (!Number.isFinite(n)) return fallback;
  return Math.min(max, Math.max(min, Math.round(n)));
}

function stringList(value: unknown, fallback: readonly string[], transform = (s: string) => s): string[] {
  if (!Array.isArray(value)) return [...fallback];
  const out: string[] = [];
  for (const item of value) {
    if (typeof item !== 'string') continue;
    const s = transform(item.trim());
    if (s && s.length <= MAX_ITEM && !out.includes(s)) out.push(s);
    if (out.length >= MAX_LIST) break;
  }
  return out;
}

/** A host name as the per-site switch compares it: lower case, no port, no trailing dot. */
export function siteKey(host: string): string {
  return host.trim().toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
}

/** The origo URLs in a setting: one, or several comma-separated (instances of one deployment). */
export function origoUrlList(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The ws(s):// URLs of a setting, normalized and comma-separated; undefined when there is none. */
function validOrigoUrl(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const valid: string[] = [];
  for (const item of origoUrlList(value).slice(0, 16)) {
    try {
      const url = new URL(item);
      if ((url.protocol === 'ws:' || url.protocol === 'wss:') && !valid.includes(url.href)) valid.push(url.href);
    } catch {
      // not a URL: dropped
    }
  }
  return valid.length > 0 ? valid.join(', ') : undefined;
}

/** Host names that never leave the machine (a plain ws:// to them cannot be intercepted on the way). */
function isLoopbackHost(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost') || h === '[::1]') return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Why the extension will not talk to origo at `value`, or undefined. origo hands out the proxies
 * and relays their signalling: over plain ws:// anyone on the path could substitute proxies, so
 * ws:// is only accepted to this machine (loopback); anything else needs wss://.
 */
export function origoUrlProblem(value: string): string | undefined {
  const list = origoUrlList(value);
  if (list.length === 0) return 'the origo URL is not a URL';
  for (const item of list) {
    const problem = oneOrigoUrlProblem(item);
    if (problem !== undefined) return list.length > 1 ? `${item}: ${problem}` : problem;
  }
  return undefined;
}

function oneOrigoUrlProblem(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'the origo URL is not a URL';
  }
  if (url.protocol === 'wss:') return undefined;
  if (url.protocol !== 'ws:') return 'the origo URL must start with wss:// (or ws:// to this machine)';
  if (isLoopbackHost(url.hostname)) return undefined;
  return `plain ws:// is only allowed to this machine (localhost, 127.x.x.x, [::1]); use wss://${url.host}${url.pathname} for ${url.hostname}`;
}

/** Settings from anything found in storage (or typed into the options page). */
export function normalizeSettings(raw: unknown): Settings {
  const r = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const d = DEFAULT_SETTINGS;
  return {
    enabled: typeof r.enabled === 'boolean' ? r.enabled : d.enabled,
    origoUrl: validOrigoUrl(r.origoUrl) ?? d.origoUrl,
    mode: DOWNLOAD_MODES.includes(r.mode as ExtensionMode) ? (r.mode as ExtensionMode) : d.mode,
    transport: TRANSPORTS.includes(r.transport as ExtensionTransport)
      ? (r.transport as ExtensionTransport)
      : d.transport,
    proxies: clampInt(r.proxies, 1, 32, d.proxies),
    disabledSites: stringList(r.disabledSites, d.disabledSites, siteKey),
    urlPatterns: stringList(r.urlPatterns, d.urlPatterns),
    deadlineMs: clampInt(r.deadlineMs, 500, 120_000, d.deadlineMs),
    maxObjectBytes: clampInt(r.maxObjectBytes, 1024, 256 * 1024 * 1024, d.maxObjectBytes),
    rangeCacheBytes: clampInt(r.rangeCacheBytes, 0, 1024 * 1024 * 1024, d.rangeCacheBytes),
    concurrency: clampInt(r.concurrency, 1, 8, d.concurrency),
    staging: typeof r.staging === 'boolean' ? r.staging : d.staging,
    exposeCounters: typeof r.exposeCounters === 'boolean' ? r.exposeCounters : d.exposeCounters,
  };
}

/** True when the extension should act on pages of `host`. */
export function siteEnabled(settings: Settings, host: string): boolean {
  const key = siteKey(host);
  return !settings.disabledSites.some((site) => key === site || key.endsWith(`.${site}`));
}

/** The settings an operator may set by policy (`storage.managed`): all of them. */
export const SETTING_KEYS = Object.keys(DEFAULT_SETTINGS) as (keyof Settings)[];

/** The settings in effect: the user's (storage.local), overridden by the operator's (storage.managed). */
export interface SettingsState {
  settings: Settings;
  /** Keys the operator set: they override the user's and the options page shows them locked. */
  locked: (keyof Settings)[];
  /**
   * Where the origo URL comes from: 'managed' (policy), 'user' (saved in the options page), or
   * 'default' (the loopback default of a local test set-up, not a deployment: nothing was set, or
   * the default was saved as it is).
   */
  origoSource: 'managed' | 'user' | 'default';
}

/**
 * Merges the user's stored settings with the operator's managed ones. A managed key counts only
 * when its value survives normalization (a policy with `proxies: "many"` locks nothing and changes
 * nothing); the user's value of a locked key is ignored.
 */
export function mergeSettings(local: unknown, managed: unknown): SettingsState {
  const user = (local && typeof local === 'object' ? local : {}) as Record<string, unknown>;
  const policy = (managed && typeof managed === 'object' ? managed : {}) as Record<string, unknown>;
  const fromPolicy = normalizeSettings(policy);
  const locked = SETTING_KEYS.filter(
    (key) =>
      key in policy &&
      policy[key] !== undefined &&
      (key === 'origoUrl' ? validOrigoUrl(policy[key]) !== undefined : sameValue(fromPolicy[key], policy[key], key)),
  );
  const merged: Record<string, unknown> = { ...user };
  for (const key of locked) merged[key] = fromPolicy[key];
  const settings = normalizeSettings(merged);
  const origoSource = locked.includes('origoUrl')
    ? 'managed'
    : settings.origoUrl !== DEFAULT_SETTINGS.origoUrl
      ? 'user'
      : 'default';
  return { settings, locked, origoSource };
}

/** Whether normalization kept a managed value (numbers may be rounded or clamped: still the operator's). */
function sameValue(normalized: unknown, raw: unknown, key: keyof Settings): boolean {
  if (typeof DEFAULT_SETTINGS[key] === 'number') return typeof raw === 'number' && Number.isFinite(raw);
  if (Array.isArray(DEFAULT_SETTINGS[key])) return Array.isArray(raw);
  return normalized === raw;
}
