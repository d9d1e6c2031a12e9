/**
 * Issue 31, the page's CSP: in Chromium and in Firefox ESR with the built extension, against origo,
 * two proxies and the media origins on loopback, a page whose meta CSP is
 * `connect-src 'self' <origin> <manifest origin>`:
 *
 * - a media URL on another origin (the same server as `localhost`, which the CSP does not list)
 *   is never fetched: not by the proxies, not by the extension's CORS-consent HEAD, not by the
 *   browser (the request goes to the network, where the CSP refuses it, and the page gets the
 *   network's error) — the exfiltration an injected script could make through the extension;
 * - a media URL on a listed origin goes to the network while the page has not reached that
 *   origin itself (a header CSP the extension cannot read might not list it), and through MUTP,
 *   byte-exact, once it has;
 * - as a player does it: a media request made in the very continuation of the page's own native
 *   request to a new origin (its manifest) already goes through MUTP.
 * The same page with the policy in a response header instead (Chromium): the extension cannot read
 * it, and still fetches nothing outside it.
 */
import { createHash } from 'node:crypto';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'puppeteer-core';
import {
  ChromiumSession,
  ensureExtensionBuilt,
  ExtensionSettings,
  launchChromium,
  launchFirefox,
  pageCounters,
  waitFor,
} from '../src/browser';
import { presetSettingsApplied } from '../src/firefox-sessions';
import { Cluster, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';
import { allStarted } from './all-started';

jest.setTimeout(120_000);

const OBJECT_BYTES = 300_000;

let origin: Origin;
/** A second listed origin, reached first by a native request in the test's last step. */
let manifestOrigin: Origin;
let blockedBase: string;
let site: Server;
let siteUrl: string;
let cluster: Cluster;
let chromium: ChromiumSession;
let settings: ExtensionSettings;

/** The policy of the pages: connect to themselves and to `allowed` only. */
function policy(allowed: string[]): string {
  return `connect-src 'self' ${allowed.join(' ')}`;
}

/** A page on its own origin with `meta` (a CSP meta element, or nothing). */
function pageHtml(meta: string): string {
  return `<!doctype html><html><head>
${meta}
<script>
  window.violations = [];
  document.addEventListener('securitypolicyviolation', (e) => window.violations.push(e.blockedURI));
  window.load = async (url) => {
    try {
      const r = await fetch(url);
      const body = new Uint8Array(await r.arrayBuffer());
      const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', body));
      return { status: r.status, length: body.length, sha256: Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('') };
    } catch (e) {
      return { error: String(e) };
    }
  };
  // A player: its manifest (not media, so native), then at once its first segment.
  window.manifestThenSegment = (manifest, segment) =>
    fetch(manifest).then((r) => r.text()).then(() => window.load(segment));
</script></head><body>csp page</body></html>`;
}

/** `/watch.html`: the policy in a meta element; `/header.html`: in the response header only. */
function startSite(csp: string): Promise<{ server: Server; url: string }> {
  const metaPage = pageHtml(`<meta http-equiv="Content-Security-Policy" content="${csp}">`);
  const headerPage = pageHtml('');
  const server = createServer((req, res) => {
    const headers = { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' };
    if (req.url === '/header.html') res.writeHead(200, { ...headers, 'content-security-policy': csp }).end(headerPage);
    else res.writeHead(200, headers).end(metaPage);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/watch.html` }),
    );
  });
}

beforeAll(async () => {
  ensureExtensionBuilt();
  origin = await startOrigin();
  manifestOrigin = await startOrigin();
  blockedBase = origin.url.replace('127.0.0.1', 'localhost');
  ({ server: site, url: siteUrl } = await startSite(policy([origin.url, manifestOrigin.url])));
  // Chromium launches while the cluster starts (CI time).
  await allStarted([
    startCluster({
      proxies: ['a', 'b'].map((x) => ({ name: `csp-${x}`, uploadKBps: 0 })),
      allowPrivateOrigins: true,
    }).then((c) => (cluster = c)),
    launchChromium().then((c) => (chromium = c)),
  ]);
  settings = {
    origoUrl: cluster.clientUrl,
    mode: 'rlnc',
    proxies: 2,
    exposeCounters: true,
    urlPatterns: ['*/object/*'],
  };
  await chromium.setSettings(settings);
}, 300_000); // the extension build, on a busy machine

afterAll(async () => {
  await chromium?.close();
  await cluster?.stop();
  await origin?.close();
  await manifestOrigin?.close();
  await new Promise<void>((done) => (site ? site.close(() => done()) : done()));
});

interface Loaded {
  status?: number;
  length?: number;
  sha256?: string;
  error?: string;
}

function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

async function load(page: Page, url: string): Promise<Loaded> {
  return page.evaluate((u) => (globalThis as unknown as { load(u: string): Promise<Loaded> }).load(u), url);
}

/** Requests for `path` at `at`, as "<method> <who>" (who: proxy or browser). */
function requestsFor(path: string, at = origin): string[] {
  return at.log
    .filter((r) => r.path === path)
    .map((r) => `${r.method} ${r.userAgent.startsWith('mutp-proxy/') ? 'proxy' : 'browser'}`);
}

/**
 * The case in one browser; `seed` tells its objects apart from another browser's (the origins'
 * logs are shared).
 */
async function cspCase(browser: Browser, seed: number, where: 'meta' | 'header' = 'meta'): Promise<void> {
  const page = await browser.newPage();
  try {
    await page.goto(where === 'meta' ? siteUrl : siteUrl.replace('/watch.html', '/header.html'), { waitUntil: 'load' });
    await waitFor('the hook to get its settings', async () => ((await pageCounters(page)) ? true : undefined), 10_000);

    // 1. Outside the CSP: an injected script's "media" request carrying data in its URL.
    const leakPath = `/object/${OBJECT_BYTES}/${seed + 3}`;
    const leaked = await load(page, `${blockedBase}${leakPath}?secret=cookie-value`);
    expect(leaked.error).toMatch(/TypeError/);
    // The browser reports its own refusal of the network request, once it had it (so the hook
    // really sent it to the network, where the CSP applies).
    await waitFor(
      'the browser to report the CSP violation',
      async () =>
        (await page.evaluate(() => (globalThis as unknown as { violations: string[] }).violations.length)) > 0
          ? true
          : undefined,
      5_000,
    );

    // 2. The listed origin, before the page reached it: the network (the page's CSP lets it).
    const firstPath = `/object/${OBJECT_BYTES}/${seed + 1}`;
    const first = await load(page, `${origin.url}${firstPath}`);
    expect(first).toEqual({
      status: 200,
      length: OBJECT_BYTES,
      sha256: sha256(syntheticObject(OBJECT_BYTES, seed + 1)),
    });

    // 3. The same origin again, now reached: through MUTP.
    const secondPath = `/object/${OBJECT_BYTES}/${seed + 2}`;
    const viaMutp = await load(page, `${origin.url}${secondPath}`);
    expect(viaMutp).toEqual({
      status: 200,
      length: OBJECT_BYTES,
      sha256: sha256(syntheticObject(OBJECT_BYTES, seed + 2)),
    });

    // 4. A new listed origin, as a player meets it: the manifest, then at once a segment.
    const segmentPath = `/object/${OBJECT_BYTES}/${seed + 4}`;
    const segment = await page.evaluate(
      (m, s) =>
        (globalThis as unknown as { manifestThenSegment(m: string, s: string): Promise<Loaded> }).manifestThenSegment(
          m,
          s,
        ),
      `${manifestOrigin.url}/status/200`,
      `${manifestOrigin.url}${segmentPath}`,
    );
    expect(segment).toEqual({
      status: 200,
      length: OBJECT_BYTES,
      sha256: sha256(syntheticObject(OBJECT_BYTES, seed + 4)),
    });
    expect(requestsFor(segmentPath, manifestOrigin).filter((r) => r !== 'GET proxy')).toEqual(['HEAD browser']);

    const counters = await pageCounters(page);
    expect(counters).toMatchObject({ media: 4, served: 2, servedBytes: 2 * OBJECT_BYTES });
    // Behind a header the blocked origin is just one the page never reached: the network all the same.
    expect(counters?.fallbacks).toEqual(where === 'meta' ? { csp: 1, 'csp-unseen': 1 } : { 'csp-unseen': 2 });
    // Nobody fetched the URL outside the CSP: no proxy, no consent HEAD, not the browser.
    expect(requestsFor(leakPath)).toEqual([]);
    expect(requestsFor(firstPath)).toEqual(['GET browser']);
    // Served by MUTP: the proxies fetched it, the browser only sent the consent HEAD (allowed: the
    // page's CSP lists the origin).
    const second = requestsFor(secondPath);
    expect(second.filter((r) => r !== 'GET proxy')).toEqual(['HEAD browser']);
    expect(second).toContain('GET proxy');
  } finally {
    await page.close();
  }
}

test('Chromium: a URL outside connect-src is never fetched; a listed origin goes through MUTP once the page reached it', async () => {
  await cspCase(chromium.browser, 0);
});

test('Chromium, the policy in a header the extension cannot read: nothing outside it is fetched either', async () => {
  await cspCase(chromium.browser, 20, 'header');
});

test('Firefox: the same', async () => {
  const firefox = await launchFirefox(settings);
  try {
    await presetSettingsApplied(firefox, siteUrl);
    await cspCase(firefox.browser, 10);
  } finally {
    await firefox.close();
  }
});
