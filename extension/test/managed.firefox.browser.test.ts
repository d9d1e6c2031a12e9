/**
 * Managed settings for real, in Firefox ESR: the operator's values reach the extension through
 * `storage.managed` and override the user's. Firefox reads them from its enterprise policies
 * (policies.json, `3rdparty.Extensions[<id>]`) or from a managed-storage manifest in
 * `~/.mozilla/managed-storage/<id>.json`; policies.json lives in the installation or /etc (shared
 * by every Firefox here), so this test uses the manifest under a HOME of its own.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { Browser } from 'puppeteer-core';
import { FIREFOX_PATH } from '@mutp/testing/browsers';
import { waitFor } from '@mutp/testing/wait';
import { EXTENSION_ROOT, ensureBuilt } from './helpers/build';
import { startTestServer, TestServer } from './helpers/server';

jest.setTimeout(120_000);

const ADDON_ID = 'mutp-extension@mutp.invalid';

let browser: Browser | undefined;
let server: TestServer;
let home: string;
let addonDir: string;

beforeAll(async () => {
  if (!existsSync(FIREFOX_PATH)) throw new Error(`Firefox not found at ${FIREFOX_PATH}: apt-get install firefox-esr`);
  ensureBuilt();
  server = await startTestServer({ '/page.html': { body: '<!doctype html><p>page</p>', type: 'text/html' } });
  home = mkdtempSync(join(tmpdir(), 'mutp-ext-managed-home-'));
  mkdirSync(join(home, '.mozilla', 'managed-storage'), { recursive: true });
  writeFileSync(
    join(home, '.mozilla', 'managed-storage', `${ADDON_ID}.json`),
    JSON.stringify({
      name: ADDON_ID,
      description: 'MUTP settings for this fleet',
      type: 'storage',
      data: { mode: 'fountain', proxies: 5, origoUrl: 'wss://origo.fleet.example/v1/client' },
    }),
  );
  // The user's own settings (applied on install), which the managed ones override where they overlap.
  addonDir = mkdtempSync(join(tmpdir(), 'mutp-ext-managed-addon-'));
  cpSync(join(EXTENSION_ROOT, 'dist', 'firefox'), addonDir, { recursive: true });
  writeFileSync(
    join(addonDir, 'preset-settings.json'),
    JSON.stringify({ mode: 'http', proxies: 2, deadlineMs: 7000, exposeCounters: true }),
  );
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX_PATH,
    headless: true,
    protocolTimeout: 60_000,
    env: { ...process.env, HOME: home },
  });
  await browser.installExtension(addonDir);
});

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await server?.close();
  for (const dir of [home, addonDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test('the operator’s managed settings override the user’s in the page hook', async () => {
  const page = await browser!.newPage();
  const config = await waitFor(
    'the user’s preset and the managed settings to reach the page hook',
    async () => {
      await page.goto(`${server.url}/page.html`, { waitUntil: 'load' });
      await new Promise((r) => setTimeout(r, 200));
      const c = (await page.evaluate(
        () => (window as unknown as { __mutp?: { config(): unknown } }).__mutp?.config() ?? null,
      )) as { deadlineMs?: number; mode?: string } | null;
      // The user's preset and the background's mirror of the managed settings both arrive after install.
      return c?.deadlineMs === 7000 && c.mode === 'fountain' ? c : undefined;
    },
    30_000,
    200,
  );
  expect(config).toMatchObject({ enabled: true, mode: 'fountain', proxies: 5, deadlineMs: 7000 });
});
