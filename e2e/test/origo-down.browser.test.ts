/**
 * A misbehaving origo must not hold playback back (issue 14, "A hung origo stalls playback";
 * issue 34, "Downloads outlive origo"):
 * Chromium and Firefox ESR with the built extension play the HLS fMP4 stream (hls.js, 4 s
 * segments) while origo is hung (a TCP server that accepts and never answers: no WebSocket
 * handshake) or refused (nothing listening). Against the same page in the same browser without
 * the extension:
 * - playback never rebuffers; how much later it starts (first `playing` event) is printed (the
 *   issue's target: at most 1.5 s);
 * - every media request went to the network, counted as origo-unreachable with the real cause
 *   (handshake-timeout or refused, then origo-down for the requests of a back-off period), never
 *   as the hook's generic 'timeout'; in Chromium the tab's statistics carry the cause in words
 *   (Firefox's background is out of WebDriver BiDi's reach);
 * - hung: the TCP connections origo got are at most one per back-off period (2 s, 4 s, 8 s ...
 *   after each 1 s attempt).
 * And origo killed (SIGKILL) while the extension's links to four real proxies are up (both
 * browsers; origo is started again, its proxies registered, before the second browser's case):
 * playback goes on with every media request served by MUTP through those links, none falls back
 * to the network, no stall.
 * The plays from the network (every one but the killed case's) run at twice real time
 * (playback-rate.ts): the same media time, segments and causes in half the wall time.
 * Chromium changes the extension's settings in one browser; Firefox gets them as the add-on's
 * preset, so each origo case gets a Firefox of its own (launched together, before the baseline
 * play), except the refused case: it plays in the Firefox of the killed case, whose origo is then
 * down (nothing listens on its port). Chromium's killed origo comes back in the background while
 * Firefox sets up.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, CreatePageOptions } from 'puppeteer-core';
import { freePort } from '@mutp/testing/ports';
import { SilentServer, startSilentServer } from '@mutp/testing/silent-server';
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
  TabStats,
  totalFallbacks,
  waitFor,
} from '../src/browser';
import { Cluster, mixedFleetOfFour, startCluster } from '../src/cluster';
import { launchFirefoxWithoutExtension, presetSettingsApplied } from '../src/firefox-sessions';
import { MEDIA_DIR, Origin, startOrigin } from '../src/origin';
import { PlayerPages, startPlayerPages } from '../src/player-pages';
import { NETWORK_PLAY_RATE, playbackRates, setPlaybackRate } from './playback-rate';

jest.setTimeout(120_000);

const MANIFEST = 'low/hls-fmp4/index.m3u8';
const PLAY_SECONDS = 10;
/** The target: start-up at most this much later than without the extension. */
const STARTUP_MARGIN_MS = 1500;
/** The extension's origo limit for a request and its back-off policy (deadlines.ts, origo-backoff.ts). */
const ORIGO_ATTEMPT_MS = 1000;
const BACKOFF = { firstMs: 2000, maxMs: 60_000 };
const SETTINGS: ExtensionSettings = { mode: 'rlnc', proxies: 4, exposeCounters: true };

let origin: Origin;
let pages: PlayerPages;
let hung: SilentServer;
let hungUrl: string;
/**
 * Origo and four proxies for the outage case (its origo is killed there), started in the
 * background while the browsers set up.
 */
let clusterStarting: Promise<Cluster>;
/** Set while a killed case left the outage cluster's origo down. */
let origoKilled = false;
/** The outage cluster's origo coming back after a killed case (started as soon as that case ends). */
let origoRestarting: Promise<void> | undefined;

beforeAll(async () => {
  if (!existsSync(join(MEDIA_DIR, '.generated'))) {
    throw new Error(`no test streams in ${MEDIA_DIR}: run bash e2e/media/generate.sh (scripts/setup.sh does)`);
  }
  ensureExtensionBuilt();
  // In the background while the browsers set up: a loaded machine may take more than the default 30 s.
  clusterStarting = startCluster({
    proxies: mixedFleetOfFour('outage-'),
    allowPrivateOrigins: true,
    readyTimeoutMs: 90_000,
  });
  // Awaited by the outage case (and afterAll): a failure to start fails that case, not this hook.
  clusterStarting.catch(() => undefined);
  hung = await startSilentServer();
  hungUrl = `ws://127.0.0.1:${hung.port}/v1/client`;
  origin = await startOrigin();
  pages = await startPlayerPages();
}, 180_000);

afterAll(async () => {
  await origoRestarting?.catch(() => undefined);
  await (await clusterStarting?.catch(() => undefined))?.stop();
  await pages?.close();
  await origin?.close();
  await hung?.close();
});

/** A port nothing listens on (free a moment ago). */
async function refusedUrl(): Promise<string> {
  return `ws://127.0.0.1:${await freePort()}/v1/client`;
}

/**
 * Starts the outage cluster's origo again on its port, and waits until every proxy registered
 * with it again (their reconnection back-off: a few seconds).
 */
async function restartOrigoAndProxies(cluster: Cluster): Promise<void> {
  await cluster.restartOrigo();
  await waitFor(
    'the four proxies registered again after origo restarted',
    async () => ((await cluster.listProxies()).length >= 4 ? true : undefined),
    30_000,
    100,
  );
}

/**
 * Brings the killed origo back in the background (the next browser sets up meanwhile; only its
 * killed case uses the outage cluster); `origoBackUp` waits for it.
 */
function restartKilledOrigo(cluster: Cluster): void {
  if (!origoKilled || origoRestarting) return;
  origoRestarting = restartOrigoAndProxies(cluster).finally(() => {
    origoKilled = false;
  });
  origoRestarting.catch(() => undefined); // awaited by origoBackUp (and afterAll)
}

/** The outage cluster's origo, if a killed case left it down, up again with every proxy registered. */
async function origoBackUp(cluster: Cluster): Promise<void> {
  restartKilledOrigo(cluster);
  const restarting = origoRestarting;
  origoRestarting = undefined;
  await restarting;
}

/** A browser the player page is opened in, with or without the extension. */
interface PageHost {
  browser: Browser;
  /** With the extension: its hook's counters are read from the page (exposeCounters). */
  extension: boolean;
  pageOptions?: CreatePageOptions;
  /** The background's statistics of a tab (the popup's data); Chromium only. */
  tabStats?(pageUrl: string): Promise<TabStats | undefined>;
}

/** One browser under test: its start-up without the extension, and the extension pointed at an origo. */
interface BrowserUnderTest {
  name: string;
  /** Launches what the cases need and plays the page once without the extension. */
  setUp(): Promise<void>;
  /** First `playing` of the page without the extension, ms. */
  baselineStartMs(): number;
  /** The browser with the extension, its origo at `origoUrl`; `release` when the case is done. */
  withOrigo(origoUrl: string): Promise<PageHost & { release(): Promise<void> }>;
  /** An origo URL nothing listens on, for the refused case. */
  refusedOrigoUrl(): Promise<string>;
  tearDown(): Promise<void>;
}

function chromiumHost(session: ChromiumSession): PageHost {
  return {
    browser: session.browser,
    extension: session.extensionId !== undefined,
    // A window of its own: Chromium does not load media in a background tab.
    pageOptions: { type: 'window' },
    tabStats: session.extensionId ? (url) => session.tabStats(url) : undefined,
  };
}

/** One Chromium with the extension for both cases (settings change in place), one without. */
function chromium(): BrowserUnderTest {
  let session: ChromiumSession | undefined;
  let baseline = NaN;
  return {
    name: 'Chromium',
    async setUp() {
      // Both launch at once; the baseline plays once both are up (its start-up is the figure).
      const [without, withExtension] = await Promise.allSettled([
        launchChromium({ extension: false }),
        launchChromium(),
      ]);
      if (withExtension.status === 'fulfilled') session = withExtension.value;
      if (without.status === 'rejected') throw without.reason;
      try {
        if (withExtension.status === 'rejected') throw withExtension.reason;
        baseline = (await play(chromiumHost(without.value), 'Chromium without the extension')).startMs;
      } finally {
        await without.value.close();
      }
    },
    baselineStartMs: () => baseline,
    async withOrigo(origoUrl) {
      if (!session) throw new Error('Chromium was not set up');
      await session.setSettings({ ...SETTINGS, origoUrl });
      return { ...chromiumHost(session), release: async () => undefined };
    },
    refusedOrigoUrl: refusedUrl,
    async tearDown() {
      await session?.close();
    },
  };
}

/** Firefox ESR with the add-on's preset pointing at `origoUrl`, once the preset reached the page hook. */
async function launchFirefoxFor(origoUrl: string): Promise<FirefoxSession> {
  const session = await launchFirefox({ ...SETTINGS, origoUrl });
  try {
    // A page without media (the page server's 404): no origo connection before the case counts them.
    await presetSettingsApplied(session, `${pages.url}/no-media`);
    return session;
  } catch (e) {
    await session.close();
    throw e;
  }
}

/**
 * Firefox ESR takes the settings as the add-on's preset at install: a browser per origo case, but
 * the killed case's browser stays open for the refused case, which uses the killed origo's URL.
 * The hung and killed cases' browsers launch in setUp beside the one without the extension (each
 * a fresh profile whose preset never changes); the baseline plays once all are up.
 */
function firefox(): BrowserUnderTest {
  let baseline = NaN;
  /** Browsers launched ahead for an origo URL, taken by the case that uses it. */
  const launched = new Map<string, Promise<FirefoxSession>>();
  let killedCase: { origoUrl: string; session: FirefoxSession } | undefined;
  const launchAhead = (origoUrl: string) => {
    const session = launchFirefoxFor(origoUrl);
    session.catch(() => undefined); // the case that takes it fails with it
    launched.set(origoUrl, session);
    return session;
  };
  return {
    name: 'Firefox ESR',
    async setUp() {
      const cluster = await clusterStarting.catch(() => undefined);
      const without = launchFirefoxWithoutExtension();
      const ahead = [launchAhead(hungUrl), ...(cluster ? [launchAhead(cluster.clientUrl)] : [])];
      // The baseline plays on a quiet machine: once the browsers are up and origo is back.
      await Promise.allSettled([...ahead, origoRestarting]);
      const session = await without;
      try {
        baseline = (await play({ browser: session.browser, extension: false }, 'Firefox without the extension'))
          .startMs;
      } finally {
        await session.close();
      }
    },
    baselineStartMs: () => baseline,
    async withOrigo(origoUrl) {
      if (killedCase?.origoUrl === origoUrl) {
        const { session } = killedCase;
        killedCase = undefined;
        return { browser: session.browser, extension: true, release: () => session.close() };
      }
      const ahead = launched.get(origoUrl);
      launched.delete(origoUrl);
      const session = await (ahead ?? launchFirefoxFor(origoUrl));
      const cluster = await clusterStarting.catch(() => undefined);
      if (origoUrl === cluster?.clientUrl) {
        // Kept for the refused case (closed there, or at tear-down).
        killedCase = { origoUrl, session };
        return { browser: session.browser, extension: true, release: async () => undefined };
      }
      return { browser: session.browser, extension: true, release: () => session.close() };
    },
    async refusedOrigoUrl() {
      return killedCase && origoKilled ? killedCase.origoUrl : refusedUrl();
    },
    async tearDown() {
      await killedCase?.session.close();
      const unused = await Promise.allSettled(launched.values());
      await Promise.all(unused.map((u) => (u.status === 'fulfilled' ? u.value.close() : undefined)));
    },
  };
}

interface Played {
  url: string;
  state: PlayerState;
  counters?: Counters;
  /** From the page's player script to the first `playing` event. */
  startMs: number;
  /** When the page was opened (Date.now()). */
  openedAt: number;
  /** The background's statistics of the tab (the popup's data), read before the page closes. */
  tab?: TabStats;
}

async function play(host: PageHost, label: string): Promise<Played> {
  const page = await host.browser.newPage(host.pageOptions);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const url = pages.playerUrl('hls', `${origin.url}/${MANIFEST}`);
  const openedAt = Date.now();
  try {
    await page.goto(url, { waitUntil: 'load' });
    await setPlaybackRate(page, NETWORK_PLAY_RATE);
    let last: PlayerState | undefined;
    const state = await waitFor(
      `${label}: playback to reach ${PLAY_SECONDS} s`,
      async () => {
        last = await playerState(page);
        if (last.errors.length > 0 || pageErrors.length > 0) return last;
        return last.currentTime >= PLAY_SECONDS ? last : undefined;
      },
      45_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}; player: ${JSON.stringify(last?.events.slice(-10))}`);
    });
    expect({ label, errors: state.errors, pageErrors }).toEqual({ label, errors: [], pageErrors: [] });
    const playing = state.events.find(([name]) => name === 'playing');
    if (!playing) throw new Error(`${label}: no playing event: ${JSON.stringify(state.events)}`);
    expect({ label, rates: await playbackRates(page) }).toEqual({ label, rates: [NETWORK_PLAY_RATE] });
    const counters = host.extension ? await pageCounters(page) : undefined;
    const tab = host.tabStats
      ? await waitFor(
          `${label}: per-tab statistics with every request`,
          async () => {
            const t = await host.tabStats?.(url);
            return t && t.segments.length >= (counters?.media ?? 0) ? t : undefined;
          },
          5_000,
        )
      : undefined;
    return { url, state, counters, startMs: playing[2], openedAt, tab };
  } finally {
    await page.close();
  }
}

/** Connection attempts the back-off allows in `ms`: each attempt (≤ 1 s) is followed by a period 2 s, 4 s, ... */
function attemptsAllowed(ms: number): number {
  let n = 0;
  for (let t = 0, period = BACKOFF.firstMs; t <= ms; t += ORIGO_ATTEMPT_MS + period, period *= 2) n++;
  return n;
}

function expectNetworkFallbacks(p: Played, label: string): Counters {
  const c = p.counters;
  if (!c) throw new Error(`${label}: window.__mutp is missing (exposeCounters)`);
  expect(p.state.currentTime).toBeGreaterThanOrEqual(PLAY_SECONDS);
  // Never stalled because of origo. The start-up against the page without the extension is the
  // issue's figure (target: at most STARTUP_MARGIN_MS more), printed, not asserted: a loaded
  // machine moves it, the mechanism (no wait past origo's limit, then none at all) does not.
  expect({ label, stalls: p.state.stalls, events: p.state.stalls > 0 ? p.state.events.slice(-25) : [] }).toEqual({
    label,
    stalls: 0,
    events: [],
  });
  // Every media request went to the network for origo's sake, with the real cause, never 'timeout'.
  expect(c.media).toBeGreaterThanOrEqual(3);
  expect(c).toMatchObject({ intercepted: c.media, served: 0, aborted: 0, fallbacks: { 'origo-unreachable': c.media } });
  expect(totalFallbacks(c)).toBe(c.media);
  expect(Object.values(c.origoCauses).reduce((a, b) => a + b, 0)).toBe(c.media);
  return c;
}

/** The outage case plays this far: every segment is asked for by then (hls.js buffers 30 s ahead). */
const OUTAGE_PLAY_SECONDS = 5;

/**
 * Plays the page, kills origo once MUTP has served `killAfter` media requests (its links are up),
 * and plays on until OUTAGE_PLAY_SECONDS and `afterKill` more requests were answered.
 */
async function playThroughOutage(host: PageHost, cluster: Cluster, label: string, killAfter = 2, afterKill = 3) {
  const page = await host.browser.newPage(host.pageOptions);
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  try {
    await page.goto(pages.playerUrl('hls', `${origin.url}/${MANIFEST}`), { waitUntil: 'load' });
    const atKill = await waitFor(
      `${label}: ${killAfter} media requests served by MUTP before the kill`,
      async () => {
        const c = await pageCounters(page);
        return c && c.served >= killAfter ? c : undefined;
      },
      30_000,
      50,
    );
    cluster.killOrigo(0);
    origoKilled = true;
    let last: { state: PlayerState; counters?: Counters } | undefined;
    const played = await waitFor(
      `${label}: playback to reach ${OUTAGE_PLAY_SECONDS} s and ${afterKill} requests answered after the kill, none pending`,
      async () => {
        last = { state: await playerState(page), counters: await pageCounters(page) };
        const c = last.counters;
        if (last.state.errors.length > 0 || pageErrors.length > 0) return last;
        const answered = c ? c.served + totalFallbacks(c) - atKill.served - totalFallbacks(atKill) : 0;
        // And nothing the hook handed on still waiting for its answer (a loaded machine has one under way).
        const settled = c !== undefined && c.media === c.served + c.aborted + totalFallbacks(c);
        return last.state.currentTime >= OUTAGE_PLAY_SECONDS && answered >= afterKill && settled ? last : undefined;
      },
      45_000,
    ).catch((e: unknown) => {
      throw new Error(
        `${String(e)}; counters ${JSON.stringify(last?.counters)}; player ${JSON.stringify(last?.state.events.slice(-10))}`,
      );
    });
    return { ...played, atKill, pageErrors };
  } finally {
    await page.close();
  }
}

describe.each([chromium(), firefox()])('$name with the extension', (under) => {
  const startup = (p: Played) =>
    `start-up ${p.startMs} ms (without the extension ${under.baselineStartMs()} ms, target +${STARTUP_MARGIN_MS} ms)`;

  beforeAll(async () => {
    // The previous browser's killed case left origo down: it comes back while this browser sets
    // up (launches, not the timed plays), and its killed case waits for it.
    if (origoKilled) restartKilledOrigo(await clusterStarting);
    await under.setUp();
  }, 120_000);
  afterAll(() => under.tearDown());

  test('origo hung (accepts TCP, never answers): no stall, the cause counted, one attempt per back-off period', async () => {
    const label = `${under.name}, hung origo`;
    const host = await under.withOrigo(hungUrl);
    try {
      const before = hung.accepted;
      const played = await play(host, label);
      const attempts = hung.accepted - before;
      // The back-off allows what it allows up to this reading (the page closed a moment ago).
      const countedMs = Date.now() - played.openedAt;
      const c = expectNetworkFallbacks(played, label);
      expect(c.origoCauses['handshake-timeout']).toBeGreaterThanOrEqual(1);
      expect(c.origoCauses['origo-down']).toBeGreaterThanOrEqual(1);
      expect(attempts).toBeGreaterThanOrEqual(1);
      expect({ attempts, allowed: attempts <= attemptsAllowed(countedMs) }).toEqual({ attempts, allowed: true });
      if (played.tab) {
        // The popup's data: the cause in words.
        const details = played.tab.segments.map((s) => s.detail ?? '');
        expect(details.some((d) => /handshake timed out/.test(d))).toBe(true);
        expect(details.some((d) => /^origo-down \(back-off \d+ s/.test(d))).toBe(true);
      }
      console.log(
        `${label}: ${startup(played)}, stalls ${played.state.stalls}, ` +
          `${attempts} origo connections in ${countedMs} ms, causes ${JSON.stringify(c.origoCauses)}`,
      );
    } finally {
      await host.release();
    }
  });

  test('origo killed while the links are up: playback goes on, every media request served by MUTP, none to the network', async () => {
    const label = `${under.name}, origo killed`;
    const cluster = await clusterStarting;
    // The first browser's case killed it: up again, with its proxies, before this browser plays.
    await origoBackUp(cluster);
    const host = await under.withOrigo(cluster.clientUrl);
    try {
      const { state, counters: c, atKill, pageErrors } = await playThroughOutage(host, cluster, label);
      if (!c) throw new Error(`${label}: window.__mutp is missing (exposeCounters)`);
      expect({ label, errors: state.errors, pageErrors }).toEqual({ label, errors: [], pageErrors: [] });
      expect({ label, stalls: state.stalls }).toEqual({ label, stalls: 0 });
      expect(c.served).toBeGreaterThan(atKill.served);
      expect({ label, fallbacks: c.fallbacks, aborted: c.aborted, served: c.served }).toEqual({
        label,
        fallbacks: {},
        aborted: 0,
        served: c.media,
      });
      console.log(
        `${label}: ${c.served - atKill.served} of ${c.served} media requests served by MUTP after origo was killed, ` +
          `0 to the network, stalls ${state.stalls}`,
      );
    } finally {
      await host.release();
    }
  });

  test('origo refused (nothing listening): no stall, the cause counted', async () => {
    const label = `${under.name}, refused origo`;
    const host = await under.withOrigo(await under.refusedOrigoUrl());
    try {
      const played = await play(host, label);
      const c = expectNetworkFallbacks(played, label);
      expect(c.origoCauses.refused).toBeGreaterThanOrEqual(1);
      console.log(
        `${label}: ${startup(played)}, stalls ${played.state.stalls}, causes ${JSON.stringify(c.origoCauses)}`,
      );
    } finally {
      await host.release();
    }
  });
});
