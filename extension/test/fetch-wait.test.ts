/**
 * The fetch wrapper (createFetch) for a media request made before the hook has its settings
 * (issue 35), driven in Node: Node's own Request/Response/Headers/ReadableStream stand in for the
 * page's, a recording function for the native fetch, the real HookCore over a fake downloader
 * transport, timers advanced by hand. The browser suites run the same wrapper installed in a page.
 */
import { HookCore } from '../src/hook/core';
import { createFetch } from '../src/hook/fetch';
import { PageGlobals } from '../src/hook/globals';
import { SETTINGS_WAIT_MS } from '../src/hook/settings-wait';
import { GetSuccess, HookConfig } from '../src/common/messages';
import { FakeTransport, ManualTimers } from './helpers/hook-fakes';

const config: HookConfig = {
  enabled: true,
  mode: 'rlnc',
  proxies: 4,
  deadlineMs: 10_000,
  urlPatterns: [],
  exposeCounters: false,
};
const PLAYLIST = 'https://cdn.example/v/index.m3u8';
const CHUNK = 'https://cdn.example/v/chunk-1.ts';

/** A page whose settings have not come yet, with a manifest already read. */
function setup() {
  const timers = new ManualTimers();
  const transport = new FakeTransport();
  const core = new HookCore(transport, timers);
  core.observeManifest(PLAYLIST, '#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nchunk-1.ts\n');
  /** What reached the native fetch, with the page's arguments. */
  const network: unknown[][] = [];
  const nativeFetch = (...args: unknown[]) => {
    network.push(args);
    return Promise.resolve(new Response('from the network', { status: 200 }));
  };
  const g = {
    window: globalThis,
    fetch: nativeFetch,
    Request,
    Response,
    Headers,
    ReadableStream,
    DOMException,
    URL,
    setTimeout: (callback: () => void, ms: number) => timers.setTimeout(callback, ms),
    clearTimeout: (handle: unknown) => timers.clearTimeout(handle),
    now: () => timers.now,
    baseUrl: () => 'https://page.example/player/',
    origin: () => 'https://page.example',
  } as unknown as PageGlobals;
  return { timers, transport, core, network, fetch: createFetch(core, g) };
}

const answer = (id: number, text: string): GetSuccess => ({
  type: 'result',
  id,
  ok: true,
  body: new TextEncoder().encode(text).buffer as ArrayBuffer,
  status: 200,
  contentType: 'video/mp2t',
});

/** Lets the hook's promise callbacks run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Whether the promise settled yet (without waiting for it). */
function watch<T>(promise: Promise<T>): () => boolean {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return () => settled;
}

test('a segment fetched before the settings waits, and is served once they come', async () => {
  const t = setup();
  const response = t.fetch(CHUNK);
  const settled = watch(response);
  await settle();
  expect(settled()).toBe(false);
  expect([t.network, t.transport.requests]).toEqual([[], []]);
  t.core.setConfig(config);
  await settle();
  expect(t.transport.requests.map((r) => r.req)).toEqual([expect.objectContaining({ url: CHUNK, duration: 4 })]);
  t.transport.requests[0].answer(answer(1, 'segment bytes'));
  const r = await response;
  expect([r.status, r.url, await r.text()]).toEqual([200, CHUNK, 'segment bytes']);
  expect(t.network).toEqual([]);
  expect(t.core.counters).toMatchObject({ media: 1, intercepted: 1, served: 1, fallbacks: {} });
});

test('no settings within the window: the native fetch gets the page arguments (not-ready)', async () => {
  const t = setup();
  const init = { headers: { Range: 'bytes=0-99' } };
  const response = t.fetch(CHUNK, init);
  t.timers.advance(SETTINGS_WAIT_MS - 1);
  await settle();
  expect(t.network).toEqual([]);
  t.timers.advance(1);
  expect(await (await response).text()).toBe('from the network');
  expect(t.network).toEqual([[CHUNK, init]]);
  expect(t.core.counters).toMatchObject({ media: 1, intercepted: 0, fallbacks: { 'not-ready': 1 } });
});

test("the page's AbortSignal while it waits: rejected with the signal's reason, counted as aborted, never sent", async () => {
  const t = setup();
  const controller = new AbortController();
  const response = t.fetch(CHUNK, { signal: controller.signal });
  controller.abort();
  await expect(response).rejects.toMatchObject({ name: 'AbortError' });
  t.core.setConfig(config);
  await settle();
  expect([t.network, t.transport.requests]).toEqual([[], []]);
  expect(t.core.counters).toMatchObject({ media: 1, aborted: 1, intercepted: 0, fallbacks: {} });
  // Aborted before the call: the same, at once.
  const t2 = setup();
  await expect(t2.fetch(CHUNK, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
  expect(t2.core.counters).toMatchObject({ media: 1, aborted: 1 });
});

test('requests that are not media, or that the settings could not make servable, go to the network at once', () => {
  const t = setup();
  void t.fetch('https://page.example/api/user');
  void t.fetch(PLAYLIST);
  void t.fetch(CHUNK, { method: 'POST', body: 'x' });
  void t.fetch(CHUNK, { headers: { 'X-Token': 'a' } });
  // Synchronously: nothing waited for a timer or a promise.
  expect(t.network.map((args) => args[0])).toEqual(['https://page.example/api/user', PLAYLIST, CHUNK, CHUNK]);
  expect(t.core.counters).toMatchObject({ requests: 4, media: 2, fallbacks: { method: 1, headers: 1 } });
});
