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
 * The four MUTP plays run side by side (each in a window of its own): two Chromium windows in
 * rlnc, a second Chromium in fountain and Firefox in rlnc; what the proxies and origo counted is
 * checked over them by mode. Each Chromium gets its settings once, before it opens any page. The
 * six network-only plays run side by side too: three with the extension off in the first
 * Chromium, three in the second while origo is stopped.
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
import {
  adminProxies,
  countsDelta,
  hashTree,
  monitoring,
  origoRecords,
  parsePrometheus,
  ProxyCounts,
  proxyCounts,
  ProxyListing,
  transfersIn,
} from '../src/proxy-metrics';
import { allStarted } from './all-started';
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
/** rlnc for the MUTP plays, then switched off. */
let chromium: ChromiumSession;
/** fountain for the MUTP play, then rlnc with origo stopped. */
let fountainChromium: ChromiumSession;
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
  // Side by side: the Chromiums launch while the cluster starts, Firefox (its preset names origo)
  // once it is up; each is kept as soon as it is up, so afterAll closes it also when another failed.
  // The settings go in before any page opens: a case never plays in a profile whose settings
  // were just changed (a page that loads meanwhile could take the old ones).
  const clusterUp = startCluster({ proxies: PROXIES, allowPrivateOrigins: true }).then((c) => (cluster = c));
  const settings = async (mode: ExtensionSettings['mode']): Promise<ExtensionSettings> => ({
    origoUrl: (await clusterUp).clientUrl,
    mode,
    proxies: 4,
    exposeCounters: true,
  });
  await allStarted([
    clusterUp,
    launchChromium().then(async (c) => {
      chromium = c;
      await c.setSettings(await settings('rlnc'));
    }),
    launchChromium().then(async (c) => {
      fountainChromium = c;
      await c.setSettings(await settings('fountain'));
    }),
    settings('rlnc').then((s) => launchFirefox(s).then((f) => (firefox = f))),
  ]);
}, 300_000);

afterAll(async () => {
  await firefox?.close();
  await fountainChromium?.close();
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
  // The player still asks for segments ahead: wait until the hook answered every request it took
  // (served, aborted or handed to the network) and the page hashed every object it got, so that
  // the counters and the page's objects below describe the same requests. Read together; on a
  // timeout the last reading goes to the assertions, which show what was missing.
  let settled: { state: PlayerState; counters?: Counters } | undefined;
  await waitFor(
    'the hook to answer every request it took and the page to hash every object',
    async () => {
      const counters = await pageCounters(page);
      settled = { state: await playerState(page), counters };
      const answered =
        counters !== undefined && counters.media === counters.served + counters.aborted + totalFallbacks(counters);
      return answered && settled.state.hashing === 0 && settled.state.loaded.length >= counters.served
        ? true
        : undefined;
    },
    10_000,
  ).catch(() => undefined);
  const state = settled?.state ?? (await playerState(page));
  expect({ errors: state.errors, pageErrors }).toEqual({ errors: [], pageErrors: [] });
  const c = settled?.counters;
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
async function expectTabStats(session: ChromiumSession, played: Played, mode: string): Promise<void> {
  // The background's per-tab statistics: one successful 4-proxy download per segment.
  const tab = await waitFor(
    'per-tab statistics in storage.session',
    async () => {
      const t = await session.tabStats(played.url);
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

/** The four MUTP plays, side by side, and what was counted before them. */
interface MutpPlays {
  before: ProxyCounts[];
  recordsBefore: { rlnc: number; fountain: number };
  /** Chromium, rlnc: HLS fMP4 and DASH. */
  rlnc: Played[];
  /** The second Chromium, fountain: HLS TS. */
  fountain: Played;
  /** Firefox ESR, rlnc: HLS fMP4 (hls.js). */
  firefox: Played;
}

let mutpPlays: Promise<MutpPlays> | undefined;

/**
 * Starts the four MUTP plays once (the first test that needs them), each in a window of its own;
 * every test of the block checks its part, and the block closes the pages after its last test
 * (the per-tab statistics are read while the tab is open).
 */
function playedByMutp(): Promise<MutpPlays> {
  mutpPlays ??= (async () => {
    const before = await proxyCounts(cluster);
    const recordsBefore = {
      rlnc: (await origoRecords(cluster, 'rlnc')).length,
      fountain: (await origoRecords(cluster, 'fountain')).length,
    };
    const [fmp4, dash, fountain, inFirefox] = await allPlayed([
      play(chromium, STREAMS[0], PLAY_SECONDS, { window: true }),
      play(chromium, STREAMS[2], PLAY_SECONDS, { window: true }),
      play(fountainChromium, STREAMS[1], PLAY_SECONDS, { window: true }),
      play(firefox, STREAMS[0], PLAY_SECONDS),
    ]);
    return { before, recordsBefore, rlnc: [fmp4, dash], fountain, firefox: inFirefox };
  })();
  return mutpPlays;
}

// Each play takes its 20 s of real time, so the four run at once: two Chromium windows in rlnc, a
// second Chromium in fountain, Firefox in rlnc (the proxies keep their counts by mode).
describe('with the extension, rlnc/fountain from four proxies', () => {
  afterAll(async () => {
    const plays = await mutpPlays?.catch(() => undefined);
    if (plays) await Promise.all([...plays.rlnc, plays.fountain, plays.firefox].map((p) => p.page.close()));
  });

  test('Chromium: HLS fMP4 and DASH play 20 s side by side with every segment served by MUTP (rlnc)', async () => {
    const { rlnc } = await playedByMutp();
    for (const p of rlnc) expectPlayedByMutp(p);
    for (const p of rlnc) await expectTabStats(chromium, p, 'rlnc');
  });

  test('Chromium HLS TS (fountain) beside Firefox ESR HLS fMP4 (hls.js, rlnc): both play 20 s with every segment served by MUTP', async () => {
    const { fountain, firefox: inFirefox } = await playedByMutp();
    expect(inFirefox.originLog.some((r) => r.userAgent.includes('Firefox'))).toBe(true);
    expectPlayedByMutp(fountain);
    expectPlayedByMutp(inFirefox);
    await expectTabStats(fountainChromium, fountain, 'fountain');
  });

  test('the proxies finished, and origo recorded, one 4-source download per segment of the four plays, by mode', async () => {
    const { before, recordsBefore, rlnc, fountain, firefox: inFirefox } = await playedByMutp();
    await expectProxiesServed(before, [
      { mode: 'rlnc', plays: [...rlnc, inFirefox], recordsBefore: recordsBefore.rlnc },
      { mode: 'fountain', plays: [fountain], recordsBefore: recordsBefore.fountain },
    ]);
  });
});

/**
 * Plays every stream at once, each in a window of its own (network only: light on the CPU), at
 * NETWORK_PLAY_RATE: the same media time in half the wall time.
 */
function playAll(session: ChromiumSession, seconds: number): Promise<Played>[] {
  return STREAMS.map((s) => play(session, s, seconds, { window: true, rate: NETWORK_PLAY_RATE }));
}

/**
 * Each proxy's transfers so far (every mode and outcome), from its /metrics at the address origo
 * listed: origo may be down by the time they are read.
 */
async function transfersAt(listing: ProxyListing[]): Promise<{ name: string; transfers: number }[]> {
  return Promise.all(
    listing.map(async (p) => {
      const r = await fetch(`${p.httpUrl.replace(/\/+$/, '')}/metrics`, monitoring(cluster));
      if (!r.ok) throw new Error(`${p.name} /metrics: HTTP ${r.status}`);
      const samples = parsePrometheus(await r.text()).filter((x) => x.name === 'mutp_proxy_transfers_total');
      return { name: p.name, transfers: samples.reduce((a, x) => a + x.value, 0) };
    }),
  );
}

/** The six network-only plays, side by side, and where the proxies' counts stood before them. */
interface NetworkPlays {
  listing: ProxyListing[];
  before: { name: string; transfers: number }[];
  /** The first Chromium, the extension switched off. */
  disabled: Played[];
  /** The second Chromium, the extension on, origo stopped. */
  origoDown: Played[];
}

let networkPlays: Promise<NetworkPlays> | undefined;

/**
 * Switches the extension off in the first Chromium, stops origo and points the second Chromium's
 * extension at it, then plays every stream in both at once (before any page opens in either).
 * The proxies count nothing meanwhile: the second Chromium cannot reach them without origo, so a
 * transfer would be the switched-off extension's.
 */
function playedFromNetwork(): Promise<NetworkPlays> {
  networkPlays ??= (async () => {
    const listing = await adminProxies(cluster);
    const before = await transfersAt(listing);
    await chromium.setSettings({ enabled: false, origoUrl: cluster.clientUrl, exposeCounters: true });
    await cluster.stopOrigo();
    await fountainChromium.setSettings({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true });
    const played = await allPlayed([
      ...playAll(chromium, SHORT_PLAY_SECONDS),
      ...playAll(fountainChromium, SHORT_PLAY_SECONDS),
    ]);
    return { listing, before, disabled: played.slice(0, STREAMS.length), origoDown: played.slice(STREAMS.length) };
  })();
  return networkPlays;
}

/** A network-only play reached its mark at NETWORK_PLAY_RATE, and the browser fetched every object itself. */
function expectPlayedFromNetwork(p: Played): void {
  expect(p.state.currentTime).toBeGreaterThanOrEqual(SHORT_PLAY_SECONDS);
  expect(p.rates).toEqual([NETWORK_PLAY_RATE]);
  expect(p.counters.media).toBeGreaterThanOrEqual(3);
  expect(totalFallbacks(p.counters)).toBe(p.counters.media);
  expectOriginBytes(p.state);
  const fetched = new Set(browserMediaRequests(p.originLog));
  for (const l of p.state.loaded) expect(fetched.has(new URL(l.url).pathname)).toBe(true);
}

describe('network only, side by side: Chromium with the extension switched off, and with origo down', () => {
  afterAll(async () => {
    const plays = await networkPlays?.catch(() => undefined);
    if (plays) await Promise.all([...plays.disabled, ...plays.origoDown].map((p) => p.page.close()));
  });

  test('extension off: all three streams play from the network, counted as pass-through (disabled)', async () => {
    const { listing, before, disabled } = await playedFromNetwork();
    for (const p of disabled) {
      const c = p.counters;
      expect(c).toMatchObject({ intercepted: 0, served: 0, fallbacks: { disabled: c.media } });
      expectPlayedFromNetwork(p);
    }
    // No proxy served anything.
    expect(listing.length).toBe(PROXIES.length);
    expect(await transfersAt(listing)).toEqual(before);
  });

  test('origo down: all three streams play through the fallback, counted as origo-unreachable', async () => {
    const { origoDown } = await playedFromNetwork();
    for (const p of origoDown) {
      const c = p.counters;
      expect(c).toMatchObject({
        intercepted: c.media,
        served: 0,
        aborted: 0,
        fallbacks: { 'origo-unreachable': c.media },
      });
      expectPlayedFromNetwork(p);
    }
  });
});
