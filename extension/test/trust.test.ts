/**
 * Issue 9 (trust), the extension's boundary in Node: the request policy of the content script
 * (URL rules, CORS consent and its cache), the relay between the page hook and the downloader
 * (the hook never reaches the downloader unchecked), and the background's one-time tokens.
 */
import { DownloaderGrants, GRANT_TTL_MS } from '../src/background/grants';
import { GetRequest } from '../src/common/messages';
import { Authorization, DownloaderRelay } from '../src/content/relay';
import { checkUrl, ConsentCache, corsConsent, HeadResponse, readableUpcoming } from '../src/content/request-policy';
import { waitFor } from '@mutp/testing/wait';

const PAGE = 'https://site.example';

describe('checkUrl', () => {
  test.each([
    ['https://site.example/v/a.m4s#t=3', { ok: true, url: 'https://site.example/v/a.m4s', crossOrigin: false }],
    ['https://cdn.example/v/a.m4s?x=1', { ok: true, url: 'https://cdn.example/v/a.m4s?x=1', crossOrigin: true }],
    ['http://site.example/a.ts', { ok: true, url: 'http://site.example/a.ts', crossOrigin: true }],
    ['https://u:p@site.example/a.ts', { ok: false, reason: 'credentials' }],
    ['https://u@site.example/a.ts', { ok: false, reason: 'credentials' }],
    ['file:///etc/passwd', { ok: false, reason: 'scheme' }],
    ['javascript:alert(1)', { ok: false, reason: 'scheme' }],
    ['not a url', { ok: false, reason: 'bad-request' }],
    [`https://site.example/${'a'.repeat(9000)}`, { ok: false, reason: 'bad-request' }],
  ])('%s', (url, verdict) => {
    expect(checkUrl(url, PAGE)).toEqual(verdict);
  });
  test('non-strings are refused', () => {
    expect(checkUrl(42, PAGE)).toEqual({ ok: false, reason: 'bad-request' });
  });
});

describe('corsConsent', () => {
  const answer =
    (type: string, headers: Record<string, string> = {}) =>
    async (): Promise<HeadResponse> => ({ type, headers: { get: (n: string) => headers[n] ?? null } });

  test('a credential-less, preflight-free HEAD made as the page', async () => {
    const seen: RequestInit[] = [];
    await corsConsent(
      async (_url, init) => {
        seen.push(init);
        return { type: 'cors', headers: { get: () => null } };
      },
      'https://cdn.example/a.m4s',
      PAGE,
    );
    expect(seen).toEqual([expect.objectContaining({ method: 'HEAD', mode: 'cors', credentials: 'omit' })]);
    expect(seen[0].headers).toBeUndefined(); // no header that would need a preflight
  });

  test('the browser’s CORS check decides when it made one', async () => {
    expect(await corsConsent(answer('cors'), 'https://cdn.example/a', PAGE)).toBe(true);
    expect(await corsConsent(answer('opaque'), 'https://cdn.example/a', PAGE)).toBe(false);
    const refused = async (): Promise<HeadResponse> => {
      throw new TypeError('Failed to fetch');
    };
    expect(await corsConsent(refused, 'https://cdn.example/a', PAGE)).toBe(false);
  });

  test('a privileged answer (no browser check) is judged by its Access-Control-Allow-Origin', async () => {
    expect(await corsConsent(answer('basic'), 'https://cdn.example/a', PAGE)).toBe(false);
    expect(
      await corsConsent(answer('basic', { 'access-control-allow-origin': '*' }), 'https://cdn.example/a', PAGE),
    ).toBe(true);
    const exact = answer('basic', { 'access-control-allow-origin': PAGE });
    expect(await corsConsent(exact, 'https://cdn.example/a', PAGE)).toBe(true);
    const other = answer('basic', { 'access-control-allow-origin': 'https://evil.example' });
    expect(await corsConsent(other, 'https://cdn.example/a', PAGE)).toBe(false);
    expect(
      await corsConsent(answer('basic', { 'access-control-allow-origin': 'null' }), 'https://cdn.example/a', 'null'),
    ).toBe(false);
  });
});

describe('ConsentCache', () => {
  test('asks once per URL within the TTL, again after it; bounded', async () => {
    let now = 0;
    const asked: string[] = [];
    const cache = new ConsentCache(
      async (url) => {
        asked.push(url);
        return url.endsWith('ok');
      },
      () => now,
      1000,
      2,
    );
    expect(await Promise.all([cache.check('a/ok'), cache.check('a/ok'), cache.check('b/no')])).toEqual([
      true,
      true,
      false,
    ]);
    expect(asked).toEqual(['a/ok', 'b/no']);
    now = 1500;
    await cache.check('a/ok');
    expect(asked).toEqual(['a/ok', 'b/no', 'a/ok']);
    await cache.check('c/ok'); // evicts the oldest entry (b/no)
    await cache.check('b/no');
    expect(asked).toEqual(['a/ok', 'b/no', 'a/ok', 'c/ok', 'b/no']);
  });
});

describe('readableUpcoming (staging hints ride on a request: the same rules as its URL)', () => {
  test('same-origin kept; credentials and other schemes dropped; cross-origin only once consent is known', async () => {
    const cache = new ConsentCache(
      async (url) => url.includes('cors-ok'),
      () => 0,
    );
    const list = [
      { url: `${PAGE}/s1.ts#frag` },
      { url: `${PAGE}/all.ts`, range: { start: 100, length: 50 } },
      { url: 'https://user:pw@cdn.example/s2.ts' },
      { url: 'ftp://cdn.example/s3.ts' },
      { url: 'https://cdn.example/cors-ok/s4.ts' },
      { url: 'https://cdn.example/refused/s5.ts' },
    ];
    expect(readableUpcoming(list, PAGE, cache)).toEqual([
      { url: `${PAGE}/s1.ts` },
      { url: `${PAGE}/all.ts`, range: { start: 100, length: 50 } },
    ]);
    // The checks started above; once answered, the consented one rides on the next request.
    await cache.check('https://cdn.example/cors-ok/s4.ts');
    await cache.check('https://cdn.example/refused/s5.ts');
    expect(readableUpcoming(list, PAGE, cache).map((s) => s.url)).toEqual([
      `${PAGE}/s1.ts`,
      `${PAGE}/all.ts`,
      'https://cdn.example/cors-ok/s4.ts',
    ]);
  });
});

describe('DownloaderGrants', () => {
  test('a token is redeemed once, only in the tab that granted it, only while fresh', () => {
    let now = 0;
    const g = new DownloaderGrants(() => now);
    g.grant('a'.repeat(32), 7);
    expect(g.redeem('b'.repeat(32), 7)).toBe(false); // never granted
    expect(g.redeem('a'.repeat(32), 8)).toBe(false); // another tab (and the token is spent)
    expect(g.redeem('a'.repeat(32), 7)).toBe(false);
    g.grant('c'.repeat(32), 7);
    expect(g.redeem('c'.repeat(32), 7)).toBe(true);
    expect(g.redeem('c'.repeat(32), 7)).toBe(false);
    g.grant('d'.repeat(32), 7);
    now += GRANT_TTL_MS + 1;
    expect(g.redeem('d'.repeat(32), 7)).toBe(false);
  });
});

describe('DownloaderRelay', () => {
  /** A relay between a fake hook and a fake downloader, on real MessageChannels. */
  function setup(authorize: (r: GetRequest) => Promise<Authorization>) {
    const hook = new MessageChannel();
    const frame = new MessageChannel();
    const relay = new DownloaderRelay(hook.port2, frame.port1, {
      authorize,
      hello: () => ({ session: 'content-session', pageUrl: `${PAGE}/watch` }),
    });
    const toHook: unknown[] = [];
    const toFrame: unknown[] = [];
    hook.port1.onmessage = (e) => toHook.push(e.data);
    frame.port2.onmessage = (e) => toFrame.push(e.data);
    const close = () => {
      relay.close();
      hook.port1.close();
      frame.port2.close();
    };
    return { hook: hook.port1, frame: frame.port2, toHook, toFrame, close };
  }
  const until = (what: string, done: () => boolean) => waitFor(what, async () => (done() ? true : undefined), 5000, 5);
  const byId = (messages: unknown[]) =>
    [...messages].sort((a, b) => (a as { id: number }).id - (b as { id: number }).id);
  const get = (more: Partial<GetRequest> = {}): GetRequest => ({
    type: 'get',
    id: 1,
    url: `${PAGE}/a.m4s`,
    mode: 'http',
    proxies: 32,
    ...more,
  });

  test('forwards only what authorize() returns, refuses the rest to the hook', async () => {
    const t = setup(async (r) =>
      r.url.includes('evil')
        ? { ok: false, reason: 'cors' }
        : { ok: true, request: { ...r, mode: 'rlnc', proxies: 4 } },
    );
    try {
      t.hook.postMessage({ type: 'hello', session: 'page-says', pageUrl: 'https://elsewhere/' });
      t.hook.postMessage(get());
      t.hook.postMessage(get({ id: 2, url: 'https://evil.example/x' }));
      t.hook.postMessage({ ...get({ id: 3 }), range: { kind: 'from', start: 5, end: 1 } });
      t.hook.postMessage({ type: 'nonsense' });
      await until('two messages each way', () => t.toFrame.length >= 2 && t.toHook.length >= 2);
      expect(t.toFrame).toEqual([
        { type: 'hello', session: 'content-session', pageUrl: `${PAGE}/watch` },
        { type: 'get', id: 1, url: `${PAGE}/a.m4s`, mode: 'rlnc', proxies: 4 },
      ]);
      expect(byId(t.toHook)).toEqual([
        { type: 'result', id: 2, ok: false, reason: 'cors', message: 'cors' },
        { type: 'result', id: 3, ok: false, reason: 'bad-request', message: 'bad-request' },
      ]);
    } finally {
      t.close();
    }
  });

  test('upcoming segments: passed on when well-formed, dropped (the request kept) when not', async () => {
    const t = setup(async (r) => ({ ok: true, request: r }));
    try {
      const upcoming = [{ url: `${PAGE}/b.m4s` }, { url: `${PAGE}/c.m4s`, range: { start: 0, length: 9 } }];
      t.hook.postMessage(get({ id: 1, upcoming, track: `${PAGE}/i.m3u8` }));
      t.hook.postMessage(
        get({ id: 2, upcoming: [{ url: `${PAGE}/b.m4s`, range: { start: 0, length: 0 } }], track: 't' }),
      );
      t.hook.postMessage(get({ id: 3, upcoming: Array(5).fill({ url: `${PAGE}/b.m4s` }), track: 't' }));
      t.hook.postMessage(get({ id: 4, upcoming, track: 7 as unknown as string }));
      await until('four requests to reach the frame', () => t.toFrame.length >= 4);
      const [first, ...rest] = byId(t.toFrame) as GetRequest[];
      expect(first).toMatchObject({ id: 1, upcoming, track: `${PAGE}/i.m3u8` });
      for (const r of rest) {
        expect(r.upcoming).toBeUndefined();
        expect(r.track).toBeUndefined();
      }
    } finally {
      t.close();
    }
  });

  test('answers come back with their bytes; a cancel while authorising drops the request', async () => {
    let release: (a: Authorization) => void = () => undefined;
    const t = setup((r) =>
      r.id === 9 ? new Promise((resolve) => (release = resolve)) : Promise.resolve({ ok: true, request: r }),
    );
    try {
      let asked = false;
      const original = release;
      t.hook.postMessage(get({ id: 9 }));
      await until('the relay to ask for authorisation', () => (asked = release !== original));
      expect(asked).toBe(true);
      t.hook.postMessage({ type: 'cancel', id: 9 });
      // A hello after the cancel: once it reached the frame, the cancel was handled.
      t.hook.postMessage({ type: 'hello', session: 'x', pageUrl: 'y' });
      await until('the hello to reach the frame', () => t.toFrame.length >= 1);
      release({ ok: true, request: get({ id: 9 }) });
      t.frame.postMessage({ type: 'ready' });
      const body = new Uint8Array([1, 2, 3]).buffer;
      t.frame.postMessage({ type: 'result', id: 4, ok: true, body, status: 200, contentType: 'video/mp4' }, [body]);
      await until('two answers to reach the hook', () => t.toHook.length >= 2);
      // A second hello: had the released get been forwarded, it would have arrived before this one.
      t.hook.postMessage({ type: 'hello', session: 'x', pageUrl: 'y' });
      await until('the second hello to reach the frame', () => t.toFrame.length >= 2);
      // Neither the get nor the cancel reached the downloader.
      expect(t.toFrame.map((m) => (m as { type: string }).type)).toEqual(['hello', 'hello']);
      expect(t.toHook).toEqual([
        { type: 'ready' },
        { type: 'result', id: 4, ok: true, body: expect.any(ArrayBuffer), status: 200, contentType: 'video/mp4' },
      ]);
      expect(new Uint8Array((t.toHook[1] as { body: ArrayBuffer }).body)).toEqual(new Uint8Array([1, 2, 3]));
    } finally {
      t.close();
    }
  });

  test('consent still coming: the request goes at once, its answer waits for a yes and is dropped on a no (issue 31)', async () => {
    const answers = new Map<number, (ok: boolean) => void>();
    const t = setup(async (r) => ({
      ok: true,
      request: r,
      consent: new Promise<boolean>((resolve) => answers.set(r.id, resolve)),
    }));
    try {
      t.hook.postMessage(get({ id: 1 }));
      t.hook.postMessage(get({ id: 2 }));
      t.hook.postMessage(get({ id: 3 }));
      // All three reach the downloader before any consent answer: the HEAD is off the critical path.
      await until('three requests to reach the frame', () => t.toFrame.length >= 3);
      expect(answers.size).toBe(3);
      const result = (id: number) => {
        const body = new Uint8Array([id]).buffer;
        t.frame.postMessage({ type: 'result', id, ok: true, body, status: 200, contentType: 'video/mp4' }, [body]);
      };
      // 1: the bytes arrive first and wait; consent then releases them.
      result(1);
      // 2: consent refused after the bytes came: they never reach the page.
      result(2);
      // 3: consent refused before the bytes: the download is cancelled; a late answer is dropped.
      answers.get(3)!(false);
      await until('the cancel of 3 to reach the frame', () => t.toFrame.length >= 4);
      expect(t.toFrame[3]).toEqual({ type: 'cancel', id: 3 });
      result(3);
      answers.get(2)!(false);
      answers.get(1)!(true);
      await until('three answers to reach the hook', () => t.toHook.length >= 3);
      // A hello round trip: anything still queued for the hook has arrived by then.
      t.hook.postMessage({ type: 'hello', session: 'x', pageUrl: 'y' });
      await until('the hello to reach the frame', () => t.toFrame.length >= 5);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(byId(t.toHook)).toEqual([
        { type: 'result', id: 1, ok: true, body: expect.any(ArrayBuffer), status: 200, contentType: 'video/mp4' },
        { type: 'result', id: 2, ok: false, reason: 'cors', message: 'cors' },
        { type: 'result', id: 3, ok: false, reason: 'cors', message: 'cors' },
      ]);
      expect(new Uint8Array((byId(t.toHook)[0] as { body: ArrayBuffer }).body)).toEqual(new Uint8Array([1]));
    } finally {
      t.close();
    }
  });
});
