/**
 * Smoke test of the built extension (dist/chrome) in headless Chromium: the service worker
 * starts, options set from the worker reach the pages, the options page shows them, the whole
 * path page hook → content script → downloader frame → MutpClient runs (origo is down here, so
 * the request falls back to the network with reason 'origo-unreachable' and the page still gets
 * its bytes), counters reach the page (exposeCounters) and the popup, and page scripts see no
 * trace of the hook's messages.
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page, WebWorker } from 'puppeteer-core';
import { ensureBuilt } from './helpers/build';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { startTestServer, TestServer } from './helpers/server';
import { freePort } from '@mutp/testing/ports';
import { waitFor } from '@mutp/testing/wait';
import type { Counters } from '../src/common/counters';
import type { TabStats } from '../src/common/stats';

jest.setTimeout(120_000);

let browser: LaunchedBrowser;
let server: TestServer;
let extensionDir: string;
let worker: WebWorker;
let extensionId: string;
let closedPort: number;

const PAGE_HTML = `<!doctype html><html><head><script>
  window.__pageMessages = [];
  window.addEventListener('message', (e) => window.__pageMessages.push(JSON.stringify(e.data)));
  window.load = (url, init) => new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open('GET', url);
    x.responseType = 'arraybuffer';
    for (const [k, v] of Object.entries(init || {})) x.setRequestHeader(k, v);
    x.onloadend = () => resolve({ status: x.status, length: x.response ? x.response.byteLength : -1, from: x.getResponseHeader('x-from') });
    x.send();
  });
</script></head><body>video page</body></html>`;

beforeAll(async () => {
  const dir = ensureBuilt();
  extensionDir = dir;
  closedPort = await freePort();
  server = await startTestServer({
    '/video.html': { body: PAGE_HTML, type: 'text/html' },
  });
  browser = await launchChromium({
    enableExtensions: true,
    args: [`--disable-extensions-except=${dir}`, `--load-extension=${dir}`],
  });
  const target = await browser.browser.waitForTarget(
    (t) =>
      t.type() === 'service_worker' && t.url().startsWith('chrome-extension://') && t.url().endsWith('/background.js'),
    { timeout: 20_000 },
  );
  extensionId = new URL(target.url()).host;
  worker = (await target.worker())!;
  // Options for the tests, set before any page loads.
  await worker.evaluate(
    (origoUrl) =>
      chrome.storage.local.set({
        settings: { origoUrl, mode: 'rlnc', proxies: 2, deadlineMs: 8000, exposeCounters: true },
      }),
    `ws://127.0.0.1:${closedPort}/v1/client`,
  );
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

test('the service worker runs and the manifest is MV3 with the page-world hook', async () => {
  expect(extensionId).toMatch(/^[a-p]{32}$/);
  const manifest = (await worker.evaluate(() => chrome.runtime.getManifest())) as chrome.runtime.ManifestV3;
  expect(manifest.manifest_version).toBe(3);
  expect(manifest.content_scripts?.[0]).toMatchObject({ js: ['hook.js'], world: 'MAIN', run_at: 'document_start' });
  // Least privilege (issue 9, finding 14): no host permissions, only the downloader frame is web-accessible.
  expect(manifest.host_permissions ?? []).toEqual([]);
  expect(manifest.permissions).toEqual(['storage', 'activeTab']);
  expect(manifest.web_accessible_resources).toEqual([{ resources: ['downloader.html'], matches: ['<all_urls>'] }]);
});

test('the options page opens and shows the stored settings', async () => {
  const page = await browser.browser.newPage();
  try {
    await page.goto(`chrome-extension://${extensionId}/options.html`, { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });
    const values = await page.evaluate(() => {
      const form = document.getElementById('form') as HTMLFormElement;
      const v = (n: string) => (form.elements.namedItem(n) as HTMLInputElement).value;
      return { origoUrl: v('origoUrl'), mode: v('mode'), proxies: v('proxies'), deadlineMs: v('deadlineMs') };
    });
    expect(values).toEqual({
      origoUrl: `ws://127.0.0.1:${closedPort}/v1/client`,
      mode: 'rlnc',
      proxies: '2',
      deadlineMs: '8000',
    });
  } finally {
    await page.close();
  }
});

test('the options page refuses a plain ws:// origo on another host, with the wss:// to use instead', async () => {
  const page = await browser.browser.newPage();
  try {
    await page.goto(`chrome-extension://${extensionId}/options.html`, { waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });
    const saved = async (origoUrl: string) => {
      await page.evaluate((u) => {
        const form = document.getElementById('form') as HTMLFormElement;
        (form.elements.namedItem('origoUrl') as HTMLInputElement).value = u;
        document.getElementById('status')!.textContent = '';
        (document.getElementById('save') as HTMLButtonElement).click();
      }, origoUrl);
      const status = await waitFor('the options page to answer', () =>
        page.evaluate(() => document.getElementById('status')!.textContent || undefined),
      );
      const stored = (await worker.evaluate(() => chrome.storage.local.get('settings'))) as {
        settings: { origoUrl: string };
      };
      return { status, stored: stored.settings.origoUrl };
    };
    const before = `ws://127.0.0.1:${closedPort}/v1/client`;
    const remote = await saved('ws://origo.example:8700/v1/client');
    expect(remote.stored).toBe(before);
    expect(remote.status).toContain('wss://origo.example:8700/v1/client');
    // Loopback stays allowed (the value the other tests use).
    expect(await saved(before)).toEqual({ status: 'Saved.', stored: before });
  } finally {
    await page.close();
  }
});

describe('a page with an HLS stream while origo is down', () => {
  let page: Page;
  let tabId: number;

  beforeAll(async () => {
    page = await browser.browser.newPage();
    await page.goto(`${server.url}/video.html`, { waitUntil: 'load' });
    await waitFor('the hook to get its configuration', () =>
      page.evaluate(() => ((window as unknown as { __mutp?: unknown }).__mutp ? true : undefined)),
    );
  });

  /** The tab's id, from its statistics (the extension has no host permissions: tab URLs are hidden from it). */
  const findTab = () =>
    waitFor('the tab’s statistics', () =>
      worker.evaluate(async (url) => {
        const all = (await chrome.storage.session.get(null)) as Record<string, TabStats>;
        return Object.values(all).find((t) => t.pageUrl === url)?.tabId;
      }, `${server.url}/video.html`),
    );

  afterAll(() => page?.close());

  test('a segment from the playlist goes through the downloader, falls back and reaches the page intact', async () => {
    const manifest = await page.evaluate((u) => (window as any).load(u), `${server.url}/hls/index.m3u8`); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(manifest).toMatchObject({ status: 200, from: 'network' });
    const seg = await page.evaluate((u) => (window as any).load(u), `${server.url}/seg/0.m4s`); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(seg).toEqual({ status: 200, length: 1000, from: 'network' });
    const counters = (await page.evaluate(() => (window as any).__mutp.counters())) as Counters; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(counters).toMatchObject({
      manifests: 1,
      media: 1,
      intercepted: 1,
      served: 0,
      fallbacks: { 'origo-unreachable': 1 },
    });
    // The downloader frame is there, rendered (Chromium would run its process at background
    // priority otherwise) but 1 px, transparent and not clickable.
    const frame = await page.evaluate(() => {
      const f = document.querySelector('iframe');
      if (!f) return null;
      const s = getComputedStyle(f);
      const r = f.getBoundingClientRect();
      return {
        src: f.src,
        display: s.display,
        opacity: s.opacity,
        pointerEvents: s.pointerEvents,
        size: [r.width, r.height],
      };
    });
    expect(frame).toEqual({
      src: `chrome-extension://${extensionId}/downloader.html`,
      display: 'block',
      opacity: '1',
      pointerEvents: 'none',
      size: [1, 1],
    });
  });

  test('page scripts never saw the hook’s window messages', async () => {
    const messages = await page.evaluate(() => (window as unknown as { __pageMessages: string[] }).__pageMessages);
    expect(messages.filter((m) => m.includes('mutp'))).toEqual([]);
  });

  test('the counters and the download record reach storage.session for the popup', async () => {
    tabId = await findTab();
    const stats = await waitFor('tab statistics in storage.session', async () => {
      const got = (await worker.evaluate((key) => chrome.storage.session.get(key), `tab:${tabId}`)) as Record<
        string,
        TabStats
      >;
      const tab = got[`tab:${tabId}`];
      // Counters and download records arrive in separate messages: wait for both.
      const fellBack = Object.values(tab?.frames ?? {}).some((c) => c.fallbacks['origo-unreachable'] === 1);
      return tab && tab.segments.length > 0 && fellBack ? tab : undefined;
    });
    expect(stats.segments[0]).toMatchObject({ ok: false, reason: 'origo-unreachable', url: `${server.url}/seg/0.m4s` });
  });

  test('the popup renders the tab’s statistics', async () => {
    const popup = await browser.browser.newPage();
    try {
      await popup.goto(`chrome-extension://${extensionId}/popup.html?tab=${tabId}`, { waitUntil: 'load' });
      await popup.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });
      const shown = await popup.evaluate(() => ({
        media: document.getElementById('c-media')!.textContent,
        fallbacks: document.getElementById('c-fallbacks')!.textContent,
        reasons: [...document.querySelectorAll('#reasons li')].map((li) => li.textContent),
        chart: document.querySelectorAll('#chart svg').length,
        rows: document.querySelectorAll('#segments tbody tr.failed').length,
        config: document.getElementById('config')!.textContent,
      }));
      expect(shown).toMatchObject({ media: '1', fallbacks: '1', reasons: ['origo-unreachable: 1'], chart: 1, rows: 1 });
      expect(shown.config).toContain('rlnc, N = 2');
    } finally {
      await popup.close();
    }
  });

  test('switching the site off in the settings reaches the open page', async () => {
    await worker.evaluate(async () => {
      const { settings } = (await chrome.storage.local.get('settings')) as { settings: object };
      await chrome.storage.local.set({ settings: { ...settings, disabledSites: ['127.0.0.1'] } });
    });
    await waitFor(
      'the site switch to reach the hook',
      () => page.evaluate(() => ((window as any).__mutp.config().enabled === false ? true : undefined)), // eslint-disable-line @typescript-eslint/no-explicit-any
    );
    const seg = await page.evaluate((u) => (window as any).load(u), `${server.url}/seg/1.m4s`); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(seg).toEqual({ status: 200, length: 1001, from: 'network' });
    const counters = (await page.evaluate(() => (window as any).__mutp.counters())) as Counters; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(counters.fallbacks['site-disabled']).toBe(1);
    expect(counters.intercepted).toBe(1);
  });

  test('a page of a disabled site gets no downloader frame (the frame would open origo at once)', async () => {
    const other = await browser.browser.newPage();
    try {
      await other.goto(`${server.url}/video.html`, { waitUntil: 'load' });
      await waitFor(
        'the hook to get its configuration',
        () => other.evaluate(() => ((window as any).__mutp?.config()?.enabled === false ? true : undefined)), // eslint-disable-line @typescript-eslint/no-explicit-any
      );
      // A playlist makes the hook ask for the downloader before any segment.
      await other.evaluate((u) => (window as any).load(u), `${server.url}/hls/index.m3u8`); // eslint-disable-line @typescript-eslint/no-explicit-any
      const seg = await other.evaluate((u) => (window as any).load(u), `${server.url}/seg/0.m4s`); // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(seg).toMatchObject({ status: 200, from: 'network' });
      expect(await other.evaluate(() => document.querySelectorAll('iframe').length)).toBe(0);
    } finally {
      await other.close();
    }
  });
});

test('a settings preset in the package is applied on install (the way to configure Firefox)', async () => {
  const copy = mkdtempSync(join(tmpdir(), 'mutp-ext-preset-'));
  cpSync(extensionDir, copy, { recursive: true });
  writeFileSync(
    join(copy, 'preset-settings.json'),
    JSON.stringify({ mode: 'fountain', proxies: 6, deadlineMs: 7000, exposeCounters: true }),
  );
  const second = await launchChromium({
    enableExtensions: true,
    args: [`--disable-extensions-except=${copy}`, `--load-extension=${copy}`],
  });
  try {
    await second.browser.waitForTarget((t) => t.type() === 'service_worker' && t.url().endsWith('/background.js'), {
      timeout: 20_000,
    });
    const page = await second.browser.newPage();
    const config = await waitFor('the preset to reach a page', async () => {
      await page.goto(`${server.url}/video.html`, { waitUntil: 'load' });
      await new Promise((r) => setTimeout(r, 200));
      return page.evaluate(() => (window as any).__mutp?.config() ?? undefined); // eslint-disable-line @typescript-eslint/no-explicit-any
    });
    expect(config).toMatchObject({ enabled: true, mode: 'fountain', proxies: 6, deadlineMs: 7000 });
  } finally {
    await second.close();
    rmSync(copy, { recursive: true, force: true });
  }
});
