/**
 * The built Firefox add-on (dist/firefox) in Firefox ESR under WebDriver BiDi: the page hook →
 * content script relay → downloader frame path works with the one-time token (a segment request
 * reaches origo, here a TCP listener that counts connections and drops them, so the request falls
 * back 'origo-unreachable'), cross-origin URLs need CORS consent, and a page that loads the
 * downloader frame itself gets nothing from it (issue 9, findings 4 and 10, in Firefox).
 */
import { cpSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { AddressInfo, createServer, Server, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { Browser, Page } from 'puppeteer-core';
import { ensureBuilt, EXTENSION_ROOT } from './helpers/build';
import { startTestServer, TestServer } from './helpers/server';
import { waitFor } from '@mutp/testing/wait';
import type { Counters } from '../src/common/counters';
import { DOWNLOADER_PORT } from '../src/common/messages';

jest.setTimeout(180_000);

const FIREFOX_PATH = process.env.FIREFOX_PATH ?? '/usr/lib/firefox-esr/firefox-esr';
const FIREFOX_DIR = join(EXTENSION_ROOT, 'dist', 'firefox');
const ATTACK_WATCH_MS = 3000;

interface PageWindow {
  load(url: string, headers?: Record<string, string>): Promise<{ status: number; length: number }>;
  attack(src: string, marker: string, value: string, url: string, watchMs: number): Promise<string[]>;
  __mutp?: { counters(): Counters };
}

const PAGE_HTML = `<!doctype html><html><head><script>
  window.load = (url, headers) => new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open('GET', url);
    x.responseType = 'arraybuffer';
    for (const [k, v] of Object.entries(headers || {})) x.setRequestHeader(k, v);
    x.onloadend = () => resolve({ status: x.status, length: x.response ? x.response.byteLength : -1 });
    x.send();
  });
  window.attack = (src, marker, value, url, watchMs) => new Promise((resolve) => {
    const f = document.createElement('iframe');
    const got = [];
    f.onload = () => {
      const channel = new MessageChannel();
      channel.port1.onmessage = (e) => got.push(JSON.stringify(e.data));
      f.contentWindow.postMessage({ [marker]: value }, '*', [channel.port2]);
      channel.port1.postMessage({ type: 'hello', session: 'attacker', pageUrl: location.href });
      channel.port1.postMessage({ type: 'get', id: 1, url, mode: 'http', proxies: 32 });
      setTimeout(() => resolve(got), watchMs);
    };
    f.src = src;
    document.body.appendChild(f);
  });
</script></head><body>page</body></html>`;

let browser: Browser;
let server: TestServer;
let origo: Server;
const origoConnections: Socket[] = [];
let addonDir: string;
let page: Page;

const counters = () => page.evaluate(() => (window as unknown as PageWindow).__mutp!.counters());
const load = (url: string, headers: Record<string, string>) =>
  page.evaluate((u, h) => (window as unknown as PageWindow).load(u, h), url, headers);

beforeAll(async () => {
  if (!existsSync(FIREFOX_PATH)) throw new Error(`Firefox not found at ${FIREFOX_PATH}: apt-get install firefox-esr`);
  ensureBuilt();
  origo = createServer((socket) => {
    origoConnections.push(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => origo.listen(0, '127.0.0.1', resolve));
  server = await startTestServer({
    '/page.html': { body: PAGE_HTML, type: 'text/html' },
    '/private/secret.m4s': { body: 'secret bytes of another origin', type: 'video/iso.segment' },
  });
  addonDir = mkdtempSync(join(tmpdir(), 'mutp-ext-firefox-'));
  cpSync(FIREFOX_DIR, addonDir, { recursive: true });
  const origoUrl = `ws://127.0.0.1:${(origo.address() as AddressInfo).port}/v1/client`;
  writeFileSync(
    join(addonDir, 'preset-settings.json'),
    JSON.stringify({ origoUrl, mode: 'http', proxies: 2, exposeCounters: true }),
  );
  browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX_PATH,
    headless: true,
    protocolTimeout: 60_000,
  });
  await browser.installExtension(addonDir);
  page = await browser.newPage();
  await waitFor(
    'the preset settings to reach the page hook',
    async () => {
      await page.goto(`${server.url}/page.html`, { waitUntil: 'load' });
      await new Promise((r) => setTimeout(r, 200));
      return page.evaluate(() => ((window as unknown as PageWindow).__mutp ? true : undefined));
    },
    30_000,
    200,
  );
});

afterAll(async () => {
  await browser?.close().catch(() => undefined);
  await server?.close();
  await new Promise<void>((resolve) => (origo ? origo.close(() => resolve()) : resolve()));
  if (addonDir) rmSync(addonDir, { recursive: true, force: true });
});

test('a segment request goes page hook → content script → downloader frame (token accepted) → origo', async () => {
  const seg = await load(`${server.url}/seg/0.m4s`, { Range: 'bytes=0-99' });
  expect(seg).toEqual({ status: 206, length: 100 });
  expect(await counters()).toMatchObject({ intercepted: 1, fallbacks: { 'origo-unreachable': 1 } });
  expect(origoConnections.length).toBeGreaterThan(0);
});

test('a cross-origin URL goes to the downloader only with the origin’s CORS consent', async () => {
  const other = server.url.replace('127.0.0.1', 'localhost');
  const before = origoConnections.length;
  // Media of an origin the page has not reached itself stays on the network ('csp-unseen': the
  // page's CSP is unknown to the extension), without a consent HEAD; the page's own request (not
  // media, as a player's manifest) reaches it.
  await load(`${other}/seg/3.m4s`, { Range: 'bytes=0-9' });
  expect((await counters()).fallbacks['csp-unseen']).toBe(1);
  expect(server.log).not.toContain('HEAD /seg/3.m4s');
  await load(`${other}/seg/1.m4s`, {});
  await load(`${other}/private/secret.m4s`, { Range: 'bytes=0-9' });
  expect((await counters()).fallbacks.cors).toBe(1);
  expect(origoConnections.length).toBe(before);
  // With 'Access-Control-Allow-Origin: *' the same origin's segment goes through (to origo, which is down).
  expect(await load(`${other}/seg/2.m4s`, { Range: 'bytes=0-9' })).toEqual({ status: 206, length: 10 });
  // Reached the downloader (which remembers that origo was down moments ago instead of dialling again).
  expect((await counters()).fallbacks).toEqual({ cors: 1, 'csp-unseen': 1, 'origo-unreachable': 2 });
});

test('a page that loads the downloader frame itself gets no answer from it', async () => {
  const src = await page.evaluate(() => document.querySelector('iframe')?.src);
  expect(src).toMatch(/^moz-extension:\/\/[^/]+\/downloader\.html$/);
  const before = origoConnections.length;
  // Each marker value in a frame of its own, attacked at once, each port watched for ATTACK_WATCH_MS.
  const values = ['attacker-session', '0123456789abcdef0123456789abcdef'];
  const answers = await Promise.all(
    values.map((value) =>
      page.evaluate(
        (s, marker, v, url, ms) => (window as unknown as PageWindow).attack(s, marker, v, url, ms),
        src!,
        DOWNLOADER_PORT,
        value,
        `${server.url}/private/secret.m4s`,
        ATTACK_WATCH_MS,
      ),
    ),
  );
  expect(values.map((value, i) => ({ value, answers: answers[i] }))).toEqual(
    values.map((value) => ({ value, answers: [] })),
  );
  expect(origoConnections.length).toBe(before);
});
