/**
 * The extension over QUIC in real browsers: four shaped proxies run their QUIC endpoints, origo
 * offers them with their certificate hashes, and Chromium and Firefox ESR play an HLS stream
 * (hls.js) whose every segment the extension downloads over WebTransport datagrams from all four
 * (the per-tab records name each source's transport), byte-exact (the proxies' transfers and the
 * player's bytes are checked as in playback.browser.test.ts, through the extension's records).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  ChromiumSession,
  ensureExtensionBuilt,
  FirefoxSession,
  launchChromium,
  launchFirefox,
  pageCounters,
  SegmentRecord,
  totalFallbacks,
  waitFor,
} from '../src/browser';
import { playOnce, segmentUrlsOf, warmProxies } from '../src/browser-play';
import { Cluster, mixedFleetOfFour, startCluster } from '../src/cluster';
import { MEDIA_DIR, Origin, startOrigin } from '../src/origin';
import { PlayerPages, startPlayerPages } from '../src/player-pages';
import { countsDelta, proxyCounts, transfersIn } from '../src/proxy-metrics';
import { allStarted } from './all-started';

jest.setTimeout(180_000);

const PROXIES = mixedFleetOfFour('q');
const MANIFEST = 'low/hls-fmp4/index.m3u8';
const PLAY_TIMEOUT_MS = 120_000;

let origin: Origin;
let pages: PlayerPages;
let cluster: Cluster;
let segmentUrls: string[];
let playerUrl: string;
let chromium: ChromiumSession;
let firefox: FirefoxSession;

beforeAll(async () => {
  if (!existsSync(join(MEDIA_DIR, '.generated'))) {
    throw new Error(`no test streams in ${MEDIA_DIR}: run bash e2e/media/generate.sh (scripts/setup.sh does)`);
  }
  ensureExtensionBuilt();
  origin = await startOrigin();
  pages = await startPlayerPages();
  // Chromium launches while the cluster starts, Firefox (its preset names origo) while the proxies
  // warm up (CI time). Each is kept as soon as it is up, so afterAll closes it also when another failed.
  await allStarted([
    launchChromium().then((c) => (chromium = c)),
    (async () => {
      cluster = await startCluster({ proxies: PROXIES, allowPrivateOrigins: true, quic: true });
      const manifestUrl = `${origin.url}/${MANIFEST}`;
      segmentUrls = await segmentUrlsOf(manifestUrl);
      playerUrl = pages.playerUrl('hls', manifestUrl);
      await allStarted([
        launchFirefox({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true }).then(
          (f) => (firefox = f),
        ),
        warmProxies(cluster, segmentUrls),
      ]);
    })(),
  ]);
}, 300_000);

afterAll(async () => {
  await firefox?.close();
  await chromium?.close();
  await cluster?.stop();
  await pages?.close();
  await origin?.close();
});

/** Every segment downloaded by MUTP from the four proxies, each source over QUIC. */
function expectAllOverQuic(segments: SegmentRecord[]): void {
  expect(segments.length).toBe(segmentUrls.length);
  for (const s of segments) {
    expect({ ok: s.ok, mode: s.mode, proxies: s.proxies.length }).toEqual({ ok: true, mode: 'rlnc', proxies: 4 });
    expect(s.proxies.map((p) => p.transport)).toEqual(['quic', 'quic', 'quic', 'quic']);
  }
}

describe('Chromium with the extension', () => {
  test('HLS fMP4 plays with every segment from four proxies over WebTransport', async () => {
    await chromium.setSettings({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true });
    const play = await playOnce(chromium, playerUrl, segmentUrls.length, 0, PLAY_TIMEOUT_MS);
    expect(play.counters.served).toBe(segmentUrls.length);
    expect(play.state.stalls ?? 0).toBe(0);
    expectAllOverQuic(play.segments);
  });
});

describe('Firefox ESR with the extension', () => {
  test('HLS fMP4 plays with every segment served by MUTP, each proxy reached over WebTransport', async () => {
    // Firefox's extension storage is out of BiDi's reach: the page's counters and the proxies' metrics tell.
    const before = await proxyCounts(cluster);
    const page = await firefox.browser.newPage();
    try {
      await page.goto(playerUrl, { waitUntil: 'load' });
      const counters = await waitFor(
        `the player to fetch all ${segmentUrls.length} segments`,
        async () => {
          const c = await pageCounters(page);
          return c && c.served + totalFallbacks(c) >= segmentUrls.length ? c : undefined;
        },
        PLAY_TIMEOUT_MS,
      );
      expect(totalFallbacks(counters)).toBe(0);
      expect(counters.served).toBe(segmentUrls.length);
      const delta = countsDelta(before, await proxyCounts(cluster));
      for (const p of delta) {
        expect({ name: p.name, accepted: p.quicSessions.accepted ?? 0 }).toEqual({ name: p.name, accepted: 1 });
        expect(transfersIn(p, 'rlnc')).toBe(segmentUrls.length);
      }
    } finally {
      await page.close();
    }
  });
});
