/**
 * The XHR and fetch emulation in a real browser (headless Chromium): the hook installed on a
 * local test page with a downloader answering from local objects (test/harness/emulation.ts).
 * Checks what a player can observe: readyState sequence and events, every responseType, status
 * and headers, 206/Content-Range, abort, timeout, AbortSignal, and the fallback to the network.
 */
import type { Page } from 'puppeteer-core';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { buildHarness } from './helpers/harness';
import { startTestServer, TestServer } from './helpers/server';
import type { FetchOptions, XhrOptions } from './harness/page-helpers';
import type { Counters } from '../src/common/counters';

jest.setTimeout(60_000);

let browser: LaunchedBrowser;
let server: TestServer;
let page: Page;

type Result = Record<string, unknown> & { events: string[]; response: Record<string, unknown> };

async function openPage(query = ''): Promise<Page> {
  const p = await browser.browser.newPage();
  const errors: string[] = [];
  p.on('pageerror', (e) => errors.push(String(e)));
  await p.goto(`${server.url}/page.html${query}`, { waitUntil: 'load', timeout: 15_000 });
  await p.waitForFunction('window.__t && window.__harness', { timeout: 5000 });
  expect(errors).toEqual([]);
  return p;
}

const xhr = (o: XhrOptions, p = page) => p.evaluate((o) => (window as any).__t.runXhr(o), o) as Promise<Result>; // eslint-disable-line @typescript-eslint/no-explicit-any
const doFetch = (o: FetchOptions, p = page) =>
  p.evaluate((o) => (window as any).__t.runFetch(o), o) as Promise<Record<string, any>>; // eslint-disable-line @typescript-eslint/no-explicit-any
const counters = (p = page) => p.evaluate(() => (window as any).__harness.counters()) as Promise<Counters>; // eslint-disable-line @typescript-eslint/no-explicit-any

beforeAll(async () => {
  const harness = await buildHarness();
  server = await startTestServer({
    '/page.html': {
      body: '<!doctype html><html><head><script src="/harness.js"></script></head><body>test</body></html>',
      type: 'text/html',
    },
    '/harness.js': { body: harness, type: 'text/javascript' },
  });
  browser = await launchChromium();
  page = await openPage();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** The order of events the XHR standard prescribes for a successful request. */
const SUCCESS_EVENTS = (n: number) => [
  'rs1', // open() (native)
  'opened:1',
  'loadstart(0/0?)',
  'sent:1',
  'rs2',
  'rs3',
  `progress(${n}/${n})`,
  'rs4',
  `load(${n}/${n})`,
  `loadend(${n}/${n})`,
];

describe('XMLHttpRequest', () => {
  test('arraybuffer: readyState 1→2→3→4, ProgressEvents, status, headers, responseURL', async () => {
    const url = `${server.url}/obj/5000`;
    const r = await xhr({ url, responseType: 'arraybuffer' });
    expect(r.events).toEqual(SUCCESS_EVENTS(5000));
    expect(r).toMatchObject({
      readyState: 4,
      status: 200,
      statusText: 'OK',
      responseURL: url,
      contentType: 'application/octet-stream', // MUTP carries no Content-Type: guessed from the path
      contentLength: '5000',
      contentRange: null,
      from: null, // not the network
      allHeaders: 'content-length: 5000\r\ncontent-type: application/octet-stream\r\n',
      response: { kind: 'arraybuffer', length: 5000, matches: true },
    });
  });

  test('onxxx properties fire like listeners', async () => {
    const r = await xhr({ url: `${server.url}/obj/300`, responseType: 'arraybuffer', useProperties: true });
    expect(r.events).toEqual(SUCCESS_EVENTS(300));
  });

  test("responseType '' and 'text': UTF-8 text in response and responseText", async () => {
    for (const responseType of ['', 'text'] as const) {
      const r = await xhr({ url: `${server.url}/text/abc`, responseType });
      expect(r).toMatchObject({ status: 200, from: null, response: { kind: 'string', value: 'héllo abc ✓' } });
      expect(r.responseText).toBe('héllo abc ✓');
    }
  });

  test("responseType 'json' and 'blob'; responseText throws for them", async () => {
    const json = await xhr({ url: `${server.url}/json/word`, responseType: 'json' });
    expect(json).toMatchObject({ status: 200, from: null, response: { value: { word: 'word', n: [1, 2, 3] } } });
    expect(json.responseText).toBe('throws InvalidStateError');
    const blob = await xhr({ url: `${server.url}/obj/777`, responseType: 'blob' });
    expect(blob).toMatchObject({
      status: 200,
      response: { kind: 'blob', type: 'application/octet-stream', length: 777, matches: true },
    });
  });

  test('Range request: 206 with Content-Range, the right bytes', async () => {
    const r = await xhr({
      url: `${server.url}/obj/4000`,
      responseType: 'arraybuffer',
      headers: { Range: 'bytes=1000-1999' },
    });
    expect(r).toMatchObject({
      status: 206,
      statusText: 'Partial Content',
      contentRange: 'bytes 1000-1999/4000',
      contentLength: '1000',
      from: null,
      response: { length: 1000, matches: true },
    });
    expect(r.events).toEqual(SUCCESS_EVENTS(1000));
    const suffix = await xhr({
      url: `${server.url}/obj/4000`,
      responseType: 'arraybuffer',
      headers: { Range: 'bytes=-10' },
    });
    expect(suffix).toMatchObject({
      status: 206,
      contentRange: 'bytes 3990-3999/4000',
      response: { length: 10, matches: true },
    });
  });

  test('abort() while waiting: readystatechange(4), abort, loadend, then readyState 0 and nothing more', async () => {
    const before = await counters();
    const r = await xhr({
      url: `${server.url}/obj/1000?delay=400`,
      responseType: 'arraybuffer',
      abortAfterMs: 50,
      settleMs: 600,
    });
    expect(r.events).toEqual([
      'rs1',
      'opened:1',
      'loadstart(0/0?)',
      'sent:1',
      'rs4',
      'abort(0/0?)',
      'loadend(0/0?)',
      'aborted:0',
    ]);
    expect(r).toMatchObject({
      readyState: 0,
      status: 0,
      statusText: '',
      allHeaders: '',
      response: { kind: 'object', value: null },
    });
    const after = await counters();
    expect(after.aborted - before.aborted).toBe(1);
  });

  test('abort() right after send()', async () => {
    const r = await xhr({ url: `${server.url}/obj/1000`, responseType: 'arraybuffer', abortAfterMs: 0, settleMs: 200 });
    expect(r.events).toEqual([
      'rs1',
      'opened:1',
      'loadstart(0/0?)',
      'sent:1',
      'rs4',
      'abort(0/0?)',
      'loadend(0/0?)',
      'aborted:0',
    ]);
  });

  test('timeout: readystatechange(4), timeout, loadend; readyState stays 4 with status 0', async () => {
    const r = await xhr({
      url: `${server.url}/obj/1000?delay=800`,
      responseType: 'arraybuffer',
      timeout: 100,
      settleMs: 900,
    });
    expect(r.events).toEqual(['rs1', 'opened:1', 'loadstart(0/0?)', 'sent:1', 'rs4', 'timeout(0/0?)', 'loadend(0/0?)']);
    expect(r).toMatchObject({ readyState: 4, status: 0, timeout: 100, response: { value: null } });
  });

  test('reusing one object: open() again after a completed request', async () => {
    const r = (await page.evaluate(async (base) => {
      const x = new XMLHttpRequest();
      const run = (url: string) =>
        new Promise<number>((resolve) => {
          x.open('GET', url);
          x.responseType = 'arraybuffer';
          x.onloadend = () => resolve((x.response as ArrayBuffer).byteLength);
          x.send();
        });
      return [await run(`${base}/obj/100`), await run(`${base}/obj/200`), x instanceof XMLHttpRequest];
    }, server.url)) as unknown[];
    expect(r).toEqual([100, 200, true]);
  });

  test('the constructor looks native: name, constants, instanceof, prototype methods', async () => {
    const r = await page.evaluate(() => {
      const x = new XMLHttpRequest();
      return {
        name: XMLHttpRequest.name,
        DONE: XMLHttpRequest.DONE,
        instDone: x.DONE,
        isEventTarget: x instanceof EventTarget,
        upload: x.upload instanceof XMLHttpRequestUpload,
        readyState: x.readyState,
      };
    });
    expect(r).toEqual({
      name: 'XMLHttpRequest',
      DONE: 4,
      instDone: 4,
      isEventTarget: true,
      upload: true,
      readyState: 0,
    });
  });
});

describe('fallback to the network', () => {
  test('a downloader failure: the same XHR is sent natively, one loadstart, counted by reason', async () => {
    const before = await counters();
    const url = `${server.url}/obj/2000?fail=no-proxies`;
    const r = await xhr({ url, responseType: 'arraybuffer' });
    expect(r.events.filter((e) => e.startsWith('loadstart'))).toHaveLength(1);
    expect(r.events.slice(-3)).toEqual(['rs4', 'load(2000/2000)', 'loadend(2000/2000)']);
    expect(r).toMatchObject({ status: 200, from: 'network', response: { length: 2000, matches: true } });
    const after = await counters();
    expect((after.fallbacks['no-proxies'] ?? 0) - (before.fallbacks['no-proxies'] ?? 0)).toBe(1);
  });

  test('no answer before the deadline: network, reason "timeout"; a Range fallback keeps its header', async () => {
    const before = await counters();
    const r = await xhr({
      url: `${server.url}/obj/3000?hang=1`,
      responseType: 'arraybuffer',
      headers: { Range: 'bytes=0-99' },
    });
    expect(r).toMatchObject({
      status: 206,
      from: 'network',
      contentRange: 'bytes 0-99/3000',
      response: { length: 100 },
    });
    const after = await counters();
    expect((after.fallbacks.timeout ?? 0) - (before.fallbacks.timeout ?? 0)).toBe(1);
  });

  test("the page's timeout still counts from its send() after a fallback", async () => {
    const r = await xhr({ url: `${server.url}/obj/1000?hang=1`, responseType: 'arraybuffer', timeout: 60_000 });
    expect(r).toMatchObject({ status: 200, from: 'network', timeout: 60_000 });
  });

  test('fetch: a failure resolves with the network response', async () => {
    // (not origo-unreachable: that one makes the downloader fail fast for a few seconds)
    const r = await doFetch({ url: `${server.url}/obj/1500?fail=connect-failed` });
    expect(r).toMatchObject({ status: 200, headers: { 'x-from': 'network' }, body: { length: 1500, matches: true } });
  });
});

describe('pass-through', () => {
  test('requests the proxies cannot replay go to the network untouched', async () => {
    const before = await counters();
    const post = await xhr({ url: `${server.url}/obj/100`, method: 'POST', responseType: 'arraybuffer' });
    expect(post).toMatchObject({ status: 200, from: 'network' });
    const creds = await xhr({ url: `${server.url}/obj/100`, withCredentials: true, responseType: 'arraybuffer' });
    expect(creds).toMatchObject({ status: 200, from: 'network' });
    const auth = await doFetch({ url: `${server.url}/obj/100`, init: { headers: { Authorization: 'Bearer x' } } });
    expect(auth).toMatchObject({ status: 200, headers: { 'x-from': 'network' } });
    const sync = await page.evaluate((u) => (window as any).__t.syncXhr(u), `${server.url}/obj/100`); // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(sync).toEqual({ status: 200, from: 'network' });
    const after = await counters();
    for (const reason of ['method', 'credentials', 'authorization', 'sync']) {
      expect((after.fallbacks[reason] ?? 0) - (before.fallbacks[reason] ?? 0)).toBe(1);
    }
    expect(after.intercepted).toBe(before.intercepted);
  });

  test('everything passes when the extension is off (counted as "disabled")', async () => {
    const off = await openPage('?enabled=0');
    try {
      const r = await xhr({ url: `${server.url}/obj/100`, responseType: 'arraybuffer' }, off);
      expect(r).toMatchObject({ status: 200, from: 'network' });
      const c = await counters(off);
      expect(c).toMatchObject({ media: 1, intercepted: 0, fallbacks: { disabled: 1 } });
    } finally {
      await off.close();
    }
  });
});

describe('fetch', () => {
  test('a real Response: status, headers, url, type; every body reader', async () => {
    const url = `${server.url}/obj/2500`;
    const r = await doFetch({ url });
    expect(r).toMatchObject({
      ok: true,
      status: 200,
      statusText: 'OK',
      url,
      type: 'basic',
      redirected: false,
      isResponse: true,
      headers: { 'content-type': 'application/octet-stream', 'content-length': '2500' },
      body: { kind: 'arraybuffer', length: 2500, matches: true },
    });
    expect(r.headers['x-from']).toBeUndefined();
    expect(await doFetch({ url: `${server.url}/text/xyz`, read: 'text' })).toMatchObject({
      body: { value: 'héllo xyz ✓' },
    });
    expect(await doFetch({ url: `${server.url}/json/q`, read: 'json' })).toMatchObject({
      body: { value: { word: 'q' } },
    });
    expect(await doFetch({ url, read: 'blob' })).toMatchObject({ body: { kind: 'blob', length: 2500, matches: true } });
  });

  test('Range: 206 with Content-Range, from a Request object too', async () => {
    const init = { headers: { Range: 'bytes=10-19' } };
    for (const asRequest of [false, true]) {
      const r = await doFetch({ url: `${server.url}/obj/2500`, init, asRequest });
      expect(r).toMatchObject({
        status: 206,
        statusText: 'Partial Content',
        headers: { 'content-range': 'bytes 10-19/2500', 'content-length': '10' },
        body: { length: 10, matches: true },
      });
      expect(r.headers['x-from']).toBeUndefined();
    }
  });

  test('AbortSignal: aborted before the call, and while waiting → AbortError DOMException', async () => {
    const before = await counters();
    expect(await doFetch({ url: `${server.url}/obj/100`, abort: 'before' })).toEqual({
      rejected: true,
      name: 'AbortError',
      isDomException: true,
    });
    expect(await doFetch({ url: `${server.url}/obj/100?delay=500`, abort: 50 })).toEqual({
      rejected: true,
      name: 'AbortError',
      isDomException: true,
    });
    const after = await counters();
    expect(after.aborted - before.aborted).toBe(2);
  });
});

describe('manifests', () => {
  test('segments listed in an HLS playlist loaded with XHR are intercepted (init, media, byte range)', async () => {
    const p = await openPage();
    try {
      const manifest = await xhr({ url: `${server.url}/hls/index.m3u8` }, p);
      expect(manifest).toMatchObject({ status: 200, from: 'network' });
      const c0 = await counters(p);
      expect(c0).toMatchObject({ manifests: 1, segmentsKnown: 4 });
      const init = await xhr({ url: `${server.url}/seg/init.mp4`, responseType: 'arraybuffer' }, p);
      expect(init).toMatchObject({ status: 200, from: null, response: { length: 300, matches: true } });
      const seg = await xhr({ url: `${server.url}/seg/1.m4s`, responseType: 'arraybuffer' }, p);
      expect(seg).toMatchObject({
        status: 200,
        from: null,
        contentType: 'video/iso.segment',
        response: { length: 1001 },
      });
      const ranged = await xhr(
        { url: `${server.url}/seg/all.mp4`, responseType: 'arraybuffer', headers: { Range: 'bytes=0-499' } },
        p,
      );
      expect(ranged).toMatchObject({
        status: 206,
        from: null,
        contentRange: 'bytes 0-499/2000',
        response: { matches: true },
      });
      // a second range of the same file is a ranged transfer of its own
      const next = await xhr(
        { url: `${server.url}/seg/all.mp4`, responseType: 'arraybuffer', headers: { Range: 'bytes=500-999' } },
        p,
      );
      expect(next).toMatchObject({
        status: 206,
        from: null,
        contentRange: 'bytes 500-999/2000',
        response: { matches: true },
      });
      type Record = { cached: boolean; bytes: number };
      const records = (await p.evaluate(() => (window as any).__harness.records())) as Record[]; // eslint-disable-line @typescript-eslint/no-explicit-any
      expect(records.map((r) => [r.cached, r.bytes])).toEqual([
        [false, expect.any(Number)],
        [false, 1001],
        [false, 500],
        [false, 500],
      ]);
      expect(await counters(p)).toMatchObject({ media: 4, intercepted: 4, served: 4, fallbacks: {} });
    } finally {
      await p.close();
    }
  });

  test('segments of a DASH MPD loaded with fetch are intercepted', async () => {
    const p = await openPage();
    try {
      const mpd = await doFetch({ url: `${server.url}/dash/stream.mpd`, read: 'text' }, p);
      expect(mpd).toMatchObject({ status: 200, headers: { 'x-from': 'network' } });
      expect(await counters(p)).toMatchObject({ manifests: 1, segmentsKnown: 3 });
      const seg = await doFetch({ url: `${server.url}/dseg/v-2.m4s` }, p);
      expect(seg).toMatchObject({ status: 200, body: { length: 700, matches: true } });
      expect(seg.headers['x-from']).toBeUndefined();
    } finally {
      await p.close();
    }
  });
});

describe('dedicated workers', () => {
  test('are counted as not covered, and still behave as native workers', async () => {
    const p = await openPage();
    try {
      const before = (await counters(p)).workers;
      const r = await p.evaluate(async () => {
        const source = 'onmessage = (e) => postMessage(e.data * 2);';
        const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
        const w = new Worker(url);
        const answer = await new Promise((resolve) => {
          w.onmessage = (e) => resolve(e.data);
          w.postMessage(21);
        });
        w.terminate();
        let called = true;
        try {
          (Worker as unknown as () => void)();
        } catch (e) {
          called = !(e instanceof TypeError);
        }
        return {
          answer,
          isWorker: w instanceof Worker,
          name: Worker.name,
          proto: Object.getPrototypeOf(w) === Worker.prototype,
          called,
        };
      });
      expect(r).toEqual({ answer: 42, isWorker: true, name: 'Worker', proto: true, called: false });
      expect((await counters(p)).workers).toBe(before + 1);
    } finally {
      await p.close();
    }
  });
});
