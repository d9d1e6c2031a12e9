/**
 * Background (Chromium: MV3 service worker; Firefox: event page). It keeps statistics: the
 * content scripts send each frame's hook counters, the downloader frames each download's record;
 * they are merged per tab (common/stats.ts) and written to `storage.session` under `tab:<tabId>`,
 * where the popup reads them. And it vouches for the tokens that let a downloader frame accept
 * its content script's port (grants.ts). No WebRTC here (service workers have no
 * RTCPeerConnection): the downloads run in the downloader frames.
 */
import { isObject, RedeemAnswer, SegmentRecord, ToBackground, TOKEN_PATTERN } from '../common/messages';
import { ext, MANAGED_MIRROR_KEY, readManaged, saveSettings } from '../common/ext';
import { Settings } from '../common/settings';
import { applyCounters, applySegment, emptyTab, TAB_KEY_PREFIX, tabKey, TabStats } from '../common/stats';
import { DownloaderGrants } from './grants';

const api = ext();
const tabs = new Map<number, TabStats>();
const dirty = new Set<number>();
let flushTimer: ReturnType<typeof setTimeout> | undefined;
const FLUSH_MS = 200;

/** Statistics written before the worker was last stopped. */
const restored = api.storage.session
  .get(null)
  .then((all) => {
    for (const [key, value] of Object.entries(all as Record<string, unknown>)) {
      if (!key.startsWith(TAB_KEY_PREFIX) || !isObject(value)) continue;
      const tab = value as unknown as TabStats;
      if (typeof tab.tabId === 'number' && !tabs.has(tab.tabId)) tabs.set(tab.tabId, tab);
    }
  })
  .catch(() => undefined);

function flush(): void {
  flushTimer = undefined;
  const items: Record<string, TabStats> = {};
  for (const id of dirty) {
    const tab = tabs.get(id);
    if (tab) items[tabKey(id)] = tab;
  }
  dirty.clear();
  if (Object.keys(items).length > 0) api.storage.session.set(items).catch(() => undefined);
}

function touched(tabId: number): void {
  dirty.add(tabId);
  flushTimer ??= setTimeout(flush, FLUSH_MS);
}

type StatsMessage = Extract<ToBackground, { type: 'counters' | 'segment' }>;

async function onStats(m: StatsMessage, tabId: number): Promise<void> {
  await restored;
  const tab = tabs.get(tabId) ?? emptyTab(tabId);
  if (m.type === 'counters') {
    tabs.set(tabId, applyCounters(tab, m, Date.now()));
  } else {
    tabs.set(tabId, applySegment(tab, m.record as SegmentRecord, Date.now()));
  }
  touched(tabId);
}

const grants = new DownloaderGrants(() => Date.now());
const downloaderUrl = api.runtime.getURL('downloader.html');
const extensionOrigin = new URL(downloaderUrl).origin;

/** Sent by our downloader frame (an extension page), not by a content script. */
function fromDownloaderFrame(sender: chrome.runtime.MessageSender): boolean {
  return typeof sender.url === 'string' && sender.url.split(/[?#]/)[0] === downloaderUrl;
}

/** Sent by a content script in a web page (an extension page's messages carry our own origin). */
function fromContentScript(sender: chrome.runtime.MessageSender): boolean {
  return typeof sender.url === 'string' && !sender.url.startsWith(`${extensionOrigin}/`);
}

api.runtime.onMessage.addListener((message: unknown, sender: chrome.runtime.MessageSender, sendResponse) => {
  if (sender.id !== api.runtime.id || !isObject(message)) return false;
  const m = message as ToBackground;
  const tabId = sender.tab?.id;
  if (tabId === undefined || tabId < 0) return false;
  if (m.type === 'downloader-grant' || m.type === 'downloader-redeem') {
    let ok = false;
    if (typeof m.token === 'string' && TOKEN_PATTERN.test(m.token)) {
      if (m.type === 'downloader-grant' && fromContentScript(sender)) {
        grants.grant(m.token, tabId);
        ok = true;
      } else if (m.type === 'downloader-redeem' && fromDownloaderFrame(sender)) {
        ok = grants.redeem(m.token, tabId);
      }
    }
    const answer: RedeemAnswer = { ok };
    sendResponse(answer);
    return false;
  }
  if ((m.type === 'counters' && isObject(m.counters)) || (m.type === 'segment' && isObject(m.record))) {
    onStats(m, tabId).catch(() => undefined);
  }
  return false;
});

api.tabs.onRemoved.addListener((tabId: number) => {
  tabs.delete(tabId);
  dirty.delete(tabId);
  api.storage.session.remove(tabKey(tabId)).catch(() => undefined);
});

/**
 * Settings preset in the package (`preset-settings.json`, `{}` as built): applied over the stored
 * settings when the extension is installed or updated. Lets a test harness configure a browser
 * where it cannot reach the extension's pages (Firefox under WebDriver BiDi): copy dist/firefox,
 * write the file, install the copy.
 */
const PRESET_FILE = 'preset-settings.json';

async function applyPreset(): Promise<void> {
  const response = await fetch(api.runtime.getURL(PRESET_FILE));
  if (!response.ok) return;
  const preset: unknown = await response.json();
  if (!isObject(preset) || Object.keys(preset).length === 0) return;
  await saveSettings(preset as Partial<Settings>);
}

api.runtime.onInstalled.addListener(() => {
  applyPreset().catch(() => undefined);
});

/**
 * The operator's settings (storage.managed), mirrored into storage.local for every other part
 * (see MANAGED_MIRROR_KEY): read when the background starts and whenever the policy changes. A
 * read that gets no answer is tried again (1 s, 2 s, ... at most 30 s apart) until one does.
 */
let mirrorTimer: ReturnType<typeof setTimeout> | undefined;

async function mirrorManaged(attempt = 0): Promise<void> {
  clearTimeout(mirrorTimer);
  const managed = await readManaged(2000);
  if (managed === undefined) {
    mirrorTimer = setTimeout(() => void mirrorManaged(attempt + 1), Math.min(30_000, 1000 * 2 ** attempt));
    return;
  }
  const got = (await api.storage.local.get(MANAGED_MIRROR_KEY)) as Record<string, unknown>;
  if (JSON.stringify(got[MANAGED_MIRROR_KEY] ?? null) !== JSON.stringify(managed)) {
    await api.storage.local.set({ [MANAGED_MIRROR_KEY]: managed });
  }
}

api.storage.onChanged.addListener((_changes, area) => {
  if (area === 'managed') mirrorManaged().catch(() => undefined);
});
mirrorManaged().catch(() => undefined);
