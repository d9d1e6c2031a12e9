/**
 * The extension's side of bench:origo-outage (issue 34, "Downloads outlive origo"): Chromium or
 * Firefox ESR with the built extension plays an HLS stream (hls.js, 4 s segments) through four
 * proxies while origo is SIGKILLed for a while and started again on the same port:
 *
 * 1. `before`: origo up, until `beforeMs` passed and MUTP served two segments (its links are up);
 * 2. `outage`: origo killed, for `outageMs`;
 * 3. `after`: origo started again, for `afterMs`; as soon as it listens a second page opens (a
 *    player starting another stream: a new downloader frame, a new client, a new set from origo)
 *    and plays until it had `restartSegments` media requests answered: the `restart-page` row.
 *
 * Per phase, from the page hook's counters (window.__mutp, exposeCounters) read at the phase's
 * ends: media requests answered, served by MUTP, failed (handed to MUTP, not served), fallbacks
 * to the network by reason, `no-proxies` among them, rebuffering events, and every segment's
 * bytes checked against the file (the player page hashes what its loader got). A request under
 * way at a boundary counts in the phase it was answered in.
 *
 * hls.js keeps `bufferS` seconds ahead (its maxBufferLength, set before the player starts), so
 * after the first burst it asks for a segment every 4 s of playback: the stream must outlast the
 * phases (the 120 s `long/hls-ts` does for the default 10 + 60 + 20 s).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import {
  Counters,
  ensureExtensionBuilt,
  ExtensionSettings,
  launchChromium,
  launchFirefox,
  pageCounters,
  PlayerState,
  playerState,
  totalFallbacks,
  waitFor,
} from './browser';
import { Cluster } from './cluster';
import { presetSettingsApplied } from './firefox-sessions';
import { MEDIA_DIR, Origin } from './origin';
import { PlayerPages, startPlayerPages } from './player-pages';

export type BrowserRuntime = 'chromium' | 'firefox';
export type BrowserPhase = 'before' | 'outage' | 'after' | 'restart-page';

export interface BrowserPhaseRow {
  phase: BrowserPhase;
  /** Media requests answered in the phase (served, aborted by the page, or sent to the network). */
  segments: number;
  served: number;
  /** Handed to MUTP and not served: the downloader's failures (each then fetched from the network). */
  failed: number;
  /** Media requests that went to the network, for any reason (failures included). */
  fallbacks: number;
  noProxies: number;
  aborted: number;
  /** The fallbacks by reason, and why origo could not be used for those that needed it. */
  fallbackReasons: Record<string, number>;
  origoCauses: Record<string, number>;
  /** Rebuffering (`waiting` after the first `playing`, not from a seek). */
  stalls: number;
  /** Segments whose bytes were not the file's (none expected); checked: how many were compared. */
  corrupt: number;
  checked: number;
  /** Mean time from a served request to its answer, ms (the hook's servedMs over served). */
  meanServedMs: number | null;
}

export interface BrowserOutageOptions {
  runtime: BrowserRuntime;
  /** A media playlist on the origin (relative path), played by the main page. */
  stream: string;
  /** Played by the page opened at origo's restart. */
  restartStream: string;
  beforeMs: number;
  outageMs: number;
  afterMs: number;
  /** hls.js's maxBufferLength (s). */
  bufferS: number;
  proxies: number;
  /** Media requests the restart page must have answered before it closes. */
  restartSegments: number;
  log?: (line: string) => void;
}

export interface BrowserOutageResult {
  runtime: BrowserRuntime;
  rows: BrowserPhaseRow[];
  /** From origo's restart (listening) to the restart page's first served segment (null: none). */
  restartPageFirstServedMs: number | null;
  /** From origo's restart (listening) until every proxy registered again (null: not within 60 s). */
  reregisteredMs: number | null;
}

/** What a page looked like at one instant. */
interface Snapshot {
  counters: Counters;
  state: PlayerState;
}

const POLL_MS = 500;
/** The player page's origin is on another port: resolve segment URLs to files by path. */
const fileHashes = new Map<string, string>();

function fileSha256(url: string): string {
  const path = decodeURIComponent(new URL(url).pathname).replace(/^\/+/, '');
  let hash = fileHashes.get(path);
  if (hash === undefined) {
    hash = createHash('sha256')
      .update(readFileSync(join(MEDIA_DIR, path)))
      .digest('hex');
    fileHashes.set(path, hash);
  }
  return hash;
}

/** Seconds of media a playlist lists (the sum of its EXTINF durations). */
export async function playlistSeconds(url: string): Promise<number> {
  const text = await (await fetch(url)).text();
  return [...text.matchAll(/#EXTINF:([\d.]+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function diff(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

/** The row of a phase: what changed between two snapshots of one page. */
function phaseRow(phase: BrowserPhase, from: Snapshot | undefined, to: Snapshot): BrowserPhaseRow {
  const a = from?.counters;
  const c = to.counters;
  const served = c.served - (a?.served ?? 0);
  const aborted = c.aborted - (a?.aborted ?? 0);
  const fallbackReasons = diff(c.fallbacks, a?.fallbacks ?? {});
  const fallbacks = totalFallbacks(c) - (a ? totalFallbacks(a) : 0);
  const loaded = to.state.loaded.slice(from?.state.loaded.length ?? 0);
  const servedMs = c.servedMs - (a?.servedMs ?? 0);
  return {
    phase,
    segments: served + aborted + fallbacks,
    served,
    // Requests the hook did not hand on went to the network at once (media - intercepted); every
    // other fallback is an answered request MUTP failed. In-flight requests count in neither.
    failed: fallbacks - (c.media - c.intercepted - (a ? a.media - a.intercepted : 0)),
    fallbacks,
    noProxies: fallbackReasons['no-proxies'] ?? 0,
    aborted,
    fallbackReasons,
    origoCauses: diff(c.origoCauses, a?.origoCauses ?? {}),
    stalls: to.state.stalls - (from?.state.stalls ?? 0),
    corrupt: loaded.filter((l) => l.sha256 !== fileSha256(l.url)).length,
    checked: loaded.length,
    meanServedMs: served > 0 ? Math.round(servedMs / served) : null,
  };
}

/**
 * hls.js's buffer goal, set on its defaults the moment the library defines `Hls` (before the
 * player page's script makes its player): the page itself takes no hls.js options. A string, not
 * a function: tsx's transform would wrap a function's inner arrows in a helper the page lacks.
 */
function limitHlsBuffer(bufferS: number): string {
  return `(() => {
    let hls;
    Object.defineProperty(globalThis, 'Hls', {
      configurable: true,
      get: () => hls,
      set: (value) => {
        hls = value;
        value.DefaultConfig = Object.assign({}, value.DefaultConfig, { maxBufferLength: ${bufferS}, maxMaxBufferLength: ${bufferS} });
      },
    });
  })();`;
}

/** A browser with the extension pointed at origo, and how it opens a page. */
interface OutageBrowser {
  browser: Browser;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

async function launch(
  runtime: BrowserRuntime,
  settings: ExtensionSettings,
  pages: PlayerPages,
): Promise<OutageBrowser> {
  ensureExtensionBuilt();
  if (runtime === 'chromium') {
    const session = await launchChromium();
    try {
      await session.setSettings(settings);
    } catch (e) {
      await session.close();
      throw e;
    }
    // A window of its own: Chromium does not load media in a background tab.
    return {
      browser: session.browser,
      newPage: () => session.browser.newPage({ type: 'window' }),
      close: session.close,
    };
  }
  const session = await launchFirefox(settings);
  try {
    // A page without media (the page server's 404) sees the preset once it is in force.
    await presetSettingsApplied(session, `${pages.url}/no-media`);
  } catch (e) {
    await session.close();
    throw e;
  }
  return { browser: session.browser, newPage: () => session.browser.newPage(), close: session.close };
}

/** A player page and its snapshots. */
class PlayerUnderTest {
  private readonly pageErrors: string[] = [];
  last?: Snapshot;

  private constructor(readonly page: Page) {
    page.on('pageerror', (e) => this.pageErrors.push(String(e)));
  }

  static async open(host: OutageBrowser, url: string, bufferS?: number): Promise<PlayerUnderTest> {
    const page = await host.newPage();
    const player = new PlayerUnderTest(page);
    try {
      if (bufferS !== undefined) await page.evaluateOnNewDocument(limitHlsBuffer(bufferS));
      await page.goto(url, { waitUntil: 'load' });
    } catch (e) {
      await page.close().catch(() => undefined);
      throw e;
    }
    return player;
  }

  /** The page now (its counters appear once the extension's settings reached the hook). */
  async snapshot(label: string): Promise<Snapshot> {
    const s = await waitFor(
      `${label}: the page hook's counters (exposeCounters)`,
      async () => {
        const counters = await pageCounters(this.page);
        return counters ? { counters, state: await playerState(this.page) } : undefined;
      },
      20_000,
      100,
    );
    const errors = [...s.state.errors, ...this.pageErrors];
    if (errors.length > 0) throw new Error(`${label}: player errors: ${errors.slice(0, 5).join('; ')}`);
    this.last = s;
    return s;
  }

  /** Polls until `done` holds or `ms` passed; returns the last snapshot. */
  async until(label: string, ms: number, done: (s: Snapshot) => boolean = () => false): Promise<Snapshot> {
    const end = Date.now() + ms;
    let s = await this.snapshot(label);
    while (!done(s) && Date.now() < end) {
      await sleep(Math.min(POLL_MS, Math.max(0, end - Date.now())));
      s = await this.snapshot(label);
    }
    return s;
  }

  /** Nothing the hook handed on is still waiting for an answer (bounded). */
  async settled(label: string, ms = 15_000): Promise<Snapshot> {
    return this.until(label, ms, ({ counters: c }) => c.media === c.served + c.aborted + totalFallbacks(c));
  }

  close(): Promise<void> {
    return this.page.close().catch(() => undefined);
  }
}

/** The scenario (see the top) on a running deployment (origo, `o.proxies` proxies, the origin). */
export async function runBrowserOutage(
  cluster: Cluster,
  origin: Origin,
  o: BrowserOutageOptions,
): Promise<BrowserOutageResult> {
  const contentS = await playlistSeconds(`${origin.url}/${o.stream}`);
  // The player stops asking once the rest is buffered: the phases must end before that.
  const neededS = (o.beforeMs + o.outageMs + o.afterMs) / 1000 + o.bufferS + 4;
  if (contentS < neededS)
    throw new Error(
      `${o.stream} lasts ${contentS} s: the phases need about ${neededS} s of it (a shorter outage or --buffer-s)`,
    );
  const pages = await startPlayerPages();
  const settings: ExtensionSettings = {
    mode: 'rlnc',
    proxies: o.proxies,
    exposeCounters: true,
    origoUrl: cluster.clientUrl,
  };
  const log = (line: string) => o.log?.(`${o.runtime}: ${line}`);
  let host: OutageBrowser;
  try {
    host = await launch(o.runtime, settings, pages);
  } catch (e) {
    await pages.close();
    throw e;
  }
  try {
    const main = await PlayerUnderTest.open(host, pages.playerUrl('hls', `${origin.url}/${o.stream}`), o.bufferS);
    await main.until('before', o.beforeMs);
    const linksUp = await main.until('before: two segments served by MUTP', 30_000, (s) => s.counters.served >= 2);
    if (linksUp.counters.served < 2)
      throw new Error(`no segment served by MUTP with origo up: ${JSON.stringify(linksUp.counters)}`);
    const atKill = await main.snapshot('at the kill');
    cluster.killOrigo(0);
    log(`origo killed (SIGKILL) after ${atKill.counters.served} segments served`);
    const atRestart = await main.until('outage', o.outageMs);
    log('starting origo again');
    const restartAsked = Date.now();
    await cluster.restartOrigo();
    const restartedAt = Date.now();
    log(`origo listening again after ${restartedAt - restartAsked} ms: a new page starts another stream`);
    let reregisteredMs: number | null = null;
    const reregistered = waitFor(
      'every proxy registered again',
      async () => ((await cluster.listProxies()).length >= o.proxies ? Date.now() - restartedAt : undefined),
      60_000,
    ).then(
      (ms) => (reregisteredMs = ms),
      () => undefined,
    );
    // The new page and the main page's series run side by side.
    const restartPage = (async () => {
      const page = await PlayerUnderTest.open(host, pages.playerUrl('hls', `${origin.url}/${o.restartStream}`));
      try {
        let firstServedMs: number | null = null;
        const s = await page.until('the restart page', 30_000, (s) => {
          if (firstServedMs === null && s.counters.served > 0) firstServedMs = Date.now() - restartedAt;
          return s.counters.served + totalFallbacks(s.counters) >= o.restartSegments;
        });
        return { row: phaseRow('restart-page', undefined, s), firstServedMs };
      } finally {
        await page.close();
      }
    })();
    await main.until('after', Math.max(0, o.afterMs - (Date.now() - restartAsked)));
    const end = await main.settled('the end');
    const restart = await restartPage;
    await reregistered;
    await main.close();
    const rows = [
      phaseRow('before', undefined, atKill),
      phaseRow('outage', atKill, atRestart),
      phaseRow('after', atRestart, end),
      restart.row,
    ];
    for (const r of rows) log(rowLine(r));
    return { runtime: o.runtime, rows, restartPageFirstServedMs: restart.firstServedMs, reregisteredMs };
  } finally {
    await host.close();
    await pages.close();
  }
}

export function rowLine(r: BrowserPhaseRow): string {
  return (
    `${r.phase.padEnd(12)} segments ${r.segments}, served ${r.served}, failed ${r.failed}, fallbacks ${r.fallbacks}` +
    `${r.fallbacks > 0 ? ` ${JSON.stringify(r.fallbackReasons)}` : ''}, no-proxies ${r.noProxies}, stalls ${r.stalls}, ` +
    `corrupt ${r.corrupt} of ${r.checked}, mean served ${r.meanServedMs ?? '-'} ms`
  );
}
