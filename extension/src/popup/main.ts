/**
 * The popup: live statistics of the active tab (or of `?tab=<id>`, which tests use) from
 * `storage.session` — counters, fallbacks by reason, a goodput chart of the last downloads,
 * per-proxy contribution and the recent downloads — plus the global and per-site switches.
 */
import { Counters, totalFallbacks } from '../common/counters';
import { ext, loadSettingsState, onSettingsChanged, saveSettings } from '../common/ext';
import { SegmentRecord } from '../common/messages';
import { mergeSettings, Settings, SettingsState, siteEnabled, siteKey } from '../common/settings';
import { estimateSavings, workerNotice } from '../common/explain';
import { emptyTab, tabCounters, tabKey, TabStats } from '../common/stats';
import { goodputChart } from './chart';
import { ConnectionView } from './connection-view';
import { formatBytes, formatMs, formatRate, shortName } from './format';

const api = ext();
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

let tabId = -1;
let host = '';
let state: SettingsState = mergeSettings(undefined, undefined);
let settings: Settings = state.settings;
let connection: ConnectionView | undefined;
let stats: TabStats = emptyTab(-1);

async function findTab(): Promise<void> {
  const param = new URLSearchParams(location.search).get('tab');
  if (param !== null && /^\d+$/.test(param)) {
    tabId = Number(param);
    try {
      const tab = await api.tabs.get(tabId);
      host = tab.url ? new URL(tab.url).hostname : '';
    } catch {
      host = '';
    }
    return;
  }
  const [tab] = await api.tabs.query({ active: true, currentWindow: true });
  tabId = tab?.id ?? -1;
  try {
    host = tab?.url ? new URL(tab.url).hostname : '';
  } catch {
    host = '';
  }
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string,
  className?: string,
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (className) e.className = className;
  return e;
}

const LOCKED_TITLE = 'set by your administrator';

function renderSwitches(): void {
  const enabled = $<HTMLInputElement>('enabled');
  enabled.checked = settings.enabled;
  enabled.disabled = state.locked.includes('enabled');
  enabled.title = enabled.disabled ? LOCKED_TITLE : '';
  const site = $<HTMLInputElement>('site');
  const siteLocked = state.locked.includes('disabledSites');
  site.disabled = host === '' || siteLocked;
  site.title = siteLocked ? LOCKED_TITLE : '';
  site.checked = host !== '' && siteEnabled(settings, host);
  $('site-name').textContent = host || 'this site';
  $('config').textContent = `${settings.mode}, N = ${settings.proxies}, origo ${settings.origoUrl}`;
}

function renderCounters(c: Counters): void {
  $('c-media').textContent = String(c.media);
  $('c-served').textContent = String(c.served);
  $('c-fallbacks').textContent = String(totalFallbacks(c));
  $('c-aborted').textContent = String(c.aborted);
  const reasons = $('reasons');
  reasons.replaceChildren(
    ...Object.entries(c.fallbacks)
      .sort((a, b) => b[1] - a[1])
      .map(([reason, n]) => el('li', `${reason}: ${n}`)),
    ...workerLines(c),
  );
}

/** "not covered: ..." only when media reached the player past the hook through a worker (common/explain.ts). */
function workerLines(c: Counters): HTMLElement[] {
  const notice = workerNotice(c);
  if (!notice) return [];
  const workers = `${notice.workers} page worker${notice.workers === 1 ? '' : 's'}`;
  const text =
    notice.kind === 'worker-mse'
      ? `not covered: ${workers} (the player runs its MediaSource in a worker: its media goes to the network unseen)`
      : `not covered: ${workers} (≈ ${formatBytes(notice.bytes)} reached the player that no request of the page fetched: a worker fetched it past MUTP)`;
  const li = el('li', text);
  li.id = 'worker-notice';
  return [li];
}

/** Time and bytes saved against the plain network (common/explain.ts; the popup's "How this is computed"). */
function renderSavings(c: Counters): void {
  const s = estimateSavings(c);
  const lines: HTMLElement[] = [];
  if (s.served === 0) {
    lines.push(el('div', 'nothing served by MUTP on this tab yet', 'muted'));
  } else {
    const time = el('div');
    time.id = 'saved-time';
    if (s.savedMs !== undefined && s.networkMs !== undefined && s.network) {
      const verb = s.savedMs >= 0 ? 'saved' : 'lost';
      time.append(el('strong', `${formatMs(Math.abs(s.savedMs))} ${verb}`));
      time.append(
        ` — ${s.served} served in ${formatMs(s.servedMs)}; the network ≈ ${formatMs(s.networkMs)} at ${formatRate(s.network.bps)} (measured on ${s.network.files} file${s.network.files === 1 ? '' : 's'}, ${formatBytes(s.network.bytes)})`,
      );
    } else {
      time.append(
        el('strong', 'time saved: no estimate yet'),
        ` — ${s.served} served in ${formatMs(s.servedMs)}; no file of 256 KiB or more came from the network on this tab to compare with`,
      );
    }
    const bytes = el('div');
    bytes.id = 'saved-bytes';
    bytes.append(el('strong', formatBytes(s.servedBytes)), ' from the edge proxies instead of the origin server');
    lines.push(time, bytes);
  }
  $('savings').replaceChildren(...lines);
}

/**
 * Why origo was not used, below the fallback reasons: the causes counted by the hook
 * ('handshake-timeout 1, origo-down 7') and the last failure in words, e.g.
 * `origo-down (back-off 8 s, 3.2 s left): ... handshake timed out ...`.
 */
function renderOrigo(c: Counters, segments: SegmentRecord[]): void {
  let box = document.getElementById('origo-status');
  if (!box) {
    box = el('div', undefined, 'muted');
    box.id = 'origo-status';
    $('reasons').after(box);
  }
  const causes = Object.entries(c.origoCauses ?? {}).sort((a, b) => b[1] - a[1]);
  const last = [...segments].reverse().find((s) => !s.ok && s.reason === 'origo-unreachable' && s.detail);
  const lines: HTMLElement[] = [];
  if (causes.length > 0) lines.push(el('div', `origo: ${causes.map(([cause, n]) => `${cause} ${n}`).join(', ')}`));
  if (last?.detail) lines.push(el('div', `last: ${last.detail}`));
  box.replaceChildren(...lines);
}

function renderProxies(segments: SegmentRecord[], t: TabStats): void {
  const box = $('proxies');
  const last = [...segments].reverse().find((s) => s.ok && !s.cached && s.proxies.length > 0);
  const rows: HTMLElement[] = [];
  const bar = (name: string, fraction: number, label: string) => {
    const row = el('div', undefined, 'bar');
    const track = el('div', undefined, 'track');
    const fill = el('div', undefined, 'fill');
    fill.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
    track.append(fill);
    row.append(el('span', name, 'name'), track, el('span', label, 'value'));
    return row;
  };
  if (last) {
    rows.push(el('div', `last download (${last.mode})`, 'muted'));
    for (const p of last.proxies)
      rows.push(bar(p.name || shortName(p.proxyId), p.share, `${Math.round(p.share * 100)}%`));
  }
  const totals = Object.values(t.proxies);
  const sum = totals.reduce((a, p) => a + p.bytes, 0);
  if (totals.length > 0) {
    rows.push(el('div', 'all downloads on this tab', 'muted'));
    for (const p of totals.sort((a, b) => b.bytes - a.bytes)) {
      rows.push(bar(p.name, sum > 0 ? p.bytes / sum : 0, formatBytes(p.bytes)));
    }
  }
  if (rows.length === 0) rows.push(el('div', 'no MUTP download yet', 'muted'));
  box.replaceChildren(...rows);
}

function renderSegments(segments: SegmentRecord[]): void {
  const body = $('segments').querySelector('tbody')!;
  const rows = [...segments]
    .reverse()
    .slice(0, 20)
    .map((s) => {
      const tr = el('tr', undefined, s.ok ? '' : 'failed');
      tr.title = `${s.url}${s.range ? ` (${s.range})` : ''}${s.reason ? ` — ${s.detail ?? s.reason}` : ''}`;
      tr.append(
        el('td', shortName(s.url)),
        el('td', formatBytes(s.bytes)),
        el('td', s.ok ? (s.cached ? 'cache' : formatMs(s.durationMs)) : (s.reason ?? 'failed')),
        el('td', s.ok && !s.cached ? formatRate(s.goodputBps) : ''),
        el('td', s.ok && !s.cached ? s.normalizedGoodput.toFixed(2) : ''),
        el('td', s.mode),
      );
      return tr;
    });
  body.replaceChildren(...rows);
}

function render(): void {
  renderSwitches();
  const counters = tabCounters(stats);
  renderCounters(counters);
  renderSavings(counters);
  renderOrigo(counters, stats.segments);
  $('chart').replaceChildren(goodputChart(stats.segments));
  renderProxies(stats.segments, stats);
  renderSegments(stats.segments);
  document.body.setAttribute('data-ready', '1');
}

function applyState(next: SettingsState): void {
  state = next;
  settings = next.settings;
  connection?.setState(next);
}

async function main(): Promise<void> {
  await findTab();
  applyState(await loadSettingsState());
  connection = new ConnectionView($('connection'), state);
  const got = (await api.storage.session.get(tabKey(tabId))) as Record<string, unknown>;
  stats = (got[tabKey(tabId)] as TabStats | undefined) ?? emptyTab(tabId);
  render();
  // Opening the popup checks origo at once (one WebSocket, bounded): the status is there before any video plays.
  connection.test().catch(() => undefined);

  api.storage.onChanged.addListener((changes, area) => {
    if (area === 'session' && changes[tabKey(tabId)]) {
      stats = (changes[tabKey(tabId)].newValue as TabStats | undefined) ?? emptyTab(tabId);
      render();
    }
  });
  onSettingsChanged((next) => {
    applyState(next);
    render();
  });

  $<HTMLInputElement>('enabled').addEventListener('change', (e) => {
    saveSettings({ enabled: (e.target as HTMLInputElement).checked }).catch(() => undefined);
  });
  $<HTMLInputElement>('site').addEventListener('change', (e) => {
    if (!host) return;
    const on = (e.target as HTMLInputElement).checked;
    const key = siteKey(host);
    const sites = settings.disabledSites.filter((s) => s !== key && !(on && key.endsWith(`.${s}`)));
    if (!on) sites.push(key);
    saveSettings({ disabledSites: sites }).catch(() => undefined);
  });
}

main().catch((e: unknown) => {
  $('config').textContent = `cannot show statistics: ${String(e)}`;
  document.body.setAttribute('data-ready', '1');
});
