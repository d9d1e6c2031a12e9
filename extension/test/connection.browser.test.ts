/**
 * The built extension in Chromium explains its connection before any video plays: a fresh
 * install says origo is not configured (the loopback default), the popup checks origo when it
 * opens, the options page's "Test connection" reaches origo (a stand-in here), counts the
 * proxies it offers and probes one over HTTP; settings an administrator set (storage.managed)
 * are locked in the options page. Firefox's real managed storage: managed.firefox.browser.test.ts.
 */
import type { Page, WebWorker } from 'puppeteer-core';
import type { LaunchedBrowser } from '@mutp/testing/browsers';
import { freePort } from '@mutp/testing/ports';
import { waitFor } from '@mutp/testing/wait';
import { launchWithExtension } from './helpers/extension-browser';
import { FakeOrigo, startFakeOrigo } from './helpers/fake-origo';
import { startTestServer, TestServer } from './helpers/server';

jest.setTimeout(120_000);

let browser: LaunchedBrowser;
let server: TestServer;
let origo: FakeOrigo;
let worker: WebWorker;
let extensionId: string;

beforeAll(async () => {
  server = await startTestServer({ '/livez': { body: '{"status":"alive"}', type: 'application/json' } });
  origo = await startFakeOrigo(
    ['edge-1', 'edge-2', 'edge-3'].map((name) => ({ proxyId: `p-${name}`, name, httpUrl: server.url })),
  );
  ({ browser, worker, extensionId } = await launchWithExtension());
});

afterAll(async () => {
  await browser?.close();
  await origo?.close();
  await server?.close();
});

const setSettings = (settings: object) =>
  worker.evaluate((s) => chrome.storage.local.set({ settings: s }), settings as Record<string, unknown>);

/** The connection box once its check finished: state and lines. */
async function connectionBox(page: Page): Promise<{ state: string; lines: string[]; warn: boolean }> {
  return waitFor(
    'the connection check to finish',
    () =>
      page.evaluate(() => {
        const box = document.getElementById('connection');
        const state = box?.dataset.state;
        if (!box || !state || state === 'checking' || state === 'unchecked') return undefined;
        return {
          state,
          lines: [...box.querySelectorAll('.connection-lines div')].map((d) => d.textContent ?? ''),
          warn: box.querySelector('.warn') !== null,
        };
      }),
    15_000,
  );
}

async function open(path: string): Promise<Page> {
  const page = await browser.browser.newPage();
  await page.goto(`chrome-extension://${extensionId}/${path}`, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 10_000 });
  return page;
}

test('a fresh install says, in the popup and the options page, that origo is not configured', async () => {
  for (const path of ['popup.html?tab=999999', 'options.html']) {
    const page = await open(path);
    try {
      // The check's outcome depends on whether something listens on 8700 here: only the source line is asserted.
      const box = await connectionBox(page);
      expect({ path, first: box.lines[0], warn: box.warn }).toEqual({
        path,
        first: expect.stringContaining('origo not configured: using the local default ws://127.0.0.1:8700/v1/client'),
        warn: true,
      });
    } finally {
      await page.close();
    }
  }
});

test('“Test connection” in the options page reaches origo, counts the proxies offered and probes one', async () => {
  await setSettings({ origoUrl: origo.clientUrl, mode: 'rlnc', proxies: 4 });
  const page = await open('options.html');
  try {
    await connectionBox(page); // the check the page runs on opening
    const before = origo.received.length;
    await page.click('#test-connection');
    await waitFor('the button’s check to reach origo', async () => (origo.received.length > before ? true : undefined));
    const box = await connectionBox(page);
    expect(box.state).toBe('reachable');
    expect(box.lines[0]).toBe(`origo: ${origo.clientUrl}`);
    expect(box.lines[1]).toMatch(/^✓ origo reachable \(\d+ ms\): 3 proxies offered for rlnc \(asked for 4\)$/);
    expect(box.lines[2]).toBe('✓ proxy edge-1 answers HTTP');
    expect(origo.received.slice(before).map((m) => m.type)).toEqual(['hello', 'request-proxies']);
    expect(origo.received.at(-1)).toMatchObject({ type: 'request-proxies', count: 4, mode: 'rlnc' });
    expect(server.log).toContain('GET /livez');
  } finally {
    await page.close();
  }
});

test('the popup checks origo when it opens: an unreachable origo is said before any video plays', async () => {
  const port = await freePort();
  await setSettings({ origoUrl: `ws://127.0.0.1:${port}/v1/client` });
  const page = await open('popup.html?tab=999999');
  try {
    const box = await connectionBox(page);
    expect(box.state).toBe('unreachable');
    expect(box.lines[1]).toMatch(/^✗ origo unreachable: ws:\/\/127\.0\.0\.1:\d+\/v1\/client: connection refused/);
  } finally {
    await page.close();
  }
});

test('settings an administrator set are shown locked in the options page, with their managed values', async () => {
  await setSettings({ origoUrl: origo.clientUrl, mode: 'http', proxies: 3 });
  // Chromium reads policies only from /etc (shared by every browser on the machine): the
  // background's mirror of storage.managed is written here instead, once the background wrote
  // its own (empty: no policy). Firefox's real managed storage: managed.firefox.browser.test.ts.
  await waitFor('the background to mirror storage.managed', () =>
    worker.evaluate(async () =>
      (await chrome.storage.local.get('managedSettings')).managedSettings ? true : undefined,
    ),
  );
  await worker.evaluate(() =>
    chrome.storage.local.set({
      managedSettings: { origoUrl: 'wss://origo.fleet.example/v1/client', mode: 'fountain' },
    }),
  );
  const page = await open('options.html');
  try {
    const form = await page.evaluate(() => {
      const f = document.getElementById('form') as HTMLFormElement;
      const input = (n: string) => f.elements.namedItem(n) as HTMLInputElement;
      return {
        origoUrl: [input('origoUrl').value, input('origoUrl').disabled],
        mode: [input('mode').value, input('mode').disabled],
        proxies: [input('proxies').value, input('proxies').disabled],
        notes: [...document.querySelectorAll('.locked-note')].map((n) => (n as HTMLElement).dataset.key),
        notice: document.getElementById('managed')!.hidden ? '' : document.getElementById('managed')!.textContent,
      };
    });
    expect(form).toEqual({
      origoUrl: ['wss://origo.fleet.example/v1/client', true],
      mode: ['fountain', true],
      proxies: ['3', false],
      notes: ['origoUrl', 'mode'],
      notice: expect.stringContaining('origoUrl, mode'),
    });
    const box = await connectionBox(page);
    expect(box.lines[0]).toBe('origo (set by your administrator): wss://origo.fleet.example/v1/client');
    // Saving keeps the user's own values of the locked settings in storage.local.
    await page.evaluate(() => {
      const f = document.getElementById('form') as HTMLFormElement;
      (f.elements.namedItem('proxies') as HTMLInputElement).value = '5';
      (document.getElementById('save') as HTMLButtonElement).click();
    });
    const stored = await waitFor('the save', async () => {
      const got = (await worker.evaluate(() => chrome.storage.local.get('settings'))) as {
        settings: { origoUrl: string; mode: string; proxies: number };
      };
      return got.settings.proxies === 5 ? got.settings : undefined;
    });
    expect(stored).toMatchObject({ origoUrl: origo.clientUrl, mode: 'http', proxies: 5 });
  } finally {
    await page.close();
    await worker.evaluate(() => chrome.storage.local.set({ managedSettings: {} }));
  }
});
