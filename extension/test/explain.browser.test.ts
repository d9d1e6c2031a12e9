/**
 * What the popup explains, measured by the real hook in headless Chromium (the emulation harness:
 * the hook on a local page, a downloader answering from local objects): the plain network's rate
 * from the page's own large network files (the baseline of "time saved"), the media appended to
 * SourceBuffers, and the worker notice, which a worker that only transmuxes what the main thread
 * fetched (as hls.js's does) must not raise, and a worker that fetches media itself must.
 */
import type { Page } from 'puppeteer-core';
import { launchChromium, LaunchedBrowser } from '@mutp/testing/browsers';
import { waitFor } from '@mutp/testing/wait';
import { buildHarness } from './helpers/harness';
import { startTestServer, TestServer } from './helpers/server';
import type { Counters } from '../src/common/counters';
import { workerNotice } from '../src/common/explain';

jest.setTimeout(60_000);

let browser: LaunchedBrowser;
let server: TestServer;

const BIG = 400_000;
const WORKER_MEDIA = 1_500_000;

beforeAll(async () => {
  server = await startTestServer({
    '/page.html': {
      body: '<!doctype html><html><head><script src="/harness.js"></script></head><body><video></video></body></html>',
      type: 'text/html',
    },
    '/harness.js': { body: await buildHarness(), type: 'text/javascript' },
    '/big.bin': { body: new Uint8Array(BIG).fill(7), type: 'application/octet-stream' },
    '/worker-media.bin': { body: new Uint8Array(WORKER_MEDIA).fill(9), type: 'application/octet-stream' },
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

async function openPage(): Promise<Page> {
  const p = await browser.browser.newPage();
  await p.goto(`${server.url}/page.html`, { waitUntil: 'load', timeout: 15_000 });
  await p.waitForFunction('window.__t && window.__harness', { timeout: 5000 });
  return p;
}

const counters = (p: Page) => p.evaluate(() => (window as any).__harness.counters()) as Promise<Counters>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * In the page: a worker that echoes what it is sent (a stand-in transmuxer) or fetches `fetchUrl`
 * itself; the bytes it answers are appended to a SourceBuffer. Resolves with the appended length.
 */
function playThroughWorker(p: Page, o: { mainUrls?: string[]; fetchUrl?: string }): Promise<number> {
  return p.evaluate(async ({ mainUrls, fetchUrl }) => {
    const source = `onmessage = async (e) => {
      const bytes = e.data.fetchUrl ? await (await fetch(e.data.fetchUrl)).arrayBuffer() : e.data.bytes;
      postMessage(bytes, [bytes]);
    };`;
    const worker = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
    let bytes: ArrayBuffer | undefined;
    if (mainUrls) {
      const parts: ArrayBuffer[] = [];
      for (const url of mainUrls) {
        parts.push(
          await new Promise<ArrayBuffer>((resolve) => {
            const x = new XMLHttpRequest();
            x.open('GET', url);
            x.responseType = 'arraybuffer';
            x.onload = () => resolve(x.response as ArrayBuffer);
            x.send();
          }),
        );
      }
      bytes = await new Blob(parts).arrayBuffer();
    }
    const out = await new Promise<ArrayBuffer>((resolve) => {
      worker.onmessage = (e) => resolve(e.data as ArrayBuffer);
      worker.postMessage(bytes ? { bytes } : { fetchUrl }, bytes ? [bytes] : []);
    });
    worker.terminate();
    const media = new MediaSource();
    const video = document.querySelector('video')!;
    video.src = URL.createObjectURL(media);
    await new Promise((resolve) => media.addEventListener('sourceopen', resolve, { once: true }));
    const buffer = media.addSourceBuffer('video/mp4; codecs="avc1.42E01E"');
    buffer.appendBuffer(out); // not real MP4: the error comes later, the append is counted now
    return out.byteLength;
  }, o);
}

test('a large file the page fetched from the network is the baseline of the time saved', async () => {
  const p = await openPage();
  try {
    // The harness script itself (over 256 KiB) is the page's first sample.
    const before = await waitFor('the Resource Timing entry of /harness.js', async () => {
      const got = await counters(p);
      return got.networkFiles > 0 ? got : undefined;
    });
    await p.evaluate((u) => fetch(u).then((r) => r.arrayBuffer()), `${server.url}/big.bin`);
    const c = await waitFor('the Resource Timing entry of /big.bin', async () => {
      const got = await counters(p);
      return got.networkFiles > before.networkFiles ? got : undefined;
    });
    expect(c.networkFiles - before.networkFiles).toBe(1);
    expect(c.networkBytes - before.networkBytes).toBe(BIG);
    expect(c.fetchedBytes - before.fetchedBytes).toBe(BIG);
    expect(c.networkMs).toBeGreaterThan(before.networkMs);
  } finally {
    await p.close();
  }
});

test('a worker that transmuxes what MUTP served raises no worker notice', async () => {
  const p = await openPage();
  try {
    // /obj/ URLs are media in the harness, served by its downloader (not the network): 2 MB in
    // two segments, more than the notice's 1 MiB threshold.
    const appended = await playThroughWorker(p, {
      mainUrls: [`${server.url}/obj/1000000`, `${server.url}/obj/999999`],
    });
    let last: Counters | undefined;
    const c = await waitFor(
      'the served segment and its append',
      async () => {
        last = await counters(p);
        return last.appendedBytes > 0 && last.served === 2 ? last : undefined;
      },
      10_000,
      100,
      () => `counters: ${JSON.stringify(last)}`,
    );
    expect(c).toMatchObject({ workers: 1, served: 2, servedBytes: 1_999_999, appendedBytes: appended });
    expect(appended).toBe(1_999_999);
    expect(c.servedMs).toBeGreaterThan(0);
    expect(workerNotice(c)).toBeUndefined();
  } finally {
    await p.close();
  }
});

test('a worker that fetches media itself raises the notice, with the bytes no page request fetched', async () => {
  const p = await openPage();
  try {
    const appended = await playThroughWorker(p, { fetchUrl: `${server.url}/worker-media.bin` });
    const c = await waitFor('the append', async () => {
      const got = await counters(p);
      return got.appendedBytes > 0 ? got : undefined;
    });
    expect(c).toMatchObject({ workers: 1, media: 0, appendedBytes: appended });
    expect(workerNotice(c)).toEqual({ kind: 'unexplained-media', workers: 1, bytes: WORKER_MEDIA - c.fetchedBytes });
  } finally {
    await p.close();
  }
});
