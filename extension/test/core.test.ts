import { HookCore, MIN_DEADLINE_MS, Outcome, Ruling } from '../src/hook/core';
import { MAX_WAITING_REQUESTS, SETTINGS_WAIT_MS } from '../src/hook/settings-wait';
import { RequestFacts } from '../src/hook/decide';
import { CONNECT_TIMEOUT_MS, PortTransport, RETRY_AFTER_MS } from '../src/hook/transport';
import { GetFailure, GetRequest, GetSuccess, HookConfig } from '../src/common/messages';
import { FakeTransport, ManualTimers } from './helpers/hook-fakes';

const config: HookConfig = {
  enabled: true,
  mode: 'fountain',
  proxies: 3,
  deadlineMs: 10_000,
  urlPatterns: ['*/obj/*'],
  exposeCounters: false,
};

const facts = (url: string, headers: [string, string][] = []): RequestFacts => ({
  api: 'fetch',
  method: 'GET',
  url,
  headers,
  baseUrl: 'https://page.example/',
  pageOrigin: 'https://page.example',
});

function setup() {
  const timers = new ManualTimers();
  const transport = new FakeTransport();
  const core = new HookCore(transport, timers);
  core.setConfig(config);
  let changes = 0;
  core.onCountersChanged = () => changes++;
  const intercept = (url: string, headers: [string, string][] = []) => {
    const d = core.decide(facts(url, headers));
    if (!d.intercept) throw new Error(`not intercepted: ${JSON.stringify(d)}`);
    return d;
  };
  return { timers, transport, core, intercept, changes: () => changes };
}

const success = (id: number, bytes: number, more: Partial<GetSuccess> = {}): GetSuccess => ({
  type: 'result',
  id,
  ok: true,
  body: new ArrayBuffer(bytes),
  status: 200,
  contentType: 'video/mp4',
  ...more,
});

test('served: the request carries mode, N and range; counters follow', async () => {
  const t = setup();
  const pending = t.core.serve(t.intercept('https://cdn.example/obj/1', [['Range', 'bytes=5-9']]));
  expect(t.transport.requests[0].req).toEqual({
    type: 'get',
    id: 1,
    url: 'https://cdn.example/obj/1',
    mode: 'fountain',
    proxies: 3,
    range: { kind: 'from', start: 5, end: 9 },
  });
  t.transport.requests[0].answer(success(1, 5, { status: 206, contentRange: 'bytes 5-9/100' }));
  expect((await pending.promise).kind).toBe('served');
  expect(t.core.counters).toMatchObject({
    requests: 1,
    media: 1,
    intercepted: 1,
    served: 1,
    servedBytes: 5,
    fallbacks: {},
  });
  expect(t.changes()).toBeGreaterThan(0);
});

test('a failure answer falls back with its reason', async () => {
  const t = setup();
  const pending = t.core.serve(t.intercept('https://cdn.example/obj/2'));
  t.transport.requests[0].answer({ type: 'result', id: 1, ok: false, reason: 'no-proxies', message: 'x' });
  expect(await pending.promise).toEqual({ kind: 'fallback', reason: 'no-proxies' });
  expect(t.core.counters.fallbacks).toEqual({ 'no-proxies': 1 });
});

test('malformed answers are not handed to the page', async () => {
  const t = setup();
  const a = t.core.serve(t.intercept('https://cdn.example/obj/3'));
  t.transport.requests[0].answer(success(1, 10, { status: 206, contentRange: 'bytes 0-99/100' })); // wrong length
  expect(await a.promise).toEqual({ kind: 'fallback', reason: 'bad-answer' });
  const b = t.core.serve(t.intercept('https://cdn.example/obj/4'));
  t.transport.requests[1].answer(success(2, 10, { status: 404 as 200 }));
  expect(await b.promise).toEqual({ kind: 'fallback', reason: 'bad-answer' });
});

test('the deadline: no answer in time → fallback "timeout", the downloader is told to stop; a late answer changes nothing', async () => {
  const t = setup();
  const pending = t.core.serve(t.intercept('https://cdn.example/obj/5'));
  let outcome: Outcome | undefined;
  void pending.promise.then((o) => (outcome = o));
  t.timers.advance(config.deadlineMs - 1);
  await Promise.resolve();
  expect(outcome).toBeUndefined();
  t.timers.advance(1);
  await Promise.resolve();
  expect(outcome).toEqual({ kind: 'fallback', reason: 'timeout' });
  expect(t.transport.cancelled).toEqual([1]);
  t.transport.requests[0].answer(success(1, 1));
  expect(t.core.counters).toMatchObject({ served: 0, fallbacks: { timeout: 1 } });
});

test('deadline: 2× the segment duration when the manifest gives one, within [MIN_DEADLINE_MS, configured]', () => {
  const t = setup();
  const d = t.intercept('https://cdn.example/obj/6');
  expect(t.core.deadlineFor(d)).toBe(10_000);
  expect(t.core.deadlineFor({ ...d, segment: { kind: 'media', duration: 4, manifest: '', ranged: false } })).toBe(8000);
  expect(t.core.deadlineFor({ ...d, segment: { kind: 'media', duration: 1, manifest: '', ranged: false } })).toBe(
    MIN_DEADLINE_MS,
  );
  expect(t.core.deadlineFor({ ...d, segment: { kind: 'media', duration: 10, manifest: '', ranged: false } })).toBe(
    10_000,
  );
});

test('the page gives up: cancelled, counted as aborted, the downloader told', async () => {
  const t = setup();
  const pending = t.core.serve(t.intercept('https://cdn.example/obj/7'));
  pending.cancel();
  expect(await pending.promise).toEqual({ kind: 'cancelled' });
  expect(t.transport.cancelled).toEqual([1]);
  expect(t.core.counters).toMatchObject({ aborted: 1, fallbacks: {} });
});

test('a transport that throws means fallback "internal", never an exception', async () => {
  const timers = new ManualTimers();
  const core = new HookCore(
    {
      request: () => {
        throw new Error('port closed');
      },
      cancel: () => undefined,
    },
    timers,
  );
  core.setConfig(config);
  const d = core.decide(facts('https://cdn.example/obj/8'));
  if (!d.intercept) throw new Error('expected interception');
  expect(await core.serve(d).promise).toEqual({ kind: 'fallback', reason: 'internal' });
});

test('manifests observed remember their segments; garbage is ignored', () => {
  const t = setup();
  t.core.observeManifest('https://cdn.example/v/index.m3u8', '#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg.ts\n');
  t.core.observeManifest('https://cdn.example/v/x.m3u8', 'not a manifest');
  expect(t.core.counters).toMatchObject({ manifests: 1, segmentsKnown: 1 });
  expect(t.core.decide(facts('https://cdn.example/v/seg.ts'))).toMatchObject({ intercept: true, match: 'manifest' });
});

test('a media segment of a known playlist carries the next ones and its track (for staging); others none', () => {
  const t = setup();
  const playlist = 'https://cdn.example/v/index.m3u8';
  const body = '#EXTM3U\n#EXT-X-TARGETDURATION:2\n' + [0, 1, 2, 3, 4, 5].map((i) => `#EXTINF:2,\ns${i}.ts\n`).join('');
  t.core.observeManifest(playlist, body);
  t.core.serve(t.intercept('https://cdn.example/v/s0.ts'));
  expect(t.transport.requests[0].req).toMatchObject({
    track: playlist,
    upcoming: [1, 2, 3, 4].map((i) => ({ url: `https://cdn.example/v/s${i}.ts` })),
  });
  t.core.serve(t.intercept('https://cdn.example/obj/unlisted')); // a URL pattern, no playlist
  expect(t.transport.requests[1].req.upcoming).toBeUndefined();
  expect(t.transport.requests[1].req.track).toBeUndefined();
});

describe('PortTransport', () => {
  function transport() {
    const timers = new ManualTimers();
    let asked = 0;
    const t = new PortTransport(
      () => asked++,
      timers,
      () => timers.now,
      () => ({ session: 's', pageUrl: 'https://page.example/' }),
    );
    return { t, timers, asked: () => asked };
  }
  const get = (id: number): GetRequest => ({ type: 'get', id, url: 'https://x/obj/1', mode: 'rlnc', proxies: 2 });

  test('asks for the downloader once, queues until it is ready, then sends', () => {
    const { t, asked } = transport();
    const answers: (GetSuccess | GetFailure)[] = [];
    t.request(get(1), (a) => answers.push(a));
    t.request(get(2), (a) => answers.push(a));
    expect(asked()).toBe(1);
    const channel = new MessageChannel();
    const sent: unknown[] = [];
    channel.port2.onmessage = (e) => sent.push(e.data);
    t.attach(channel.port1);
    return new Promise<void>((resolve) => {
      setTimeout(() => {
        expect(sent).toEqual([{ type: 'hello', session: 's', pageUrl: 'https://page.example/' }]);
        channel.port2.postMessage({ type: 'ready' });
        setTimeout(() => {
          expect(sent.slice(1)).toEqual([get(1), get(2)]);
          channel.port2.postMessage({ type: 'result', id: 2, ok: false, reason: 'no-proxies', message: '' });
          setTimeout(() => {
            expect(answers).toEqual([{ type: 'result', id: 2, ok: false, reason: 'no-proxies', message: '' }]);
            channel.port1.close();
            channel.port2.close();
            resolve();
          }, 20);
        }, 20);
      }, 20);
    });
  });

  test('no downloader in time: queued and new requests fail at once for a while, then it tries again', () => {
    const { t, timers, asked } = transport();
    const answers: string[] = [];
    t.request(get(1), (a) => answers.push(a.ok ? 'ok' : a.reason));
    timers.advance(CONNECT_TIMEOUT_MS);
    expect(answers).toEqual(['downloader-unavailable']);
    t.request(get(2), (a) => answers.push(a.ok ? 'ok' : a.reason));
    expect(answers).toEqual(['downloader-unavailable', 'downloader-unavailable']);
    expect(asked()).toBe(1);
    timers.advance(RETRY_AFTER_MS);
    t.request(get(3), () => undefined);
    expect(asked()).toBe(2);
  });

  test('the content script refusing (extension switched off) fails the queue with its reason', () => {
    const { t } = transport();
    const answers: string[] = [];
    t.request(get(1), (a) => answers.push(a.ok ? 'ok' : a.reason));
    t.fail('disabled');
    expect(answers).toEqual(['disabled']);
  });
});

describe('a media request made before the settings come waits for them (issue 35)', () => {
  const segments = Array.from({ length: MAX_WAITING_REQUESTS + 2 }, (_, i) => `https://cdn.example/v/s${i}.ts`);
  function unconfigured() {
    const timers = new ManualTimers();
    const transport = new FakeTransport();
    const core = new HookCore(transport, timers);
    // Manifests are read before the settings too: their segments are media from the start.
    const body = '#EXTM3U\n#EXT-X-TARGETDURATION:2\n' + segments.map((url) => `#EXTINF:2,\n${url}\n`).join('');
    core.observeManifest('https://cdn.example/v/index.m3u8', body);
    return { timers, transport, core };
  }
  const later = (ruling: Ruling) => {
    if (!('later' in ruling)) throw new Error(`decided at once: ${JSON.stringify(ruling.now)}`);
    return ruling.later;
  };
  const now = (ruling: Ruling) => {
    if (!('now' in ruling)) throw new Error('waits for the settings');
    return ruling.now;
  };

  test('it is decided, and counted, when they come: served like any other', async () => {
    const t = unconfigured();
    const waiting = later(t.core.decideOrWait(facts(segments[1], [['Range', 'bytes=0-9']])));
    expect(t.core.counters).toMatchObject({ requests: 0, media: 0, fallbacks: {} });
    t.core.setConfig(config);
    const d = await waiting.promise;
    expect(d).toMatchObject({ intercept: true, url: segments[1], range: { start: 0, end: 9 } });
    expect(t.core.counters).toMatchObject({ requests: 1, media: 1, fallbacks: {} });
    // Once the settings are known nothing waits.
    expect(now(t.core.decideOrWait(facts(segments[2])))).toMatchObject({ intercept: true });
  });

  test('decided by the settings that came: switched off, or not media by their patterns', async () => {
    const t = unconfigured();
    const segment = later(t.core.decideOrWait(facts(segments[1])));
    // Before the settings, the default URL pattern says what may be media.
    const youtube = later(t.core.decideOrWait(facts('https://yt.example/videoplayback?id=1&range=0-99')));
    t.core.setConfig({ ...config, enabled: false, disabledReason: 'site-disabled' });
    expect(await segment.promise).toMatchObject({ intercept: false, media: true, reason: 'site-disabled' });
    expect(await youtube.promise).toMatchObject({ intercept: false, media: false, reason: 'not-media' });
    expect(t.core.counters).toMatchObject({ requests: 2, media: 1, fallbacks: { 'site-disabled': 1 } });
  });

  test('no settings within the window: everything waiting passes as not-ready, and nothing waits again', async () => {
    const t = unconfigured();
    const first = later(t.core.decideOrWait(facts('https://cdn.example/v/a.ts', [['Range', 'bytes=0-']])));
    t.timers.advance(SETTINGS_WAIT_MS / 2);
    // A later request waits only for the rest of the same window.
    const second = later(t.core.decideOrWait(facts('https://cdn.example/v/b.ts', [['Range', 'bytes=0-']])));
    t.timers.advance(SETTINGS_WAIT_MS / 2 - 1);
    let decided = 0;
    void first.promise.then(() => decided++);
    await Promise.resolve();
    expect(decided).toBe(0);
    t.timers.advance(1);
    expect(await first.promise).toMatchObject({ intercept: false, media: true, reason: 'not-ready' });
    expect(await second.promise).toMatchObject({ reason: 'not-ready' });
    expect(now(t.core.decideOrWait(facts('https://cdn.example/v/c.ts', [['Range', 'bytes=0-']])))).toMatchObject({
      reason: 'not-ready',
    });
    expect(t.core.counters).toMatchObject({ requests: 3, media: 3, fallbacks: { 'not-ready': 3 } });
  });

  test(`at most ${MAX_WAITING_REQUESTS} wait at once; more pass as not-ready at once`, async () => {
    const t = unconfigured();
    const waiting = Array.from({ length: MAX_WAITING_REQUESTS }, (_, i) =>
      later(t.core.decideOrWait(facts(segments[i]))),
    );
    expect(now(t.core.decideOrWait(facts(segments[MAX_WAITING_REQUESTS])))).toMatchObject({ reason: 'not-ready' });
    // One that gives up makes room.
    waiting[0].cancel();
    later(t.core.decideOrWait(facts(segments[MAX_WAITING_REQUESTS + 1])));
    t.core.setConfig(config);
    const decisions = await Promise.all(waiting.slice(1).map((w) => w.promise));
    expect(decisions.every((d) => d.intercept)).toBe(true);
    expect(t.core.counters).toMatchObject({
      media: MAX_WAITING_REQUESTS + 2,
      aborted: 1,
      fallbacks: { 'not-ready': 1 },
    });
  });

  test('the page gives up while it waits: counted as aborted once, never decided', async () => {
    const t = unconfigured();
    const waiting = later(t.core.decideOrWait(facts(segments[1])));
    let decided = false;
    void waiting.promise.then(() => (decided = true));
    waiting.cancel();
    waiting.cancel();
    t.core.setConfig(config);
    await Promise.resolve();
    await Promise.resolve();
    expect(decided).toBe(false);
    expect(t.core.counters).toMatchObject({ requests: 1, media: 1, aborted: 1, intercepted: 0, fallbacks: {} });
  });

  test('what does not wait: not media, and media the settings could not make servable', () => {
    const t = unconfigured();
    const cases: [RequestFacts, string][] = [
      [facts('https://cdn.example/v/index.m3u8'), 'not-media'],
      [facts('https://cdn.example/w/a.ts'), 'not-media'], // a media extension without Range, in no manifest
      [facts('data:video/mp4,x'), 'scheme'],
      [{ ...facts(segments[1]), method: 'POST' }, 'method'],
      [{ ...facts(segments[1]), sync: true }, 'sync'],
      [facts(segments[1], [['X-Token', 'a']]), 'headers'],
      [facts(segments[1], [['Range', 'bytes=0-1,5-6']]), 'multi-range'],
    ];
    for (const [f, reason] of cases) {
      expect(now(t.core.decideOrWait(f))).toMatchObject({ intercept: false, reason });
    }
    expect(t.core.counters).toMatchObject({ requests: cases.length, media: 4 });
  });
});
