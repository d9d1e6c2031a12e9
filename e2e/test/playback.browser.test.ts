/**
 * Real players in real browsers through the built extension, against the whole local system:
 * the media origin (e2e/media/out, low rendition ≈ 1 Mbit/s), origo and four shaped proxy
 * processes (2 × 896 KB/s, 2 × 1792 KB/s), hls.js 1.7 and dash.js 5.2 pages on another origin.
 *
 * Through the extension (Chromium; Firefox ESR for one stream), each stream plays ≥ 20 s and:
 * - every media request the page made was answered by MUTP: the hook's counters say
 *   served == media with no fallback, and the browser itself never asked the origin for a media
 *   object (only the proxies did, by their User-Agent);
 * - the proxies' own /metrics count one finished transfer per segment each (N = 4) in the mode;
 *   origo stored one download record per segment; the per-tab statistics in storage.session hold
 *   a successful 4-proxy record per segment;
 * - the bytes the player got (hashed in the page at the player's loader) are the origin's files;
 * - playback never rebuffered after it started;
 * - staging (the default) hinted segments ahead of the player, some were staged by the time they
 *   were asked for, and nothing staged went unasked.
 * With the extension switched off, and with origo stopped, the same pages play from the network
 * and the counters say why (`disabled`, `origo-unreachable`); these network-only plays run at
 * twice real time (playback-rate.ts: the same media time and requests in half the wall time).
 *
 * Plays run side by side, two or three at a time (each in a window of its own), and what the
 * proxies and origo counted is checked over the plays that ran together (by mode).
 *
 * Waits are bounded and say what they waited for; a failing play reports the player's state.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { CreatePageOptions, Page } from 'puppeteer-core';
import {
  ChromiumSession,
  Counters,
  ensureExtensionBuilt,
  ExtensionSettings,
  FirefoxSession,
  launchChromium,
  launchFirefox,
  pageCounters,
  PlayerState,
  playerState,
  totalFallbacks,
  waitFor,
} from '../src/browser';
import { Cluster, mixedFleetOfFour, startCluster } from '../src/cluster';
import { MEDIA_DIR, Origin, startOrigin } from '../src/origin';
import { PlayerPages, startPlayerPages } from '../src/player-pages';
import { countsDelta, hashTree, origoRecords, ProxyCounts, proxyCounts, transfersIn } from '../src/proxy-metrics';
import { NETWORK_PLAY_RATE, playbackRates, setPlaybackRate } from './playback-rate';

jest.setTimeout(120_000);

const PROXIES = mixedFleetOfFour('p');
/** Seconds of playback the MUTP plays must reach (the streams are 40 s long). */
const PLAY_SECONDS = 20;
/** Seconds the network-only plays (extension off, origo down) must reach. */
const SHORT_PLAY_SECONDS = 10;

interface Stream {
  name: string;
  player: 'hls' | 'dash';
  manifest: string;
}

const STREAMS: Stream[] = [
  { name: 'HLS fMP4', player: 'hls', manifest: 'low/hls-fmp4/index.m3u8' },
  { name: 'HLS TS', player: 'hls', manifest: 'low/hls-ts/index.m3u8' },
  { name: 'DASH', player: 'dash', manifest: 'low/dash/manifest.mpd' },
];

let origin: Origin;
let pages: PlayerPages;
let cluster: Cluster;
let chromium: ChromiumSession;
let firefox: FirefoxSession;
let files: ReturnType<typeof hashTree>;

beforeAll(async () => {
  if (!existsSync(join(MEDIA_DIR, '.generated'))) {
    throw new Error(`no test streams in ${MEDIA_DIR}: run bash e2e/media/generate.sh (scripts/setup.sh does)`);
  }
  files = hashTree(MEDIA_DIR);
  ensureExtensionBuilt();
  origin = await startOrigin();
  pages = await startPlayerPages();
  cluster = await startCluster({ proxies: PROXIES, allowPrivateOrigins: true });
  // Side by side; each is kept as soon as it is up, so afterAll closes it also when the other failed.
  await Promise.all([
    launchChromium().then((c) => (chromium = c)),
    launchFirefox({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true }).then(
      (f) => (firefox = f),
    ),
  ]);
}, 300_000);

afterAll(async () => {
  await firefox?.close();
  await chromium?.close();
  await cluster?.stop();
  await pages?.close();
  await origin?.close();
});

function summary(state: PlayerState, counters?: Counters): string {
  return JSON.stringify({
    currentTime: state.currentTime,
    readyState: state.readyState,
    stalls: state.stalls,
    errors: state.errors,
    warnings: state.warnings.slice(0, 5),
    loaded: state.loaded.length,
    events: state.events.slice(-10),
    counters,
  });
}

interface Played {
  page: Page;
  url: string;
  state: PlayerState;
  counters: Counters;
  pageErrors: string[];
  /** Origin requests made while this page played. */
  originLog: Origin['log'];
  /** The rates the page's media elements played at, read when the play reached its mark. */
  rates: number[];
}

/**
 * Opens the player page and waits until playback reached `seconds` (fails early on a player
 * error, and after `timeoutMs` with the player's state), then until every loaded object is hashed.
 * `rate`: the media plays that much faster than real time (network-only plays, playback-rate.ts).
 */
async function play(
  session: { browser: { newPage(options?: CreatePageOptions): Promise<Page> } },
  stream: Stream,
  seconds: number,
  options: { timeoutMs?: number; window?: boolean; rate?: number } = {},
): Promise<Played> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const originFrom = origin.log.length;
  // A page of its own window: Chromium does not load media in a background tab.
  const page = await session.browser.newPage(options.window ? { type: 'window' } : undefined);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const url = pages.playerUrl(stream.player, `${origin.url}/${stream.manifest}`);
  await page.goto(url, { waitUntil: 'load' });
  if (options.rate !== undefined) await setPlaybackRate(page, options.rate);
  let last: PlayerState | undefined;
  let counters: Counters | undefined;
  try {
    await waitFor(
      `${stream.name} to play ${seconds} s`,
      async () => {
        last = await playerState(page);
        counters = await pageCounters(page);
        if (last.errors.length > 0 || pageErrors.length > 0) return true; // reported below
        return last.currentTime >= seconds ? true : undefined;
      },
      timeoutMs,
    );
  } catch (e) {
    throw new Error(`${String(e)}; player: ${last ? summary(last, counters) : 'no state'}`);
  }
  const state = await waitFor(
    'the page to finish hashing',
    async () => {
      const s = await playerState(page);
      return s.hashing === 0 ? s : undefined;
    },
    10_000,
  );
  expect({ errors: state.errors, pageErrors }).toEqual({ errors: [], pageErrors: [] });
  const c = await pageCounters(page);
  if (!c) throw new Error('window.__mutp is missing: the hook never got settings with exposeCounters');
  const rates = await playbackRates(page);
  return { page, url, state, counters: c, pageErrors, originLog: origin.log.slice(originFrom), rates };
}

function isMediaPath(path: string): boolean {
  return /\.(ts|m4s|mp4)$/.test(path);
}

/** Media objects a browser (not a proxy) fetched from the origin itself. */
function browserMediaRequests(log: Origin['log']): string[] {
  // HEADs are the extension's CORS-consent checks (no bytes); GETs would be segments from the network.
  return log
    .filter((r) => r.method !== 'HEAD' && isMediaPath(r.path) && !r.userAgent.startsWith('mutp-proxy/'))
    .map((r) => r.path);
}

/** Every object the player got is byte-for-byte the origin's file (hashes made in the page). */
function expectOriginBytes(state: PlayerState): void {
  expect(state.loaded.length).toBeGreaterThan(0);
  for (const l of state.loaded) {
    const path = new URL(l.url).pathname;
    const file = files.get(path);
    expect({ path, bytes: l.bytes, sha256: l.sha256 }).toEqual({ path, bytes: file?.bytes, sha256: file?.sha256 });
  }
}

/** Waits until the proxies' counts moved by `expected` transfers each (they end a moment after the answer). */
async function proxyDelta(before: ProxyCounts[], mode: string, expected: number): Promise<ProxyCounts[]> {
  let delta: ProxyCounts[] = [];
  await waitFor(
    `${expected} ${mode} transfers at each proxy`,
    async () => {
      delta = countsDelta(before, await proxyCounts(cluster));
      return delta.every((p) => transfersIn(p, mode) >= expected) ? true : undefined;
    },
    10_000,
  ).catch(() => undefined); // the assertion below shows the counts
  return delta;
}

/** One play's own checks: it played without rebuffering, and every media request was served by MUTP. */
function expectPlayedByMutp(played: Played): void {
  const { state, counters: c } = played;
  // Playback: reached the mark, no rebuffering once it started.
  expect(state.currentTime).toBeGreaterThanOrEqual(PLAY_SECONDS);
  // With the player's last events when it did rebuffer (a rare Firefox stall is not diagnosed yet).
  expect({ stalls: state.stalls, events: state.stalls > 0 ? state.events.slice(-25) : [] }).toEqual({
    stalls: 0,
    events: [],
  });
  // The hook: every media request was served by MUTP.
  expect(c.media).toBeGreaterThanOrEqual(5);
  // One comparison, so a request that was not served shows why (its fallback or pass reason).
  expect({ served: c.served, intercepted: c.intercepted, aborted: c.aborted, fallbacks: c.fallbacks }).toEqual({
    served: c.media,
    intercepted: c.media,
    aborted: 0,
    fallbacks: {},
  });
  // The page got exactly the origin's bytes for each, and the browser never asked the origin for one.
  expectOriginBytes(state);
  expect(state.loaded.length).toBe(c.served);
  expect(state.loaded.reduce((a, l) => a + l.bytes, 0)).toBe(c.servedBytes);
  expect(browserMediaRequests(played.originLog)).toEqual([]);
}

/** The plays of one mode among plays that ran side by side. */
interface ModePlays {
  mode: string;
  plays: Played[];
  /** origo's records in this mode before the plays. */
  recordsBefore: number;
}

/**
 * What the proxies and origo counted for plays that ran side by side: in each mode, each of the
 * four proxies finished one transfer per segment of those plays, and origo stored a complete
 * 4-source record of each; together the proxies sent at least the bytes the pages got.
 */
async function expectProxiesServed(before: ProxyCounts[], byMode: ModePlays[]): Promise<void> {
  const served = (plays: Played[]) => plays.reduce((a, p) => a + p.counters.served, 0);
  let delta: ProxyCounts[] = [];
  for (const { mode, plays, recordsBefore } of byMode) {
    const n = served(plays);
    delta = await proxyDelta(before, mode, n);
    expect(delta.map((p) => ({ name: p.name, transfers: transfersIn(p, mode) }))).toEqual(
      delta.map((p) => ({ name: p.name, transfers: n })),
    );
    for (const p of delta) expect(p.transfers[`${mode}/done`]).toBe(n);
    // origo stored a record of each download.
    const records = await waitFor(
      `${n} new ${mode} records at origo`,
      async () => {
        const r = await origoRecords(cluster, mode);
        return r.length - recordsBefore >= n ? r : undefined;
      },
      10_000,
    );
    const fresh = records.slice(0, records.length - recordsBefore);
    expect(fresh.length).toBe(n);
    for (const r of fresh) expect({ status: r.status, sources: r.sources }).toEqual({ status: 'complete', sources: 4 });
    const loaded = plays.flatMap((p) => p.state.loaded.map((l) => l.url));
    expect(new Set(fresh.map((r) => r.url))).toEqual(new Set(loaded));
  }
  const all = byMode.flatMap((m) => m.plays);
  const sent = delta.reduce((a, p) => a + (p.bytesSent.mutp ?? 0), 0);
  expect(sent).toBeGreaterThanOrEqual(all.reduce((a, p) => a + p.counters.servedBytes, 0));
}

/** Chromium's per-tab statistics of a play: one successful 4-proxy download per segment, and staging at work. */
async function expectTabStats(played: Played, mode: string): Promise<void> {
  // The background's per-tab statistics: one successful 4-proxy download per segment.
  const tab = await waitFor(
    'per-tab statistics in storage.session',
    async () => {
      const t = await chromium.tabStats(played.url);
      return t && t.segments.length >= played.counters.served ? t : undefined;
    },
    5_000,
  );
  expect(tab.segments.length).toBe(played.counters.served);
  for (const s of tab.segments) {
    expect({ ok: s.ok, mode: s.mode, proxies: s.proxies.length }).toEqual({ ok: true, mode, proxies: 4 });
    expect(s.goodputBps).toBeGreaterThan(0);
    expect(s.normalizedGoodput).toBeGreaterThan(0);
  }
  expect(Object.keys(tab.proxies).sort()).toEqual(PROXIES.map((p) => p.name).sort());
  // Staging (on by default): segments were hinted ahead of the player and found staged, and a
  // play without seeks or switches left nothing staged that the player never asked for.
  // Every media segment is followed (init segments are not in a playlist's play order).
  const media = tab.segments.filter((s) => !/\/init[^/]*$/.test(s.url));
  expect(media.filter((s) => s.staging === undefined).map((s) => s.url)).toEqual([]);
  const staging = media.map((s) => s.staging!);
  expect(Math.max(...staging.map((x) => x.hintsStaged))).toBeGreaterThan(0);
  expect(tab.segments.filter((s) => s.staged).length).toBeGreaterThan(0);
  expect(staging.map((x) => x.wasted)).toEqual(staging.map(() => 0));
}

/** Closes the pages of plays that started, whether or not all of them did. */
async function closeAll(plays: PromiseSettledResult<Played>[]): Promise<void> {
  await Promise.all(plays.map((p) => (p.status === 'fulfilled' ? p.value.page.close() : undefined)));
}

/** Every play's result, or the first failure once all have ended (their pages closed). */
async function allPlayed(plays: Promise<Played>[]): Promise<Played[]> {
  const settled = await Promise.allSettled(plays);
  const failed = settled.find((p): p is PromiseRejectedResult => p.status === 'rejected');
  if (failed) {
    await closeAll(settled);
    throw failed.reason;
  }
  return settled.map((p) => (p as PromiseFulfilledResult<Played>).value);
}

// Each play takes its 20 s of real time: plays run side by side, two at a time (two Chromium
// windows in one mode; then Chromium in fountain beside Firefox in rlnc, whose counts the
// proxies keep by mode), and the proxies' and origo's counts are checked over the plays together.
describe('with the extension, rlnc/fountain from four proxies', () => {
  test('Chromium: HLS fMP4 and DASH play 20 s side by side with every segment served by MUTP (rlnc)', async () => {
    await chromium.setSettings({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true });
    const before = await proxyCounts(cluster);
    const recordsBefore = (await origoRecords(cluster, 'rlnc')).length;
    const played = await allPlayed(
      [STREAMS[0], STREAMS[2]].map((s) => play(chromium, s, PLAY_SECONDS, { window: true })),
    );
    try {
      for (const p of played) expectPlayedByMutp(p);
      await expectProxiesServed(before, [{ mode: 'rlnc', plays: played, recordsBefore }]);
      for (const p of played) await expectTabStats(p, 'rlnc');
    } finally {
      await Promise.all(played.map((p) => p.page.close()));
    }
  });

  test('Chromium HLS TS (fountain) beside Firefox ESR HLS fMP4 (hls.js, rlnc): both play 20 s with every segment served by MUTP', async () => {
    await chromium.setSettings({ origoUrl: cluster.clientUrl, mode: 'fountain', proxies: 4, exposeCounters: true });
    const before = await proxyCounts(cluster);
    const fountainBefore = (await origoRecords(cluster, 'fountain')).length;
    const rlncBefore = (await origoRecords(cluster, 'rlnc')).length;
    const [inChromium, inFirefox] = await allPlayed([
      play(chromium, STREAMS[1], PLAY_SECONDS, { window: true }),
      play(firefox, STREAMS[0], PLAY_SECONDS),
    ]);
    try {
      expect(inFirefox.originLog.some((r) => r.userAgent.includes('Firefox'))).toBe(true);
      expectPlayedByMutp(inChromium);
      expectPlayedByMutp(inFirefox);
      await expectProxiesServed(before, [
        { mode: 'fountain', plays: [inChromium], recordsBefore: fountainBefore },
        { mode: 'rlnc', plays: [inFirefox], recordsBefore: rlncBefore },
      ]);
      await expectTabStats(inChromium, 'fountain');
    } finally {
      await Promise.all([inChromium.page.close(), inFirefox.page.close()]);
    }
  });
});

/**
 * Plays every stream at once, each in a window of its own (network only: light on the CPU), at
 * NETWORK_PLAY_RATE: the same media time in half the wall time.
 */
async function playAll(session: ChromiumSession, seconds: number): Promise<Played[]> {
  return Promise.all(STREAMS.map((s) => play(session, s, seconds, { window: true, rate: NETWORK_PLAY_RATE })));
}

describe('Chromium with the extension switched off', () => {
  test('all three streams play from the network, counted as pass-through (disabled)', async () => {
    const settings: ExtensionSettings = { enabled: false, origoUrl: cluster.clientUrl, exposeCounters: true };
    await chromium.setSettings(settings);
    const before = await proxyCounts(cluster);
    const played = await playAll(chromium, SHORT_PLAY_SECONDS);
    try {
      for (const p of played) {
        const c = p.counters;
        expect(p.state.currentTime).toBeGreaterThanOrEqual(SHORT_PLAY_SECONDS);
        expect(p.rates).toEqual([NETWORK_PLAY_RATE]);
        expect(c.media).toBeGreaterThanOrEqual(3);
        expect(c).toMatchObject({ intercepted: 0, served: 0, fallbacks: { disabled: c.media } });
        expect(totalFallbacks(c)).toBe(c.media);
        expectOriginBytes(p.state);
        // The browser fetched every object the player got from the origin itself.
        const fetched = new Set(browserMediaRequests(p.originLog));
        for (const l of p.state.loaded) expect(fetched.has(new URL(l.url).pathname)).toBe(true);
      }
      // No proxy served anything.
      const delta = countsDelta(before, await proxyCounts(cluster));
      expect(delta.every((d) => Object.keys(d.transfers).length === 0)).toBe(true);
    } finally {
      await Promise.all(played.map((p) => p.page.close()));
    }
  });
});

describe('Chromium with the extension while origo is down', () => {
  test('all three streams play through the fallback, counted as origo-unreachable', async () => {
    await cluster.stopOrigo();
    await chromium.setSettings({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true });
    const played = await playAll(chromium, SHORT_PLAY_SECONDS);
    try {
      for (const p of played) {
        const c = p.counters;
        expect(p.state.currentTime).toBeGreaterThanOrEqual(SHORT_PLAY_SECONDS);
        expect(p.rates).toEqual([NETWORK_PLAY_RATE]);
        expect(c.media).toBeGreaterThanOrEqual(3);
        expect(c).toMatchObject({
          intercepted: c.media,
          served: 0,
          aborted: 0,
          fallbacks: { 'origo-unreachable': c.media },
        });
        expect(totalFallbacks(c)).toBe(c.media);
        expectOriginBytes(p.state);
        const fetched = new Set(browserMediaRequests(p.originLog));
        for (const l of p.state.loaded) expect(fetched.has(new URL(l.url).pathname)).toBe(true);
      }
    } finally {
      await Promise.all(played.map((p) => p.page.close()));
    }
  });
});
