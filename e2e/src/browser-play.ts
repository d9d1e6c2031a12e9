/**
 * The pieces of a browser player run that bench:browser and profile:browser share: the caps of a
 * cell, warming the proxies' caches, the segment list of an HLS playlist, and one play of the
 * player page until every segment was fetched (with the extension's download records).
 */
import type { Browser, Page } from 'puppeteer-core';
import {
  Counters,
  pageCounters,
  PlayerState,
  playerState,
  SegmentRecord,
  TabStats,
  totalFallbacks,
  waitFor,
} from './browser';
import { clientToken, Cluster } from './cluster';
import { adminProxies } from './proxy-metrics';

/** N = 1: 896; N = 2: 896 + 1792; N = 4: 2 × 896 + 2 × 1792 (KB/s, 1 KB = 1024 B). */
export function capsFor(n: number): number[] {
  if (n === 1) return [896];
  return Array.from({ length: n }, (_, i) => (i < n / 2 ? 896 : 1792));
}

/** Fetches every segment once through each proxy's HTTP endpoint (headers only), so no cell pays the origin fetch. */
export async function warmProxies(cluster: Cluster, segmentUrls: string[]): Promise<void> {
  const proxies = await adminProxies(cluster);
  const headers = { authorization: `Bearer ${await clientToken(cluster.clientUrl)}` };
  await Promise.all(
    proxies.map(async (p) => {
      for (const url of segmentUrls) {
        const r = await fetch(`${p.httpUrl.replace(/\/+$/, '')}/v1/http?url=${encodeURIComponent(url)}`, { headers });
        if (!r.ok) throw new Error(`warming ${p.name} with ${url}: HTTP ${r.status}`);
        await r.body?.cancel();
      }
    }),
  );
}

export async function segmentUrlsOf(manifestUrl: string): Promise<string[]> {
  const text = await (await fetch(manifestUrl)).text();
  const urls = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => new URL(l, manifestUrl).href);
  const init = /#EXT-X-MAP:URI="([^"]+)"/.exec(text);
  if (init) urls.unshift(new URL(init[1], manifestUrl).href);
  if (urls.length === 0) throw new Error(`${manifestUrl}: no segments (bench:browser plays HLS media playlists)`);
  return urls;
}

/**
 * The browser a play runs in. With `tabStats` (Chromium: the extension's storage is reachable)
 * the play returns the extension's download records; without (Firefox ESR: BiDi does not reach
 * moz-extension:// pages) only the page's own view of each segment.
 */
export interface PlayBrowser {
  browser: Browser;
  tabStats?(pageUrl: string): Promise<TabStats | undefined>;
}

/** A segment as the player's loader saw it: from its request to the answer (extension and relay included). */
export interface PageSegment {
  url: string;
  bytes: number;
  durationMs: number;
  goodputBps: number;
}

/** The page's timed segments (hls.js's loader; a dash.js page has no timings), in answer order. */
export function pageSegmentsOf(state: PlayerState): PageSegment[] {
  return state.loaded
    .filter((l) => l.startMs !== undefined && l.endMs !== undefined && l.endMs > l.startMs)
    .sort((a, b) => a.endMs! - b.endMs!)
    .map((l) => {
      const durationMs = l.endMs! - l.startMs!;
      return { url: l.url, bytes: l.bytes, durationMs, goodputBps: (l.bytes * 1000) / durationMs };
    });
}

export interface PlayResult {
  repeat: number;
  /** The extension's download records (none without PlayBrowser.tabStats). */
  segments: SegmentRecord[];
  /** Every segment as the page timed it. */
  pageSegments: PageSegment[];
  counters: Counters;
  state: PlayerState;
  startupMs: number;
  wallMs: number;
  /** Seeks made (PlayOptions.seekTo). */
  seeks: number;
}

/** What a play does besides playing. */
export interface PlayOptions {
  beforeLoad?(page: Page): Promise<void>;
  beforeClose?(page: Page): Promise<void>;
  /**
   * Media times (s) to seek to, in order, each once playback has gone on 1 s past the previous
   * position. The play then ends when the player fetched `lastSegmentUrl` (it skips segments).
   */
  seekTo?: number[];
  lastSegmentUrl?: string;
}

/**
 * Opens the player page, waits until it fetched all `segmentCount` segments (with seeks: the
 * last one), and returns the extension's records of them (where the browser gives them) and the
 * page's timings. A profiler's hooks run on the new page before it navigates and before it closes.
 */
export async function playOnce(
  session: PlayBrowser,
  playerUrl: string,
  segmentCount: number,
  repeat: number,
  playTimeoutMs: number,
  hooks: PlayOptions = {},
): Promise<PlayResult> {
  const seekTo = hooks.seekTo ?? [];
  if (seekTo.length > 0 && !hooks.lastSegmentUrl) throw new Error('seeking plays need lastSegmentUrl');
  const page = await session.browser.newPage();
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const t0 = Date.now();
  try {
    await hooks.beforeLoad?.(page);
    await page.goto(playerUrl, { waitUntil: 'load' });
    let state: PlayerState | undefined;
    let counters: Counters | undefined;
    let from = 0;
    for (const to of seekTo) {
      await waitFor(
        `playback past ${from + 1} s before seeking to ${to} s`,
        async () => {
          state = await playerState(page);
          if (state.errors.length > 0) throw new Error(`player error: ${state.errors.join('; ')}`);
          return state.started && state.currentTime >= from + 1 ? true : undefined;
        },
        playTimeoutMs,
      );
      await page.evaluate((t) => {
        const doc = (globalThis as unknown as { document: { querySelector(s: string): { currentTime: number } } })
          .document;
        doc.querySelector('video').currentTime = t;
      }, to);
      from = to;
    }
    const done = (s: PlayerState, c: Counters): boolean => {
      if (!s.started) return false;
      if (seekTo.length > 0) return s.loaded.some((l) => l.url === hooks.lastSegmentUrl);
      return c.served + c.aborted + totalFallbacks(c) >= segmentCount && s.loaded.length >= segmentCount;
    };
    await waitFor(
      seekTo.length > 0
        ? `the player to fetch ${hooks.lastSegmentUrl}`
        : `the player to fetch all ${segmentCount} segments`,
      async () => {
        state = await playerState(page);
        counters = await pageCounters(page);
        if (state.errors.length > 0 || pageErrors.length > 0) {
          throw new Error(`player error: ${[...state.errors, ...pageErrors].join('; ')}`);
        }
        return counters && done(state, counters) ? true : undefined;
      },
      playTimeoutMs,
    ).catch((e: unknown) => {
      throw new Error(
        `${String(e)}; currentTime ${state?.currentTime}, counters ${JSON.stringify(counters)}, errors ${JSON.stringify(state?.errors)}`,
      );
    });
    const segments = session.tabStats ? await downloadRecords(session.tabStats, playerUrl, counters!) : [];
    const playing = state!.events.find((e) => e[0] === 'playing');
    return {
      repeat,
      segments,
      pageSegments: pageSegmentsOf(state!),
      counters: counters!,
      state: state!,
      startupMs: playing ? playing[2] : NaN,
      wallMs: Date.now() - t0,
      seeks: seekTo.length,
    };
  } finally {
    await hooks.beforeClose?.(page).catch(() => undefined);
    await page.close();
  }
}

/** The extension's records of a play, once every request the downloader answered has one (bounded). */
async function downloadRecords(
  tabStats: (pageUrl: string) => Promise<TabStats | undefined>,
  playerUrl: string,
  counters: Counters,
): Promise<SegmentRecord[]> {
  // One record per request the downloader answered: those the page aborted have none, nor those
  // the hook gave up on at its deadline ('timeout': it cancels them, unless they had ended).
  const expectedRecords = counters.intercepted - counters.aborted - (counters.fallbacks.timeout ?? 0);
  let records = 0;
  const tab = await waitFor(
    'the download records in storage.session',
    async () => {
      const t = await tabStats(playerUrl);
      records = t?.segments.length ?? 0;
      return t && records >= expectedRecords ? t : undefined;
    },
    // A request the downloader failed after a disconnection records when its download ends.
    30_000,
  ).catch((e: unknown) => {
    throw new Error(`${String(e)}; ${records} of ${expectedRecords} records; counters ${JSON.stringify(counters)}`);
  });
  return tab.segments;
}
