/**
 * The popup explains a tab (built extension, headless Chromium, statistics written into
 * storage.session as the background writes them): time and bytes saved against the plain
 * network, and the worker notice only when a worker fetched media past MUTP, not for hls.js's
 * transmux worker. And the README's screenshots are made by test/screenshots.ts from this code:
 * the script renders every file, and the README shows each of them.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WebWorker } from 'puppeteer-core';
import type { LaunchedBrowser } from '@mutp/testing/browsers';
import { EXTENSION_ROOT } from './helpers/build';
import { launchWithExtension } from './helpers/extension-browser';
import { demoTab, makeScreenshots, SCREENSHOTS } from './screenshots';
import type { TabStats } from '../src/common/stats';

jest.setTimeout(180_000);

let browser: LaunchedBrowser;
let worker: WebWorker;
let extensionId: string;

beforeAll(async () => {
  ({ browser, worker, extensionId } = await launchWithExtension());
});

afterAll(async () => {
  await browser?.close();
});

/** The popup for a tab whose statistics are `tab`: the reasons, the savings lines. */
async function popupFor(tabId: number, tab: TabStats) {
  await worker.evaluate((key, t) => chrome.storage.session.set({ [key]: t }), `tab:${tabId}`, {
    ...tab,
    tabId,
  } as unknown as Record<string, unknown>);
  const page = await browser.browser.newPage();
  try {
    await page.goto(`chrome-extension://${extensionId}/popup.html?tab=${tabId}`, { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });
    return await page.evaluate(() => ({
      reasons: [...document.querySelectorAll('#reasons li')].map((li) => li.textContent),
      time: document.getElementById('saved-time')?.textContent ?? '',
      bytes: document.getElementById('saved-bytes')?.textContent ?? '',
      how: document.getElementById('savings-how')?.textContent ?? '',
    }));
  } finally {
    await page.close();
  }
}

test('hls.js-like: a transmux worker, every appended byte fetched by the page: no worker notice; time and bytes saved', async () => {
  const shown = await popupFor(2001, demoTab(Date.now()));
  expect(shown.reasons).toEqual(['not-ready: 1', 'timeout: 1']);
  // 22 segments, 40.7 MB (38.8 MiB) in 11.0 s; the network: 2.9 MB in 2.15 s = 1.35 MB/s → 30.2 s.
  expect(shown.time).toMatch(
    /^\d+\.\d\d s saved — 22 served in \d+\.\d\d s; the network ≈ \d+\.\d\d s at 1\.35 MB\/s \(measured on 2 files, 2\.77 MiB\)$/,
  );
  expect(shown.bytes).toMatch(/^\d+\.\d\d MiB from the edge proxies instead of the origin server$/);
  expect(shown.how).toContain('How this is computed');
  expect(shown.how).toContain('256 KiB');
});

test('a worker that fetched media past MUTP is named, with the bytes', async () => {
  const tab = demoTab(Date.now());
  const frame = tab.frames.demo;
  // 12 MiB more reached the player than the page's own requests fetched.
  tab.frames.demo = { ...frame, appendedBytes: frame.servedBytes + frame.fetchedBytes + 12 * 1024 * 1024 };
  const shown = await popupFor(2002, tab);
  expect(shown.reasons).toContain(
    'not covered: 1 page worker (≈ 12.00 MiB reached the player that no request of the page fetched: a worker fetched it past MUTP)',
  );
});

test('no network sample yet: no time estimate, said so', async () => {
  const tab = demoTab(Date.now());
  tab.frames.demo = { ...tab.frames.demo, networkFiles: 0, networkBytes: 0, networkMs: 0 };
  const shown = await popupFor(2003, tab);
  expect(shown.time).toMatch(
    /^time saved: no estimate yet — 22 served in .*no file of 256 KiB or more came from the network/,
  );
});

test('the README’s screenshots are rendered by test/screenshots.ts, and the README shows each one', async () => {
  const out = mkdtempSync(join(tmpdir(), 'mutp-ext-shots-'));
  try {
    const paths = await makeScreenshots(out);
    expect(paths.map((p) => p.slice(out.length + 1))).toEqual([...SCREENSHOTS]);
    for (const path of paths) {
      const png = readFileSync(path);
      expect({ path, signature: png.toString('latin1', 1, 4), width: png.readUInt32BE(16) > 400 }).toEqual({
        path,
        signature: 'PNG',
        width: true,
      });
    }
    const readme = readFileSync(join(EXTENSION_ROOT, 'README.md'), 'utf8');
    for (const file of SCREENSHOTS) expect(readme).toContain(`(docs/${file})`);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
