/**
 * The XHR emulation (XhrRequest) driven directly: a plain native object that records what reaches
 * it, the real HookCore over a fake downloader transport, and timers advanced by hand. The browser
 * suites (emulation, players) run the same class inside the installed wrapper.
 */
import { HookCore } from '../src/hook/core';
import { GetFailure, GetSuccess, HookConfig } from '../src/common/messages';
import { NativeXhr, XhrGlobals, XhrRequest } from '../src/hook/xhr-request';
import { SETTINGS_WAIT_MS } from '../src/hook/settings-wait';
import { FakeTransport, ManualTimers } from './helpers/hook-fakes';

/** The page's native object: records what the hook forwards to it, answers like an unsent XHR. */
class FakeNativeXhr implements NativeXhr {
  readonly opened: unknown[][] = [];
  readonly sent: unknown[] = [];
  readonly requestHeaders: [string, string][] = [];
  aborted = 0;
  mimeOverride?: string;
  readyState = 0;
  status = 0;
  statusText = '';
  responseURL = '';
  response: unknown = '';
  responseText = '';
  responseXML: unknown = null;
  withCredentials = false;
  responseType = '';
  timeout = 0;
  responseHeaders: Record<string, string> = {};
  /** Runs inside send(), as the native loadstart would. */
  duringSend?: () => void;

  open(args: unknown[]): void {
    this.opened.push(args);
    this.readyState = 1;
  }
  send(body: unknown): void {
    this.sent.push(body);
    this.duringSend?.();
  }
  abort(): void {
    this.aborted++;
  }
  setRequestHeader(name: string, value: string): void {
    this.requestHeaders.push([name, value]);
  }
  getResponseHeader(name: string): string | null {
    return this.responseHeaders[name.toLowerCase()] ?? null;
  }
  getAllResponseHeaders(): string {
    return '';
  }
  overrideMimeType(mime: string): void {
    this.mimeOverride = mime;
  }
}

const config: HookConfig = {
  enabled: true,
  mode: 'rlnc',
  proxies: 4,
  deadlineMs: 10_000,
  urlPatterns: ['*/seg/*'],
  exposeCounters: false,
};

const SEGMENT = 'https://cdn.example/seg/1.m4s';

/** One XHR object with everything around it; `log` has each event as `type@readyState`. */
function setup({ configured = true } = {}) {
  const timers = new ManualTimers();
  const transport = new FakeTransport();
  const core = new HookCore(transport, timers);
  if (configured) core.setConfig(config);
  const native = new FakeNativeXhr();
  const globals: XhrGlobals = {
    setTimeout: (callback, ms) => timers.setTimeout(callback, ms),
    clearTimeout: (handle) => timers.clearTimeout(handle),
    now: () => timers.now,
    baseUrl: () => 'https://page.example/player/',
    origin: () => 'https://page.example',
    TextDecoder,
    Blob,
    DOMException,
  };
  const log: string[] = [];
  /** Called after each event is logged, as a page handler would run. */
  let handler: ((type: string) => void) | undefined;
  const xhr: XhrRequest = new XhrRequest(
    native,
    {
      fire: (type) => {
        log.push(`${type}@${xhr.readyState}`);
        handler?.(type);
      },
      fireProgress: (type, loaded, total, computable) => {
        log.push(`${type}(${loaded}/${total}${computable ? '' : '?'})@${xhr.readyState}`);
        handler?.(type);
      },
    },
    core,
    globals,
  );
  return {
    timers,
    transport,
    core,
    native,
    xhr,
    log,
    onEvent: (h: (type: string) => void) => (handler = h),
  };
}

const answer = (id: number, bytes: Uint8Array, more: Partial<GetSuccess> = {}): GetSuccess => ({
  type: 'result',
  id,
  ok: true,
  body: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
  status: 200,
  contentType: 'video/mp4',
  ...more,
});
const failure = (id: number, reason: string): GetFailure => ({
  type: 'result',
  id,
  ok: false,
  reason,
  message: reason,
});

/** Lets the promise callbacks of the hook run (the transport answered synchronously). */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

const SUCCESS_EVENTS = (n: number) => [
  'loadstart(0/0?)@1',
  'readystatechange@2',
  'readystatechange@3',
  `progress(${n}/${n})@3`,
  'readystatechange@4',
  `load(${n}/${n})@4`,
  `loadend(${n}/${n})@4`,
];

describe('a served download: events in the standard order, the body as responseType asks', () => {
  const text = '{"segment": 1, "name": "é"}';
  const bytes = new TextEncoder().encode(text);

  test.each([
    ['', (v: unknown) => expect(v).toBe(text)],
    ['text', (v: unknown) => expect(v).toBe(text)],
    ['arraybuffer', (v: unknown) => expect(new Uint8Array(v as ArrayBuffer)).toEqual(bytes)],
    ['json', (v: unknown) => expect(v).toEqual({ segment: 1, name: 'é' })],
  ])('responseType %p', async (responseType, check) => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.responseType = responseType;
    t.xhr.send();
    expect(t.log).toEqual(['loadstart(0/0?)@1']);
    expect(t.transport.requests.map((r) => r.req.url)).toEqual([SEGMENT]);
    t.transport.requests[0].answer(answer(1, bytes, { contentType: 'application/json; charset=utf-8' }));
    await settle();
    expect(t.log).toEqual(SUCCESS_EVENTS(bytes.byteLength));
    expect([t.xhr.readyState, t.xhr.status, t.xhr.statusText, t.xhr.responseURL]).toEqual([4, 200, 'OK', SEGMENT]);
    expect(t.xhr.getAllResponseHeaders()).toBe(
      `content-length: ${bytes.byteLength}\r\ncontent-type: application/json; charset=utf-8\r\n`,
    );
    check(t.xhr.response);
    expect(t.native.sent).toEqual([]); // nothing went to the network
    expect(t.core.counters).toMatchObject({ intercepted: 1, served: 1, servedBytes: bytes.byteLength, fallbacks: {} });
  });

  test("responseType 'blob': a Blob of the (overridden) type", async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.responseType = 'blob';
    t.xhr.overrideMimeType('video/iso.segment');
    t.xhr.send();
    t.transport.requests[0].answer(answer(1, bytes));
    await settle();
    expect(t.log).toEqual(SUCCESS_EVENTS(bytes.byteLength));
    const blob = t.xhr.response as Blob;
    expect(blob.type).toBe('video/iso.segment');
    expect(new Uint8Array(await blob.arrayBuffer())).toEqual(bytes);
    expect(t.xhr.response).toBe(blob); // the same object on every read
    expect(() => t.xhr.responseText).toThrow(expect.objectContaining({ name: 'InvalidStateError' }));
  });

  test('the body is readable as text from LOADING on, not at HEADERS_RECEIVED; non-text types only at DONE', async () => {
    for (const responseType of ['', 'arraybuffer']) {
      const t = setup();
      const seen: string[] = [];
      t.onEvent((type) => {
        if (type === 'readystatechange') seen.push(`${t.xhr.readyState}:${String(t.xhr.response)}`);
      });
      t.xhr.open('GET', SEGMENT);
      t.xhr.responseType = responseType;
      t.xhr.send();
      t.transport.requests[0].answer(answer(1, new TextEncoder().encode('abc')));
      await settle();
      expect(seen).toEqual(
        responseType === '' ? ['2:', '3:abc', '4:abc'] : ['2:null', '3:null', '4:[object ArrayBuffer]'],
      );
    }
  });

  test('a range request: 206 with Content-Range; response headers by any case', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.setRequestHeader('Range', 'bytes=10-13');
    t.xhr.responseType = 'arraybuffer';
    t.xhr.send();
    expect(t.transport.requests[0].req.range).toEqual({ kind: 'from', start: 10, end: 13 });
    expect(t.native.requestHeaders).toEqual([['Range', 'bytes=10-13']]); // the native object has it for a fallback
    t.transport.requests[0].answer(answer(1, new Uint8Array(4), { status: 206, contentRange: 'bytes 10-13/100' }));
    await settle();
    expect([t.xhr.status, t.xhr.statusText]).toEqual([206, 'Partial Content']);
    expect(t.xhr.getResponseHeader('Content-Range')).toBe('bytes 10-13/100');
    expect(t.xhr.getResponseHeader('x-other')).toBeNull();
  });

  test('state changes the standard forbids while a request is emulated throw InvalidStateError', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    const invalid = expect.objectContaining({ name: 'InvalidStateError' });
    expect(() => t.xhr.send()).toThrow(invalid);
    expect(() => t.xhr.setRequestHeader('Accept', '*/*')).toThrow(invalid);
    t.transport.requests[0].answer(answer(1, new Uint8Array(1)));
    await settle();
    expect(() => (t.xhr.responseType = 'blob')).toThrow(invalid);
    expect(() => t.xhr.overrideMimeType('text/plain')).toThrow(invalid);
  });
});

describe('abort', () => {
  test('before the answer: DONE, abort, loadend, then UNSENT; the download is cancelled and a late answer ignored', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    t.xhr.abort();
    expect(t.log).toEqual(['loadstart(0/0?)@1', 'readystatechange@4', 'abort(0/0?)@4', 'loadend(0/0?)@4']);
    expect([t.xhr.readyState, t.xhr.status, t.xhr.response]).toEqual([0, 0, '']);
    expect(t.transport.cancelled).toEqual([1]);
    expect(t.core.counters).toMatchObject({ aborted: 1, served: 0 });
    t.transport.requests[0].answer(answer(1, new Uint8Array(8)));
    await settle();
    expect(t.log).toHaveLength(4);
    expect(t.native.aborted).toBe(0); // the native object was never sent
  });

  test('after the answer: no events, UNSENT, the response is gone', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.responseType = 'arraybuffer';
    t.xhr.send();
    t.transport.requests[0].answer(answer(1, new Uint8Array(8)));
    await settle();
    t.log.length = 0;
    t.xhr.abort();
    expect(t.log).toEqual([]);
    expect([t.xhr.readyState, t.xhr.status, t.xhr.statusText, t.xhr.response]).toEqual([0, 0, '', null]);
    expect(t.xhr.responseURL).toBe(''); // a network error has no URL (it was kept before)
    expect(t.xhr.getAllResponseHeaders()).toBe('');
    expect(t.core.counters).toMatchObject({ served: 1, aborted: 0 });
  });

  test('from a page handler mid-delivery: the remaining events of the answer never fire', async () => {
    const t = setup();
    t.onEvent((type) => {
      if (type === 'readystatechange' && t.xhr.readyState === 2) t.xhr.abort();
    });
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    t.transport.requests[0].answer(answer(1, new Uint8Array(8)));
    await settle();
    expect(t.log).toEqual([
      'loadstart(0/0?)@1',
      'readystatechange@2',
      'readystatechange@4',
      'abort(0/0?)@4',
      'loadend(0/0?)@4',
    ]);
    expect(t.xhr.readyState).toBe(0);
  });

  test('open() during a download ends it without events and cancels it', () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    t.xhr.open('GET', 'https://cdn.example/seg/2.m4s');
    expect(t.log).toEqual(['loadstart(0/0?)@1']);
    expect(t.transport.cancelled).toEqual([1]);
    expect(t.xhr.readyState).toBe(1); // the native object's OPENED
  });
});

describe('timeout', () => {
  test("the page's timeout: DONE, timeout, loadend; the download is cancelled", async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.timeout = 3000;
    t.xhr.send();
    t.timers.advance(2999);
    expect(t.log).toEqual(['loadstart(0/0?)@1']);
    t.timers.advance(1);
    expect(t.log).toEqual(['loadstart(0/0?)@1', 'readystatechange@4', 'timeout(0/0?)@4', 'loadend(0/0?)@4']);
    expect([t.xhr.readyState, t.xhr.status]).toEqual([4, 0]);
    expect(t.transport.cancelled).toEqual([1]);
    expect(t.native.sent).toEqual([]);
  });

  test('set while the download runs: counts from send()', () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    t.timers.advance(2000);
    t.xhr.timeout = 2500;
    t.timers.advance(499);
    expect(t.log).toHaveLength(1);
    t.timers.advance(1);
    expect(t.log.slice(-2)).toEqual(['timeout(0/0?)@4', 'loadend(0/0?)@4']);
  });

  test('an answer in time disarms it', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.timeout = 3000;
    t.xhr.send();
    t.transport.requests[0].answer(answer(1, new Uint8Array(2)));
    await settle();
    t.timers.advance(10_000);
    expect(t.log).toEqual(SUCCESS_EVENTS(2));
  });
});

describe('fallback: MUTP could not answer, the native object sends the request the page made', () => {
  test('a failure answer: sent natively with the rest of the page timeout, the native loadstart dropped', async () => {
    const t = setup();
    let suppressedDuringSend: boolean | undefined;
    t.native.duringSend = () => (suppressedDuringSend = t.xhr.suppressesNativeLoadstart);
    t.xhr.open('GET', SEGMENT);
    t.xhr.setRequestHeader('Accept', 'video/mp4');
    t.xhr.timeout = 8000;
    t.xhr.send();
    t.timers.advance(3000);
    t.transport.requests[0].answer(failure(1, 'no-proxies'));
    await settle();
    expect(t.native.sent).toEqual([undefined]);
    expect(suppressedDuringSend).toBe(true);
    expect(t.xhr.suppressesNativeLoadstart).toBe(false);
    expect(t.native.timeout).toBe(5000);
    expect(t.xhr.timeout).toBe(8000); // the page still reads its own value
    expect(t.log).toEqual(['loadstart(0/0?)@1']); // the rest are the native object's events
    expect(t.core.counters.fallbacks).toEqual({ 'no-proxies': 1 });
    // Properties are the native object's from now on; our timer is gone.
    t.native.readyState = 4;
    t.native.status = 200;
    expect([t.xhr.readyState, t.xhr.status]).toEqual([4, 200]);
    t.timers.advance(10_000);
    expect(t.log).toHaveLength(1);
    // The next request starts with the page's timeout again.
    t.xhr.open('GET', SEGMENT);
    expect(t.native.timeout).toBe(8000);
  });

  test('the deadline passes without an answer: fallback "timeout"', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    t.timers.advance(config.deadlineMs);
    await settle();
    expect(t.native.sent).toEqual([undefined]);
    expect(t.transport.cancelled).toEqual([1]);
    expect(t.core.counters.fallbacks).toEqual({ timeout: 1 });
  });

  test('the native send throws on fallback: the request ends as a network error', async () => {
    const t = setup();
    t.xhr.open('GET', SEGMENT);
    t.xhr.send();
    t.native.send = () => {
      throw new Error('native send refused');
    };
    t.transport.requests[0].answer(failure(1, 'no-proxies'));
    await settle();
    expect(t.log).toEqual(['loadstart(0/0?)@1', 'readystatechange@4', 'error(0/0?)@4', 'loadend(0/0?)@4']);
    expect([t.xhr.readyState, t.xhr.status]).toEqual([4, 0]);
  });
});

describe('requests the decision leaves on the network: sent natively, untouched, never seen by the downloader', () => {
  test.each<[string, (t: ReturnType<typeof setup>) => void, string | undefined]>([
    ['not media', (t) => t.xhr.open('GET', 'https://page.example/api/user'), undefined],
    ['synchronous', (t) => t.xhr.open('GET', SEGMENT, false), 'sync'],
    [
      'with credentials',
      (t) => {
        t.xhr.open('GET', SEGMENT);
        t.native.withCredentials = true;
      },
      'credentials',
    ],
    ['user and password in open()', (t) => t.xhr.open('GET', SEGMENT, true, 'user', 'secret'), 'credentials'],
    [
      'an Authorization header',
      (t) => {
        t.xhr.open('GET', SEGMENT);
        t.xhr.setRequestHeader('Authorization', 'Bearer x');
      },
      'authorization',
    ],
    [
      'a POST',
      (t) => {
        t.xhr.open('POST', SEGMENT);
      },
      'method',
    ],
    [
      "responseType 'document'",
      (t) => {
        t.xhr.open('GET', SEGMENT);
        t.xhr.responseType = 'document';
      },
      'response-type',
    ],
  ])('%s', (_name, prepare, reason) => {
    const t = setup();
    prepare(t);
    t.xhr.send('payload');
    expect(t.native.sent).toEqual(['payload']);
    expect(t.transport.requests).toEqual([]);
    expect(t.log).toEqual([]);
    expect(t.xhr.suppressesNativeLoadstart).toBe(false);
    expect(t.core.counters.fallbacks).toEqual(reason === undefined ? {} : { [reason]: 1 });
    t.native.readyState = 4;
    expect(t.xhr.readyState).toBe(4);
  });

  test('a manifest the page loads natively is read, and its segments are served next', async () => {
    const t = setup();
    t.xhr.open('GET', 'https://cdn.example/v/index.m3u8');
    t.xhr.send();
    expect(t.native.sent).toEqual([undefined]);
    Object.assign(t.native, {
      readyState: 4,
      status: 200,
      responseText: '#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nchunk-1.ts\n',
    });
    t.xhr.onNativeReadyStateChange();
    expect(t.core.counters).toMatchObject({ manifests: 1, segmentsKnown: 1 });
    t.xhr.open('GET', 'https://cdn.example/v/chunk-1.ts');
    t.xhr.send();
    expect(t.transport.requests.map((r) => r.req)).toEqual([
      expect.objectContaining({ url: 'https://cdn.example/v/chunk-1.ts', duration: 4 }),
    ]);
  });
});

describe('a media request sent before the settings come waits for them (issue 35)', () => {
  const CHUNK = 'https://cdn.example/v/chunk-1.ts';
  /** No settings yet, a manifest already read (the player loaded it while the settings were on their way). */
  function early() {
    const t = setup({ configured: false });
    t.core.observeManifest(
      'https://cdn.example/v/index.m3u8',
      '#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nchunk-1.ts\n',
    );
    t.xhr.open('GET', CHUNK);
    t.xhr.responseType = 'arraybuffer';
    return t;
  }

  /** The settings come after the request stopped waiting: it is neither downloaded nor sent. */
  async function settingsComeToNothing(t: ReturnType<typeof setup>) {
    t.core.setConfig(config);
    await settle();
    expect(t.transport.requests).toEqual([]);
    expect(t.native.sent).toEqual([]);
  }

  test('the page sees it sent; served once the settings come', async () => {
    const t = early();
    t.xhr.send();
    expect(t.log).toEqual(['loadstart(0/0?)@1']);
    expect(t.xhr.readyState).toBe(1);
    expect(() => t.xhr.setRequestHeader('Accept', '*/*')).toThrow(
      expect.objectContaining({ name: 'InvalidStateError' }),
    );
    expect(() => t.xhr.send()).toThrow(expect.objectContaining({ name: 'InvalidStateError' }));
    expect(t.transport.requests).toEqual([]);
    t.core.setConfig(config);
    await settle();
    expect(t.transport.requests.map((r) => r.req)).toEqual([expect.objectContaining({ url: CHUNK, duration: 4 })]);
    t.transport.requests[0].answer(answer(1, new Uint8Array(8)));
    await settle();
    expect(t.log).toEqual(SUCCESS_EVENTS(8));
    expect(t.native.sent).toEqual([]);
    expect(t.core.counters).toMatchObject({ media: 1, intercepted: 1, served: 1, fallbacks: {} });
  });

  test('no settings within the window: sent natively as made (not-ready), with the rest of the page timeout', async () => {
    const t = early();
    t.xhr.timeout = 5000;
    t.xhr.send();
    t.timers.advance(SETTINGS_WAIT_MS - 1);
    await settle();
    expect(t.native.sent).toEqual([]);
    t.timers.advance(1);
    await settle();
    expect(t.native.sent).toEqual([undefined]);
    expect(t.native.timeout).toBe(5000 - SETTINGS_WAIT_MS);
    expect(t.log).toEqual(['loadstart(0/0?)@1']); // the native object's loadstart is dropped
    expect(t.core.counters).toMatchObject({ media: 1, intercepted: 0, fallbacks: { 'not-ready': 1 } });
    expect(t.transport.requests).toEqual([]);
  });

  test('abort() while it waits: abort events, counted as aborted, nothing sent when the settings come', async () => {
    const t = early();
    t.xhr.send();
    t.xhr.abort();
    expect(t.log).toEqual(['loadstart(0/0?)@1', 'readystatechange@4', 'abort(0/0?)@4', 'loadend(0/0?)@4']);
    await settingsComeToNothing(t);
    expect(t.core.counters).toMatchObject({ media: 1, aborted: 1, intercepted: 0, fallbacks: {} });
  });

  test("the page's timeout while it waits: timeout events; open() while it waits ends it without events", async () => {
    const t = early();
    t.xhr.timeout = 300;
    t.xhr.send();
    t.timers.advance(300);
    expect(t.log).toEqual(['loadstart(0/0?)@1', 'readystatechange@4', 'timeout(0/0?)@4', 'loadend(0/0?)@4']);
    t.log.length = 0;
    t.xhr.timeout = 0;
    t.xhr.open('GET', CHUNK);
    t.xhr.send();
    t.xhr.open('GET', CHUNK);
    expect(t.log).toEqual(['loadstart(0/0?)@1']);
    await settingsComeToNothing(t);
    expect(t.core.counters).toMatchObject({ media: 2, aborted: 2, fallbacks: {} });
  });

  test.each<[string, string, boolean, string | undefined]>([
    ['not media', 'https://page.example/api/user', true, undefined],
    ['a manifest', 'https://cdn.example/v/index.m3u8', true, undefined],
    ['synchronous', CHUNK, false, 'sync'],
  ])('%s: sent natively at once', (_name, url, async, reason) => {
    const t = early();
    t.xhr.open('GET', url, async);
    t.xhr.send();
    expect(t.native.sent).toEqual([undefined]);
    expect(t.log).toEqual([]);
    expect(t.core.counters.fallbacks).toEqual(reason === undefined ? {} : { [reason]: 1 });
  });
});
