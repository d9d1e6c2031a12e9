/**
 * The isolated-world content script (document_start, all frames). It is the hook's link to the
 * extension: takes port A from the hook's one window message (and stops that message so page
 * listeners never see it), sends the hook its configuration from the settings (and again when
 * they change), makes the invisible downloader frame when the hook first needs it, and relays
 * the hook's requests to it (relay.ts: the hook gets port B to this script, never a port to the
 * frame; every request is checked here against the settings and the request policy). The frame
 * accepts port C only with a one-time token the background vouches for. Also forwards the hook's
 * counters to the background for the popup.
 */
import {
  ContentToHook,
  DOWNLOADER_PORT,
  GetRequest,
  HOOK_HELLO,
  HookConfig,
  HookToContent,
  isObject,
  RedeemAnswer,
  ToBackground,
} from '../common/messages';
import { ext, loadSettings, onSettingsChanged } from '../common/ext';
import { normalizeSettings, Settings, siteEnabled } from '../common/settings';
import { redactUrl } from '../common/media';
import { hookDeadline } from '../common/deadlines';
import { Authorization, DownloaderRelay } from './relay';
import { checkUrl, ConsentCache, corsConsent, HeadFetch, readableUpcoming } from './request-policy';
import { watchPageCsp } from './csp-watch';

const api = ext();
let hookPort: MessagePort | undefined;
let session = '';
let settings: Settings | undefined;
let frame: HTMLIFrameElement | undefined;

/** The host of the page the user looks at (the top frame's), which the per-site switch is about. */
function siteHost(): string {
  try {
    return window.top!.location.hostname;
  } catch {
    // cross-origin top frame
  }
  try {
    const ancestors = window.location.ancestorOrigins;
    if (ancestors && ancestors.length > 0) return new URL(ancestors[ancestors.length - 1]).hostname;
  } catch {
    // not available (Firefox)
  }
  try {
    if (document.referrer) return new URL(document.referrer).hostname;
  } catch {
    // no referrer
  }
  return window.location.hostname;
}

function toHook(message: ContentToHook, transfer: Transferable[] = []): void {
  try {
    hookPort?.postMessage(message, transfer);
  } catch {
    // the page went away
  }
}

function hookConfig(s: Settings): HookConfig {
  const siteOn = siteEnabled(s, siteHost());
  return {
    enabled: s.enabled && siteOn,
    disabledReason: !s.enabled ? 'disabled' : siteOn ? undefined : 'site-disabled',
    mode: s.mode,
    proxies: s.proxies,
    deadlineMs: s.deadlineMs,
    urlPatterns: s.urlPatterns,
    exposeCounters: s.exposeCounters,
  };
}

function sendConfig(): void {
  if (settings && hookPort) toHook({ type: 'config', config: hookConfig(settings) });
}

/**
 * A fetch made as the page for the consent check: Firefox's `content.fetch` (the page's
 * principal, so the page's CORS applies); in Chromium the content script's own fetch already
 * follows the page's CORS. corsConsent() also checks the header itself should a browser run the
 * request with extension privileges instead.
 */
function pageFetch(): HeadFetch {
  const content = (globalThis as { content?: { fetch?: typeof fetch } }).content;
  const f = typeof content?.fetch === 'function' ? content.fetch.bind(content) : fetch.bind(globalThis);
  return (url, init) => f(url, init);
}

// The page's CSP, watched from document_start: a URL it would not let the page fetch goes neither
// to the proxies nor into a consent HEAD (csp-gate.ts).
const pageCsp = watchPageCsp(document, new URL(window.location.href), window.location.origin);

const consent = new ConsentCache(
  (url) => corsConsent(pageFetch(), url, window.location.origin),
  () => performance.now(),
);

/** The request the downloader gets for one from the hook, or why the hook must use the network. */
async function authorize(request: GetRequest): Promise<Authorization> {
  const s = settings;
  if (!s) return { ok: false, reason: 'not-ready' };
  const config = hookConfig(s);
  if (!config.enabled) return { ok: false, reason: config.disabledReason ?? 'disabled' };
  const verdict = checkUrl(request.url, window.location.origin);
  if (!verdict.ok) return verdict;
  const csp = pageCsp.verdict(verdict.url);
  if (!csp.ok) return csp;
  // Cross-origin: the origin's CORS answer decides, but it need not come first. A known answer is
  // used as it is; an unknown one is asked now and the relay holds the bytes until it comes.
  const known = verdict.crossOrigin ? consent.known(verdict.url) : true;
  if (known === false) return { ok: false, reason: 'cors' };
  // The extension's settings decide the mode and N, whatever the page world asked for.
  // The hook's deadline for this request, worked out here from the settings (not taken from the
  // page): the downloader's limits derive from it.
  const deadlineMs = hookDeadline(s.deadlineMs, request.duration);
  const forwarded: GetRequest = { ...request, url: verdict.url, mode: s.mode, proxies: s.proxies, deadlineMs };
  delete forwarded.upcoming;
  delete forwarded.track;
  // Kept with an empty list too (the playlist's last segment, or next ones whose CORS answer is
  // not known yet): the downloader still knows where the player is.
  if (s.staging && request.track !== undefined) {
    const allowed = (request.upcoming ?? []).filter((segment) => pageCsp.verdict(segment.url).ok);
    forwarded.upcoming = readableUpcoming(allowed, window.location.origin, consent);
    forwarded.track = request.track;
  }
  return known === true
    ? { ok: true, request: forwarded }
    : { ok: true, request: forwarded, consent: consent.check(verdict.url) };
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

let relay: DownloaderRelay | undefined;

/** Gives the frame port C with a token the background vouches for, and the hook port B to us. */
async function connectFrame(f: HTMLIFrameElement, origin: string): Promise<void> {
  const token = randomToken();
  const grant: ToBackground = { type: 'downloader-grant', token };
  const answer = (await api.runtime.sendMessage(grant)) as RedeemAnswer | undefined;
  if (!answer?.ok || frame !== f) throw new Error('the background did not register the token');
  const toFrame = new MessageChannel();
  const toHookChannel = new MessageChannel();
  relay?.close();
  relay = new DownloaderRelay(toHookChannel.port2, toFrame.port1, {
    authorize,
    hello: () => ({ session, pageUrl: redactUrl(window.location.href) }),
  });
  // Only the frame's window at the extension's origin can receive this (never the page).
  f.contentWindow?.postMessage({ [DOWNLOADER_PORT]: token }, origin, [toFrame.port2]);
  toHook({ type: 'downloader-port' }, [toHookChannel.port1]);
}

function ensureFrame(): void {
  if (frame?.isConnected) return;
  const url = api.runtime.getURL('downloader.html');
  const origin = new URL(url).origin;
  const f = document.createElement('iframe');
  frame = f;
  f.setAttribute('aria-hidden', 'true');
  f.tabIndex = -1;
  // Rendered (1 px in a corner, not clickable; downloader.html has no background, so nothing
  // shows), not display: none: Chromium runs the process of a frame it does not render at
  // background priority (nice 5 on Linux; a transparent frame behind the page was too), and on a
  // busy machine the downloader then gets a third of the CPU weight of the page and falls behind
  // its data (issue 13).
  const style: [string, string][] = [
    ['position', 'fixed'],
    ['left', '0'],
    ['top', '0'],
    ['width', '1px'],
    ['height', '1px'],
    ['border', '0'],
    ['margin', '0'],
    ['padding', '0'],
    ['pointer-events', 'none'],
  ];
  for (const [property, value] of style) f.style.setProperty(property, value, 'important');
  f.addEventListener('load', () => {
    // Every load (also after the page moved the element) gets a fresh token and ports.
    connectFrame(f, origin).catch(() => toHook({ type: 'downloader-failed', reason: 'downloader-unavailable' }));
  });
  f.src = url;
  const attach = () => {
    try {
      (document.documentElement ?? document.body).appendChild(f);
    } catch {
      toHook({ type: 'downloader-failed', reason: 'downloader-unavailable' });
    }
  };
  if (document.documentElement) attach();
  else document.addEventListener('readystatechange', attach, { once: true });
}

function onHookMessage(event: MessageEvent): void {
  const data: unknown = event.data;
  if (!isObject(data)) return;
  const m = data as unknown as HookToContent;
  if (m.type === 'need-downloader') {
    // No frame for a disabled site either: the frame opens origo as soon as it attaches.
    if (settings?.enabled && siteEnabled(settings, siteHost())) ensureFrame();
    else toHook({ type: 'downloader-failed', reason: settings?.enabled ? 'site-disabled' : 'disabled' });
  } else if (m.type === 'counters') {
    const message: ToBackground = {
      type: 'counters',
      session,
      top: window === window.top,
      // Never shown, only used to find the tab's statistics; from this script, not from the page world.
      pageUrl: window.location.href.slice(0, 2048),
      counters: m.counters,
    };
    api.runtime.sendMessage(message).catch(() => {
      // the background is restarting: the next snapshot carries the same totals
    });
  }
}

window.addEventListener(
  'message',
  (event: MessageEvent) => {
    if (event.source !== window) return;
    const data: unknown = event.data;
    if (!isObject(data) || typeof data[HOOK_HELLO] !== 'string') return;
    event.stopImmediatePropagation();
    const port = event.ports[0];
    if (!port || hookPort) return;
    hookPort = port;
    session = String(data[HOOK_HELLO]).slice(0, 64);
    port.onmessage = onHookMessage;
    sendConfig();
  },
  true,
);

loadSettings()
  .then((s) => {
    settings = s;
    sendConfig();
  })
  .catch(() => {
    settings = normalizeSettings(undefined);
    sendConfig();
  });

onSettingsChanged((state) => {
  settings = state.settings;
  sendConfig();
});
