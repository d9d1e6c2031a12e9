/**
 * The isolated-world content script (document_start, all frames). It is the hook's link to the
 * extension: takes port A from the hook's one window message (and stops that message so page
 * listeners never see it), sends the hook its configuration from the settings (and again when
 * they change), makes the invisible downloader frame when the hook first needs it and connects
 * the two with port B, and forwards the hook's counters to the background for the popup.
 */
import { ContentToHook, DOWNLOADER_PORT, HOOK_HELLO, HookToContent, isObject, ToBackground } from '../common/messages';
import { ext, loadSettings } from '../common/ext';
import { normalizeSettings, Settings, SETTINGS_KEY, siteEnabled } from '../common/settings';
import { HookConfig } from '../hook/decide';

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

function ensureFrame(): void {
  if (frame?.isConnected) return;
  const url = api.runtime.getURL('downloader.html');
  const origin = new URL(url).origin;
  const f = document.createElement('iframe');
  frame = f;
  f.setAttribute('aria-hidden', 'true');
  f.tabIndex = -1;
  f.style.setProperty('display', 'none', 'important');
  f.addEventListener('load', () => {
    // Every load (also after the page moved the element) gets a fresh port B.
    const channel = new MessageChannel();
    toHook({ type: 'downloader-port' }, [channel.port1]);
    f.contentWindow?.postMessage({ [DOWNLOADER_PORT]: session }, origin, [channel.port2]);
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
    if (settings?.enabled) ensureFrame();
    else toHook({ type: 'downloader-failed', reason: 'disabled' });
  } else if (m.type === 'counters') {
    const message: ToBackground = {
      type: 'counters',
      session,
      top: window === window.top,
      pageUrl: String(m.pageUrl).slice(0, 2048),
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

api.storage.onChanged.addListener((changes, area) => {
  if (area !== 'local' || !changes[SETTINGS_KEY]) return;
  settings = normalizeSettings(changes[SETTINGS_KEY].newValue);
  sendConfig();
});
