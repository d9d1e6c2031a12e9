/**
 * Issue 9, findings 4 and 10, in the built extension (dist/chrome) in headless Chromium.
 *
 * Finding 4: a foreign page must not be able to drive the downloader frame. The attacker knows
 * everything a page can observe: the extension id (the content script's iframe `src` is in the
 * DOM) and the window-message marker (a constant of the public source). It loads downloader.html
 * itself, or posts to the frame the content script made, and offers a MessagePort with any
 * marker value; the downloader must never answer on it nor start a download (origo, here a TCP
 * listener that counts connections, is never contacted by the attack).
 *
 * Finding 10: the page gets the bytes of a cross-origin URL only with the origin's CORS consent
 * for the page (the request goes to the network otherwise, reason 'cors'; since issue 31 the
 * consent check runs beside the download and the relay holds the answer until it comes), and
 * `user:pass@` URLs never reach the downloader.
 */
import { AddressInfo, createServer, Server, Socket } from 'node:net';
import type { Page, WebWorker } from 'puppeteer-core';
import { ensureBuilt } from './helpers/build';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { startTestServer, TestServer } from './helpers/server';
import { waitFor } from '@mutp/testing/wait';
import type { Counters } from '../src/common/counters';
import { DOWNLOADER_PORT } from '../src/common/messages';

jest.setTimeout(120_000);

/** What the attacker page (ATTACKER_HTML) defines, and the hook's counters (exposeCounters). */
interface AttackerWindow {
  attack(w: Window | null, marker: string, value: string, url: string, watchMs: number): Promise<string[]>;
  loadFrame(src: string): Promise<boolean>;
  load(url: string, headers?: Record<string, string>): Promise<{ status: number; length: number }>;
  __attackFrame: HTMLIFrameElement;
  __mutp: { counters(): Counters };
}

/**
 * How long an attack port is watched for any message from the downloader (the marker values'
 * ports are offered at once and watched side by side).
 */
const ATTACK_WATCH_MS = 3000;

let browser: LaunchedBrowser;
let server: TestServer;
let worker: WebWorker;
let extensionId: string;
/** Stands in for origo: counts the connections made to it, then drops them. */
let origo: Server;
const origoConnections: Socket[] = [];

const ATTACKER_HTML = `<!doctype html><html><head><script>
  // Offers the downloader frame in window w a port with marker value v; collects what comes back.
  window.attack = (w, marker, value, url, watchMs) => new Promise((resolve) => {
    const channel = new MessageChannel();
    const got = [];
    channel.port1.onmessage = (e) => {
      got.push(JSON.stringify(e.data, (k, v) => (v instanceof ArrayBuffer ? 'bytes:' + v.byteLength : v)));
      if (e.data && e.data.type === 'ready') channel.port1.postMessage({ type: 'get', id: 1, url, mode: 'rlnc', proxies: 2 });
    };
    w.postMessage({ [marker]: value }, '*', [channel.port2]);
    // Also try requests right away, before any 'ready'.
    channel.port1.postMessage({ type: 'hello', session: 'attacker', pageUrl: location.href });
    channel.port1.postMessage({ type: 'get', id: 2, url, mode: 'http', proxies: 32 });
    setTimeout(() => resolve(got), watchMs);
  });
  window.loadFrame = (src) => new Promise((resolve) => {
    const f = document.createElement('iframe');
    f.onload = () => resolve(true);
    f.src = src;
    document.body.appendChild(f);
    window.__attackFrame = f;
  });
  window.load = (url, headers) => new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open('GET', url);
    x.responseType = 'arraybuffer';
    for (const [k, v] of Object.entries(headers || {})) x.setRequestHeader(k, v);
    x.onloadend = () => resolve({ status: x.status, length: x.response ? x.response.byteLength : -1 });
    x.send();
  });
</script></head><body>attacker</body></html>`;

beforeAll(async () => {
  const dir = ensureBuilt();
  origo = createServer((socket) => {
    origoConnections.push(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => origo.listen(0, '127.0.0.1', resolve));
  server = await startTestServer({
    '/attacker.html': { body: ATTACKER_HTML, type: 'text/html' },
    // Served without Access-Control-Allow-Origin: no page of another origin may read it.
    '/private/secret.m4s': { body: 'secret bytes of another origin', type: 'video/iso.segment' },
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
  const origoUrl = `ws://127.0.0.1:${(origo.address() as AddressInfo).port}/v1/client`;
  await worker.evaluate(
    (url) => chrome.storage.local.set({ settings: { origoUrl: url, mode: 'rlnc', proxies: 2, exposeCounters: true } }),
    origoUrl,
  );
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await new Promise<void>((resolve) => (origo ? origo.close(() => resolve()) : resolve()));
});

async function openAttacker(): Promise<Page> {
  const page = await browser.browser.newPage();
  await page.goto(`${server.url}/attacker.html`, { waitUntil: 'load' });
  await waitFor('the hook to get its configuration', () =>
    page.evaluate(() => ((window as unknown as { __mutp?: unknown }).__mutp ? true : undefined)),
  );
  return page;
}

const MARKER_VALUES = ['attacker-session', '0123456789abcdef0123456789abcdef'];

test('a page that loads downloader.html itself cannot attach a port to it or download through it', async () => {
  const page = await openAttacker();
  try {
    const before = origoConnections.length;
    const src = `chrome-extension://${extensionId}/downloader.html`;
    await page.evaluate((s) => (window as unknown as AttackerWindow).loadFrame(s), src);
    // Each marker value's port offered at once, each watched for ATTACK_WATCH_MS.
    const answers = await Promise.all(
      MARKER_VALUES.map((value) =>
        page.evaluate(
          (marker, v, url, ms) =>
            (window as unknown as AttackerWindow).attack(
              (window as unknown as AttackerWindow).__attackFrame.contentWindow,
              marker,
              v,
              url,
              ms,
            ),
          DOWNLOADER_PORT,
          value,
          `${server.url}/private/secret.m4s`,
          ATTACK_WATCH_MS,
        ),
      ),
    );
    expect(MARKER_VALUES.map((value, i) => ({ value, answers: answers[i] }))).toEqual(
      MARKER_VALUES.map((value) => ({ value, answers: [] })),
    );
    expect(origoConnections.length - before).toBe(0);
  } finally {
    await page.close();
  }
});

test('a page cannot attach a port to the downloader frame the extension made for it', async () => {
  const page = await openAttacker();
  try {
    // A media request makes the content script create the real frame (origo drops the connection,
    // so the request falls back: the legitimate path still reaches the downloader).
    const seg = await page.evaluate(
      (u) => (window as unknown as AttackerWindow).load(u, { Range: 'bytes=0-99' }),
      `${server.url}/seg/0.m4s`,
    );
    expect(seg).toEqual({ status: 206, length: 100 });
    const counters = (await page.evaluate(() => (window as unknown as AttackerWindow).__mutp.counters())) as Counters;
    expect(counters).toMatchObject({ intercepted: 1, fallbacks: { 'origo-unreachable': 1 } });
    const legitimateConnections = origoConnections.length;
    expect(legitimateConnections).toBeGreaterThan(0);

    const frameSrc = await page.evaluate(() => document.querySelector('iframe')?.src);
    expect(frameSrc).toBe(`chrome-extension://${extensionId}/downloader.html`);
    const answers = await Promise.all(
      MARKER_VALUES.map((value) =>
        page.evaluate(
          (marker, v, url, ms) =>
            (window as unknown as AttackerWindow).attack(
              document.querySelector('iframe')!.contentWindow,
              marker,
              v,
              url,
              ms,
            ),
          DOWNLOADER_PORT,
          value,
          `${server.url}/private/secret.m4s`,
          ATTACK_WATCH_MS,
        ),
      ),
    );
    expect(MARKER_VALUES.map((value, i) => ({ value, answers: answers[i] }))).toEqual(
      MARKER_VALUES.map((value) => ({ value, answers: [] })),
    );
    expect(origoConnections.length).toBe(legitimateConnections);
  } finally {
    await page.close();
  }
});

test('a cross-origin URL’s bytes reach the page only with the origin’s CORS consent', async () => {
  const page = await openAttacker();
  try {
    // Same server, other origin: localhost vs 127.0.0.1.
    const other = server.url.replace('127.0.0.1', 'localhost');
    // Origo connections are no evidence here: the downloader frame, made for the page's first media
    // request, opens origo when it attaches (MutpClient.prepare) whatever happens to that request.
    // What the page was told shows in the reason the hook counts: 'cors' is the content script's
    // refusal (whatever the downloader answered meanwhile is dropped); with consent the downloader's
    // own answer comes through, 'origo-unreachable' (origo, a silent listener here, never welcomes it).
    // The page reaches that origin first with a request of its own (not media: the network), as a
    // player fetches its manifest: until then its cross-origin media stays on the network ('csp-unseen',
    // the page's CSP unknown to the extension), and no consent HEAD is sent.
    await page.evaluate((u) => fetch(u).then((r) => r.arrayBuffer()), `${other}/seg/1.m4s`);
    // No Access-Control-Allow-Origin: the content script refuses it, the page's own request fails CORS.
    const refused = await page.evaluate(
      (u) => (window as unknown as AttackerWindow).load(u, { Range: 'bytes=0-9' }),
      `${other}/private/secret.m4s`,
    );
    expect(refused.length).toBe(-1);
    let c = (await page.evaluate(() => (window as unknown as AttackerWindow).__mutp.counters())) as Counters;
    expect(c.fallbacks).toEqual({ cors: 1 });
    expect(server.log).toContain('HEAD /private/secret.m4s');

    // `Access-Control-Allow-Origin: *`: consent given, the request reaches the downloader (and origo).
    const allowed = await page.evaluate(
      (u) => (window as unknown as AttackerWindow).load(u, { Range: 'bytes=0-9' }),
      `${other}/seg/2.m4s`,
    );
    expect(allowed).toEqual({ status: 206, length: 10 });
    c = (await page.evaluate(() => (window as unknown as AttackerWindow).__mutp.counters())) as Counters;
    expect(c.fallbacks).toEqual({ cors: 1, 'origo-unreachable': 1 });
  } finally {
    await page.close();
  }
});
