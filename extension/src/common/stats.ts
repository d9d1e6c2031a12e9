/**
 * Per-tab statistics the popup shows, kept by the background in `storage.session` under
 * `tab:<tabId>` (so they survive the service worker being stopped): every page frame's hook
 * counters, the last downloads with their per-proxy shares, and per-proxy totals. Pure, so the
 * aggregation is tested without a browser.
 */
import { Counters, sanitizeCounters, sumCounters } from './counters';
import { SegmentRecord } from './messages';

export const TAB_KEY_PREFIX = 'tab:';
export const MAX_SEGMENTS = 100;
const MAX_FRAMES = 32;
const MAX_PROXIES = 64;

export interface ProxyTotals {
  name: string;
  /** Downloads it took part in, and its summed share of them (share-weighted bytes). */
  downloads: number;
  bytes: number;
}

export interface TabStats {
  tabId: number;
  pageUrl: string;
  updatedAt: number;
  /** Hook session of the top frame's current document; a new one resets the tab's statistics. */
  topSession?: string;
  /** Counters by hook session (one per page frame). */
  frames: Record<string, Counters>;
  segments: SegmentRecord[];
  proxies: Record<string, ProxyTotals>;
}

export function tabKey(tabId: number): string {
  return `${TAB_KEY_PREFIX}${tabId}`;
}

export function emptyTab(tabId: number, pageUrl = ''): TabStats {
  return { tabId, pageUrl, updatedAt: 0, frames: {}, segments: [], proxies: {} };
}

/** The tab's counters over all its frames. */
export function tabCounters(tab: TabStats): Counters {
  return sumCounters(Object.values(tab.frames));
}

/** Applies a counters snapshot from a frame's hook. Returns the (possibly reset) tab. */
export function applyCounters(
  tab: TabStats,
  m: { session: string; top: boolean; pageUrl: string; counters: unknown },
  now: number,
): TabStats {
  const session = String(m.session).slice(0, 64);
  let t = tab;
  if (m.top && t.topSession !== undefined && t.topSession !== session) t = emptyTab(t.tabId); // a new page
  if (m.top) {
    t.topSession = session;
    t.pageUrl = String(m.pageUrl).slice(0, 2048);
  }
  if (!(session in t.frames) && Object.keys(t.frames).length >= MAX_FRAMES) {
    delete t.frames[Object.keys(t.frames)[0]];
  }
  t.frames[session] = sanitizeCounters(m.counters);
  t.updatedAt = now;
  return t;
}

/** Adds one download record. */
export function applySegment(tab: TabStats, record: SegmentRecord, now: number): TabStats {
  tab.segments.push(record);
  if (tab.segments.length > MAX_SEGMENTS) tab.segments.splice(0, tab.segments.length - MAX_SEGMENTS);
  if (record.ok && !record.cached) {
    for (const p of record.proxies ?? []) {
      const key = String(p.name).slice(0, 128);
      let totals = tab.proxies[key];
      if (!totals) {
        if (Object.keys(tab.proxies).length >= MAX_PROXIES) continue;
        totals = tab.proxies[key] = { name: key, downloads: 0, bytes: 0 };
      }
      totals.downloads++;
      totals.bytes += Math.round((Number(p.share) || 0) * (Number(record.objectBytes) || 0));
    }
  }
  tab.updatedAt = now;
  return tab;
}
