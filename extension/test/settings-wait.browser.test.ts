/**
 * Media requests a page makes before the hook has its settings (issue 35), in headless Chromium:
 * the real hook installed by a script in <head> that makes its first XHR and fetch while the page
 * parses, its settings handed over later from the page (harness/late-settings.ts). The settings'
 * delay (50 ms) is far inside the hook's wait (SETTINGS_WAIT_MS), and both are timers of the same
 * page, so the order is the event loop's, not the machine's speed.
 */
import { join } from 'node:path';
import { build } from 'esbuild';
import type { Page } from 'puppeteer-core';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { startTestServer, TestServer } from './helpers/server';
import type { Counters } from '../src/common/counters';

jest.setTimeout(60_000);

let browser: LaunchedBrowser;
let server: TestServer;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Result = Record<string, any>;

async function earlyRequests(query: string): Promise<{ xhr: Result; fetch: Result; text: Result; counters: Counters }> {
  const page: Page = await browser.browser.newPage();
  try {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${server.url}/page.html${query}`, { waitUntil: 'load', timeout: 15_000 });
    await page.waitForFunction('window.__late', { timeout: 5000 });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const [xhr, fetch, text] = (await page.evaluate(() => (window as any).__late.early)) as Result[];
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const counters = (await page.evaluate(() => (window as any).__late.counters())) as Counters;
    expect(errors).toEqual([]);
    return { xhr, fetch, text, counters };
  } finally {
    await page.close();
  }
}

const loadstarts = (events: string[]) => events.filter((e) => e.startsWith('loadstart'));

beforeAll(async () => {
  const bundle = await build({
    entryPoints: [join(__dirname, 'harness', 'late-settings.ts')],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
  });
  server = await startTestServer({
    '/page.html': {
      body: '<!doctype html><html><head><script src="/late.js"></script></head><body>test</body></html>',
      type: 'text/html',
    },
    '/late.js': { body: bundle.outputFiles[0].text, type: 'text/javascript' },
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

test('settings that come after the first requests: XHR and fetch both served by the hook', async () => {
  const r = await earlyRequests('?settingsAfter=50');
  expect(r.xhr).toMatchObject({
    status: 206,
    from: null,
    contentRange: 'bytes 0-99/2000',
    response: { kind: 'arraybuffer', length: 100, matches: true },
  });
  expect(loadstarts(r.xhr.events)).toHaveLength(1);
  expect(r.fetch).toMatchObject({ status: 206, body: { length: 100, matches: true } });
  expect(r.fetch.headers['x-from']).toBeUndefined();
  expect(r.text).toMatchObject({ status: 200, headers: { 'x-from': 'network' } });
  expect(r.counters).toMatchObject({ requests: 3, media: 2, intercepted: 2, served: 2, aborted: 0, fallbacks: {} });
});

test('settings that never come: after the wait both go to the network as not-ready, with one loadstart', async () => {
  const r = await earlyRequests('');
  expect(r.xhr).toMatchObject({ status: 206, from: 'network', response: { length: 100, matches: true } });
  expect(loadstarts(r.xhr.events)).toHaveLength(1);
  expect(r.fetch).toMatchObject({ status: 206, headers: { 'x-from': 'network' }, body: { matches: true } });
  expect(r.counters).toMatchObject({ media: 2, intercepted: 0, served: 0, fallbacks: { 'not-ready': 2 } });
});
