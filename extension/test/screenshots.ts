/**
 * The screenshots in extension/README.md, made from the real popup and options page: the built
 * extension (dist/chrome, rebuilt when older than its sources) in headless Chromium, a stand-in
 * origo offering four proxies (helpers/fake-origo.ts), and a tab's statistics written into
 * storage.session as the background would have written them after a page played 22 segments
 * (the data is made up; every word and number on screen is rendered by the extension's code).
 *
 *   npx tsx extension/test/screenshots.ts [out-dir]     (default: extension/docs)
 *
 * popup.browser.test.ts runs it into a temporary folder and checks that the README shows
 * each file it makes.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'puppeteer-core';
import { waitFor } from '@mutp/testing/wait';
import type { Counters } from '../src/common/counters';
import type { SegmentRecord } from '../src/common/messages';
import type { TabStats } from '../src/common/stats';
import { emptyCounters } from '../src/common/counters';
import { applySegment, emptyTab } from '../src/common/stats';
import { EXTENSION_ROOT } from './helpers/build';
import { ExtensionBrowser, launchWithExtension } from './helpers/extension-browser';
import { startFakeOrigo } from './helpers/fake-origo';
import { startTestServer } from './helpers/server';

/** The files made, in the order the README shows them. */
export const SCREENSHOTS = ['popup.png', 'popup-fresh-install.png', 'options-managed.png'] as const;

/** The tab id the demonstration statistics are written for (no such tab exists). */
export const DEMO_TAB = 1_000_001;

const PROXIES = [
  { name: 'edge-1', share: 0.19 },
  { name: 'edge-2', share: 0.2 },
  { name: 'edge-3', share: 0.3 },
  { name: 'edge-4', share: 0.31 },
];

/** A played stream's statistics: 22 segments through MUTP, one that fell back, a network sample. */
export function demoTab(now: number): TabStats {
  const tab = emptyTab(DEMO_TAB, 'https://video.example/watch/demo');
  for (let i = 0; i < 23; i++) {
    const bytes = 1_850_000 + ((i * 7919) % 120_000);
    const ok = i !== 9;
    const durationMs = 380 + ((i * 37) % 160);
    const record: SegmentRecord = {
      at: now - (23 - i) * 4000,
      url: `https://video.example/v/demo/seg-${i + 1}.ts`,
      ok,
      ...(ok ? {} : { reason: 'timeout' }),
      mode: 'rlnc',
      bytes: ok ? bytes : 0,
      objectBytes: ok ? bytes : 0,
      durationMs: ok ? durationMs : 0,
      totalMs: ok ? durationMs + 45 : 0,
      goodputBps: ok ? (bytes / durationMs) * 1000 : 0,
      normalizedGoodput: ok ? 0.97 + ((i * 13) % 3) / 100 : 0,
      cached: false,
      proxies: ok
        ? PROXIES.map((p, n) => ({
            name: p.name,
            proxyId: `p-${n + 1}`,
            share: p.share,
            useful: Math.round((p.share * bytes) / 1200),
            transport: 'quic',
          }))
        : [],
    };
    applySegment(tab, record, now);
  }
  const served = tab.segments.filter((s) => s.ok);
  const counters: Counters = {
    ...emptyCounters(),
    media: 24,
    intercepted: 23,
    served: served.length,
    servedBytes: served.reduce((a, s) => a + s.bytes, 0),
    servedMs: served.reduce((a, s) => a + s.totalMs, 0),
    fallbacks: { timeout: 1, 'not-ready': 1 },
    manifests: 2,
    segmentsKnown: 180,
    requests: 31,
    // hls.js's transmux worker: what it appended is what MUTP and the network fetched, so no notice.
    workers: 1,
    appendedBytes: served.reduce((a, s) => a + s.bytes, 0),
    // The segment that fell back, and the player's script: the plain network's rate.
    networkFiles: 2,
    networkBytes: 2_900_000,
    networkMs: 2_150,
    fetchedBytes: 1_900_000,
  };
  tab.frames = { demo: counters };
  tab.topSession = 'demo';
  return tab;
}

/** Opens an extension page at the popup's size, waits for it and its connection check, and saves a screenshot. */
async function shoot(page: Page, url: string, file: string, width: number): Promise<void> {
  await page.setViewport({ width, height: 400, deviceScaleFactor: 1 });
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });
  await waitFor(
    `the connection check of ${url}`,
    () =>
      page.evaluate(() => {
        const state = document.getElementById('connection')?.dataset.state;
        return state && state !== 'checking' && state !== 'unchecked' ? true : undefined;
      }),
    15_000,
  );
  await page.screenshot({ path: file as `${string}.png`, fullPage: true });
}

/** Makes every screenshot in `outDir`; returns their paths. */
export async function makeScreenshots(outDir: string): Promise<string[]> {
  mkdirSync(outDir, { recursive: true });
  const http = await startTestServer({ '/livez': { body: '{"status":"alive"}', type: 'application/json' } });
  const origo = await startFakeOrigo(
    PROXIES.map((p, n) => ({ proxyId: `p-${n + 1}`, name: p.name, httpUrl: http.url })),
  );
  const paths = SCREENSHOTS.map((f) => join(outDir, f));
  let launched: ExtensionBrowser | undefined;
  try {
    launched = await launchWithExtension();
    const { browser, worker, extensionId: id } = launched;
    const page = await browser.browser.newPage();
    const popupUrl = `chrome-extension://${id}/popup.html?tab=${DEMO_TAB}`;

    // 2. A fresh install: nothing configured, nothing played.
    await shoot(page, popupUrl, paths[1], 444);

    // 1. After a stream played, with origo configured (the stand-in) and reachable.
    await worker.evaluate(
      (origoUrl, key, tab) =>
        chrome.storage.local
          .set({ settings: { origoUrl, mode: 'rlnc', proxies: 4 } })
          .then(() => chrome.storage.session.set({ [key]: tab })),
      origo.clientUrl,
      `tab:${DEMO_TAB}`,
      demoTab(Date.now()) as unknown as Record<string, unknown>,
    );
    await shoot(page, popupUrl, paths[0], 444);
    // Again with "How this is computed" open.
    await page.evaluate(() => document.getElementById('savings-how')?.setAttribute('open', ''));
    await page.screenshot({ path: paths[0] as `${string}.png`, fullPage: true });

    // 3. The options page with settings an administrator set (the background's mirror of storage.managed).
    await waitFor('the background to mirror storage.managed', () =>
      worker.evaluate(async () =>
        (await chrome.storage.local.get('managedSettings')).managedSettings ? true : undefined,
      ),
    );
    await worker.evaluate(
      (origoUrl) => chrome.storage.local.set({ managedSettings: { origoUrl, mode: 'rlnc', enabled: true } }),
      origo.clientUrl,
    );
    await shoot(page, `chrome-extension://${id}/options.html`, paths[2], 820);
  } finally {
    await launched?.browser.close();
    await origo.close();
    await http.close();
  }
  return paths;
}

if (require.main === module) {
  makeScreenshots(process.argv[2] ?? join(EXTENSION_ROOT, 'docs'))
    .then((paths) => console.log(paths.join('\n')))
    .catch((e: unknown) => {
      console.error(e);
      process.exit(1);
    });
}
