import type { ByteRange, ObjectAttributes, ProxyInfo, StagedAnswer } from '@mutp/shared';
import { ClientError, GetOptions, GetResult } from '@mutp/shared/client';
import { ClientLike, Downloader, ORIGO_RETRY_MS } from '../src/downloader/downloader';
import { ByteLru } from '../src/downloader/lru';
import { GetFailure, GetRequest, GetSuccess, SegmentRecord } from '../src/common/messages';
import { normalizeSettings, Settings } from '../src/common/settings';

function object(length: number, seed = 1): Uint8Array {
  return Uint8Array.from({ length }, (_, i) => (i * 13 + seed) & 0xff);
}

function result(bytes: Uint8Array, attributes?: ObjectAttributes): GetResult {
  return {
    ...(attributes ? { attributes } : {}),
    object: bytes,
    mode: 'rlnc',
    startedAt: 0,
    durationMs: 100,
    goodputBps: bytes.length * 10,
    normalizedGoodput: 0.9,
    sources: [
      { proxyId: 'a', name: 'proxy-a', share: 0.75, useful: 3, received: 3 },
      { proxyId: 'b', name: 'proxy-b', share: 0.25, useful: 1, received: 2 },
    ],
  } as unknown as GetResult;
}

interface Call {
  url: string;
  options: GetOptions;
  resolve(bytes: Uint8Array, attributes?: ObjectAttributes): void;
  reject(e: Error): void;
}

/** A client whose downloads the test settles by hand. */
class FakeClient implements ClientLike {
  calls: Call[] = [];
  closed = false;
  get(url: string, options: GetOptions): Promise<GetResult> {
    return new Promise((resolve, reject) => {
      options.signal?.addEventListener('abort', () => reject(new ClientError('cancelled', 'aborted')));
      this.calls.push({ url, options, resolve: (b, a) => resolve(result(b, a)), reject });
    });
  }
  close(): void {
    this.closed = true;
  }
  prepared: number[] = [];
  prepare(timeoutMs: number): void {
    this.prepared.push(timeoutMs);
  }
}

const flush = () => new Promise((r) => setImmediate(r));

function setup(overrides: Partial<Settings> = {}, options: Partial<ConstructorParameters<typeof Downloader>[0]> = {}) {
  let settings = normalizeSettings({ maxObjectBytes: 10_000, rangeCacheBytes: 50_000, ...overrides });
  let now = 1000;
  const clients: FakeClient[] = [];
  const records: SegmentRecord[] = [];
  const unavailable = new Set<string>();
  const d = new Downloader({
    settings: () => settings,
    createClient: async () => {
      const c = new FakeClient();
      clients.push(c);
      return c;
    },
    modeAvailable: (m) => !unavailable.has(m),
    now: () => now,
    onRecord: (r) => records.push(r),
    ...options,
  });
  return {
    d,
    clients,
    records,
    unavailable,
    client: () => clients[clients.length - 1],
    advance: (ms: number) => (now += ms),
    setSettings: (patch: Partial<Settings>) => (settings = normalizeSettings({ ...settings, ...patch })),
  };
}

let nextId = 1;
const req = (url: string, more: Partial<GetRequest> = {}): GetRequest => ({
  type: 'get',
  id: nextId++,
  url,
  mode: 'rlnc',
  proxies: 4,
  ...more,
});
const ok = (a: unknown) => a as GetSuccess;
const failed = (a: unknown) => a as GetFailure;
const bytesOf = (a: GetSuccess) => new Uint8Array(a.body);

test('a whole object: 200, the bytes, a type from the path, a record with per-proxy shares', async () => {
  const t = setup();
  const answer = t.d.handle(req('https://cdn.example/v/seg-1.m4s'));
  await flush();
  expect(t.client().calls[0]).toMatchObject({
    url: 'https://cdn.example/v/seg-1.m4s',
    options: { mode: 'rlnc', proxies: 4 },
  });
  t.client().calls[0].resolve(object(5000));
  const a = ok(await answer);
  expect(a).toMatchObject({ ok: true, status: 200, contentType: 'video/iso.segment' });
  expect(a.contentRange).toBeUndefined();
  expect(bytesOf(a)).toEqual(object(5000));
  expect(t.records).toEqual([
    expect.objectContaining({
      ok: true,
      bytes: 5000,
      objectBytes: 5000,
      cached: false,
      durationMs: 100,
      normalizedGoodput: 0.9,
      proxies: [
        { name: 'proxy-a', proxyId: 'a', share: 0.75, useful: 3 },
        { name: 'proxy-b', proxyId: 'b', share: 0.25, useful: 1 },
      ],
    }),
  ]);
});

test('ranges: each is a ranged transfer; the 206 says what META said (range, complete length, type)', async () => {
  const t = setup({ concurrency: 4 });
  const url = 'https://cdn.example/movie.mp4';
  const file = object(8000);
  /** Serves a call as a proxy would: the asked bytes, where they sit, the origin's type. */
  const serve = (call: Call) => {
    const { start, length } = call.options.range!;
    const bytes = file.slice(start, Math.min(file.length, start + length));
    call.resolve(bytes, { contentType: 'video/mp4; codecs="avc1"', range: { start, completeLength: file.length } });
  };
  const first = t.d.handle(req(url, { range: { kind: 'from', start: 0, end: 99 } }));
  const second = t.d.handle(req(url, { range: { kind: 'from', start: 100, end: 199 } }));
  const same = t.d.handle(req(url, { range: { kind: 'from', start: 100, end: 199 } })); // shares the download
  await flush();
  expect(t.client().calls.map((c) => c.options.range)).toEqual([
    { start: 0, length: 100 },
    { start: 100, length: 100 },
  ]);
  t.client().calls.forEach(serve);
  const a = ok(await first);
  expect(a).toMatchObject({ status: 206, contentRange: 'bytes 0-99/8000', contentType: 'video/mp4; codecs="avc1"' });
  expect(bytesOf(a)).toEqual(file.subarray(0, 100));
  for (const b of [ok(await second), ok(await same)]) {
    expect(b).toMatchObject({ status: 206, contentRange: 'bytes 100-199/8000' });
    expect(bytesOf(b)).toEqual(file.subarray(100, 200));
  }
  // The complete length is known now: an open-ended and a suffix range ask for exactly the rest.
  const open = t.d.handle(req(url, { range: { kind: 'from', start: 7000 } }));
  const tail = t.d.handle(req(url, { range: { kind: 'suffix', length: 10 } }));
  await flush();
  expect(
    t
      .client()
      .calls.slice(2)
      .map((c) => c.options.range),
  ).toEqual([
    { start: 7000, length: 1000 },
    { start: 7990, length: 10 },
  ]);
  t.client().calls.slice(2).forEach(serve);
  expect(ok(await open)).toMatchObject({ contentRange: 'bytes 7000-7999/8000' });
  expect(bytesOf(ok(await tail))).toEqual(file.subarray(7990));
  // A range that ends past the file is served to its end, as an origin would.
  const past = t.d.handle(req(url, { range: { kind: 'from', start: 7900, end: 9999 } }));
  await flush();
  serve(t.client().calls[4]);
  expect(ok(await past)).toMatchObject({ contentRange: 'bytes 7900-7999/8000' });
  // Beyond the end: the server would say 416, the page asks the network (no download).
  const beyond = failed(await t.d.handle(req(url, { range: { kind: 'from', start: 9000 } })));
  expect(beyond).toMatchObject({ ok: false, reason: 'range-unsatisfiable' });
  expect(t.client().calls).toHaveLength(5);
  expect(t.records.filter((r) => r.ok).map((r) => r.bytes)).toEqual([100, 100, 100, 1000, 10, 100]);
});

test('ranges: longer than maxObjectBytes go to the network; an open-ended one when the rest is longer', async () => {
  const t = setup({ maxObjectBytes: 1024 });
  const url = 'https://cdn.example/long.mp4';
  const big = failed(await t.d.handle(req(url, { range: { kind: 'from', start: 0, end: 4999 } })));
  expect(big).toMatchObject({ reason: 'too-large' });
  expect(t.clients).toHaveLength(0);
  // Open-ended, length unknown: up to maxObjectBytes is asked for; the file goes on past it.
  const open = t.d.handle(req(url, { range: { kind: 'from', start: 100 } }));
  await flush();
  const call = t.client().calls[0];
  expect(call.options.range).toEqual({ start: 100, length: 1024 });
  call.resolve(object(1024), { range: { start: 100, completeLength: 1_000_000 } });
  expect(failed(await open)).toMatchObject({ reason: 'too-large' });
  // Ranges of it still work: the file is not marked too large.
  const small = t.d.handle(req(url, { range: { kind: 'from', start: 0, end: 9 } }));
  await flush();
  t.client().calls[1].resolve(object(10), { range: { start: 0, completeLength: 1_000_000 } });
  expect(ok(await small)).toMatchObject({ contentRange: 'bytes 0-9/1000000' });
});

test('ranges: a suffix of a file of unknown length fetches the whole object once and slices ranges from it', async () => {
  const t = setup();
  const url = 'https://cdn.example/clip.mp4';
  const tail = t.d.handle(req(url, { range: { kind: 'suffix', length: 10 } }));
  await flush();
  expect(t.client().calls[0].options.range).toBeUndefined();
  t.client().calls[0].resolve(object(8000));
  expect(ok(await tail)).toMatchObject({ status: 206, contentRange: 'bytes 7990-7999/8000', contentType: 'video/mp4' });
  const later = ok(await t.d.handle(req(url, { range: { kind: 'from', start: 0, end: 9 } })));
  expect(bytesOf(later)).toEqual(object(8000).subarray(0, 10));
  expect(t.client().calls).toHaveLength(1);
  expect(t.records.map((r) => r.cached)).toEqual([false, true]);
});

test('objects above maxObjectBytes: the download stops when the length is known; the URL goes to the network from then on', async () => {
  const t = setup({ maxObjectBytes: 1024 });
  const url = 'https://cdn.example/huge.mp4';
  const answer = t.d.handle(req(url));
  await flush();
  const call = t.client().calls[0];
  call.options.onProgress?.({ dof: 0, totalDof: 100, bytes: 50_000_000, liveSources: 2, sources: 2 });
  expect(call.options.signal?.aborted).toBe(true);
  expect(failed(await answer)).toMatchObject({ ok: false, reason: 'too-large' });
  expect(failed(await t.d.handle(req(url)))).toMatchObject({ reason: 'too-large' });
  expect(t.client().calls).toHaveLength(1);
});

test('origo unreachable: later requests fail at once for a while, then try again', async () => {
  const t = setup();
  const first = t.d.handle(req('https://cdn.example/a.ts'));
  await flush();
  t.client().calls[0].reject(new ClientError('origo-unreachable', 'connection refused'));
  expect(failed(await first)).toMatchObject({
    reason: 'origo-unreachable',
    message: 'origo-unreachable: connection refused',
  });
  expect(failed(await t.d.handle(req('https://cdn.example/b.ts')))).toMatchObject({ reason: 'origo-unreachable' });
  expect(t.client().calls).toHaveLength(1);
  t.advance(ORIGO_RETRY_MS + 1);
  const again = t.d.handle(req('https://cdn.example/c.ts'));
  await flush();
  expect(t.client().calls).toHaveLength(2);
  t.client().calls[1].resolve(object(10));
  expect(ok(await again).status).toBe(200);
});

test('ClientError codes become the reasons; other errors are "internal"', async () => {
  const t = setup();
  const a = t.d.handle(req('https://cdn.example/a.ts'));
  const b = t.d.handle(req('https://cdn.example/b.ts'));
  await flush();
  t.client().calls[0].reject(new ClientError('no-proxies', 'none'));
  expect(failed(await a).reason).toBe('no-proxies');
  await flush();
  t.client().calls[1].reject(new Error('boom'));
  expect(failed(await b)).toMatchObject({ reason: 'internal', message: 'boom' });
});

test('cancel: the download stops only when nobody waits for it; cancelled requests get no answer', async () => {
  const t = setup();
  const url = 'https://cdn.example/movie.webm';
  const r1 = req(url, { range: { kind: 'from', start: 0, end: 9 } });
  const r2 = req(url, { range: { kind: 'from', start: 0, end: 9 } });
  const a1 = t.d.handle(r1);
  const a2 = t.d.handle(r2);
  await flush();
  const call = t.client().calls[0];
  t.d.cancel(r1.id);
  expect(call.options.signal?.aborted).toBe(false);
  t.d.cancel(r2.id);
  expect(call.options.signal?.aborted).toBe(true);
  expect(await a1).toBeUndefined();
  expect(await a2).toBeUndefined();
});

test('downloads run one at a time by default; a queued one that is cancelled never starts', async () => {
  const t = setup();
  const a = t.d.handle(req('https://cdn.example/1.ts'));
  const rb = req('https://cdn.example/2.ts');
  const b = t.d.handle(rb);
  const c = t.d.handle(req('https://cdn.example/3.ts'));
  await flush();
  expect(t.client().calls.map((x) => x.url)).toEqual(['https://cdn.example/1.ts']);
  t.d.cancel(rb.id);
  t.client().calls[0].resolve(object(1));
  await a;
  await flush();
  expect(t.client().calls.map((x) => x.url)).toEqual(['https://cdn.example/1.ts', 'https://cdn.example/3.ts']);
  t.client().calls[1].resolve(object(3));
  expect(ok(await c).status).toBe(200);
  expect(await b).toBeUndefined();
});

test('requests refused before any download', async () => {
  const t = setup();
  expect(failed(await t.d.handle(req('ftp://x/y.ts')))).toMatchObject({ reason: 'bad-request' });
  expect(failed(await t.d.handle(req('https://x/y.ts', { proxies: 0 })))).toMatchObject({ reason: 'bad-request' });
  t.unavailable.add('fountain');
  expect(failed(await t.d.handle(req('https://x/y.ts', { mode: 'fountain' })))).toMatchObject({
    reason: 'codec-unavailable',
  });
  t.setSettings({ enabled: false });
  expect(failed(await t.d.handle(req('https://x/y.ts')))).toMatchObject({ reason: 'disabled' });
  expect(t.clients).toHaveLength(0);
});

test.each([
  ['origo URL', { origoUrl: 'wss://10.0.0.1:8700/v1/client' }],
  ['transport', { transport: 'webrtc' }],
] as const)('a new %s makes a new client and closes the old one', async (_, patch) => {
  const t = setup();
  const a = t.d.handle(req('https://x/1.ts'));
  await flush();
  t.client().calls[0].resolve(object(1));
  await a;
  t.setSettings(patch);
  const b = t.d.handle(req('https://x/2.ts'));
  await flush();
  expect(t.clients).toHaveLength(2);
  expect(t.clients[0].closed).toBe(true);
  t.client().calls[0].resolve(object(2));
  expect(ok(await b).status).toBe(200);
});

describe('ByteLru', () => {
  test('evicts the least recently used beyond its capacity; refuses what alone is too big', () => {
    const lru = new ByteLru(100);
    lru.set('a', new Uint8Array(40));
    lru.set('b', new Uint8Array(40));
    lru.get('a');
    lru.set('c', new Uint8Array(40));
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBeDefined();
    expect(lru.totalBytes).toBe(80);
    expect(lru.set('big', new Uint8Array(101))).toBe(false);
    expect(lru.size).toBe(2);
  });
});

// ------------------------------------------------------------------ issue 9 (trust), extension side

/** What the MessagePort does with an answer: transfers its body away (detaching it here). */
function transferAway(a: GetSuccess): ArrayBuffer {
  return structuredClone(a.body, { transfer: [a.body] });
}

test('the range cache never hands out a buffer it keeps (a whole request sharing a range download)', async () => {
  const t = setup();
  const url = 'https://cdn.example/movie.mp4';
  const ranged = t.d.handle(req(url, { range: { kind: 'suffix', length: 8000 } }));
  const whole = t.d.handle(req(url));
  await flush();
  expect(t.client().calls).toHaveLength(1);
  t.client().calls[0].resolve(object(8000));
  const first = ok(await ranged);
  const all = ok(await whole);
  expect(new Uint8Array(transferAway(first))).toEqual(object(8000));
  expect(new Uint8Array(transferAway(all))).toEqual(object(8000));
  // The cached object is intact: later ranges come from it.
  const later = ok(await t.d.handle(req(url, { range: { kind: 'from', start: 7990 } })));
  expect(later).toMatchObject({ status: 206, contentRange: 'bytes 7990-7999/8000' });
  expect(bytesOf(later)).toEqual(object(8000).subarray(7990));
  expect(t.client().calls).toHaveLength(1);
});

test('a plain ws:// origo is refused for a remote host (wss:// required), allowed to loopback', async () => {
  const remote = setup({ origoUrl: 'ws://origo.example:8700/v1/client' });
  const answer = failed(await remote.d.handle(req('https://cdn.example/a.ts')));
  expect(answer).toMatchObject({ ok: false, reason: 'origo-insecure' });
  expect(answer.message).toMatch(/wss:\/\/origo\.example:8700\/v1\/client/);
  expect(remote.clients).toHaveLength(0); // never connected

  for (const origoUrl of [
    'ws://127.0.0.1:8700/v1/client',
    'ws://localhost:8700/v1/client',
    'ws://[::1]:8700/v1/client',
  ]) {
    const local = setup({ origoUrl });
    const pending = local.d.handle(req('https://cdn.example/b.ts'));
    await flush();
    expect({ origoUrl, calls: local.client().calls.length }).toEqual({ origoUrl, calls: 1 });
    local.client().calls[0].resolve(object(10));
    expect(ok(await pending).status).toBe(200);
  }
  const secure = setup({ origoUrl: 'wss://origo.example/v1/client' });
  const p = secure.d.handle(req('https://cdn.example/c.ts'));
  await flush();
  secure.client().calls[0].resolve(object(10));
  expect(ok(await p).status).toBe(200);
});

test('download records carry origin and path only: no query (signed tokens), no user info', async () => {
  const t = setup();
  const url = 'https://cdn.example/v/seg-7.m4s?token=SECRET&expires=1';
  const pending = t.d.handle(req(url));
  await flush();
  expect(t.client().calls[0].url).toBe(url); // the proxies still fetch the real URL
  t.client().calls[0].resolve(object(10));
  await pending;
  await t.d.handle(req('ftp://user:pw@cdn.example/x?token=SECRET'));
  expect(t.records.map((r) => r.url)).toEqual(['https://cdn.example/v/seg-7.m4s', 'ftp://cdn.example/x']);
  expect(JSON.stringify(t.records)).not.toContain('SECRET');
});

test('prepare: the client is made and told to open origo before the first request, within the origo limit', async () => {
  const t = setup({ deadlineMs: 8000 });
  t.d.prepare();
  await flush();
  expect(t.clients).toHaveLength(1);
  expect(t.client().prepared).toEqual([1000]);
  // The first request uses the same client.
  const answer = t.d.handle(req('https://cdn.example/v/seg-1.m4s'));
  await flush();
  t.client().calls[0].resolve(object(10));
  expect(ok(await answer).status).toBe(200);
  expect(t.clients).toHaveLength(1);
  // Disabled: nothing is prepared.
  const off = setup({ enabled: false });
  off.d.prepare();
  await flush();
  expect(off.clients).toHaveLength(0);
});

test('progress: the first datagram cancels the first-byte timer; later ones cost no timer call', async () => {
  const timers = { set: 0, cancelled: 0 };
  const { d, client } = setup(
    {},
    {
      setTimer: () => {
        timers.set++;
        return () => timers.cancelled++;
      },
    },
  );
  const answer = d.handle(req('https://cdn.example/a.ts'));
  await flush();
  const call = client().calls[0];
  for (let i = 0; i < 1000; i++)
    call.options.onProgress?.({ dof: i, totalDof: 1000, bytes: 5000, liveSources: 2, sources: 2 });
  expect(timers).toEqual({ set: 1, cancelled: 1 });
  call.resolve(object(5000));
  expect(ok(await answer).status).toBe(200);
  expect(timers).toEqual({ set: 1, cancelled: 1 });
});

describe('staging (a request carries its playlist position)', () => {
  const SET = [
    { proxyId: 'a', name: 'proxy-a', httpUrl: 'http://a.test/', capacityBps: 1e6 },
    { proxyId: 'b', name: 'proxy-b', httpUrl: 'http://b.test/', capacityBps: 1e6 },
  ];

  const SPARE = { proxyId: 'c', name: 'proxy-c', httpUrl: 'http://c.test/', capacityBps: 1e6 };

  /** A FakeClient that can stage: every hint is answered "staged" by each proxy named. */
  class StagingClient extends FakeClient {
    chosen = 0;
    chooseTimeouts: (number | undefined)[] = [];
    refuse?: ClientError;
    hints: { url: string; proxies: string[]; range?: ByteRange }[] = [];
    /** Proxies that said they are going away (MutpClient.leavingProxies). */
    leaving: string[] = [];
    async chooseProxies(
      _n: number,
      _mode: string,
      o: { origoTimeoutMs?: number; exclude?: string[] } = {},
    ): Promise<ProxyInfo[]> {
      this.chosen++;
      this.chooseTimeouts.push(o.origoTimeoutMs);
      if (this.refuse) throw this.refuse;
      // A replacement for a handoff: the set is excluded.
      return o.exclude ? [SPARE] : SET;
    }
    leavingProxies(): string[] {
      return this.leaving;
    }
    /** Subscribers to leaving notices (a session each), the latest last. */
    listeners = new Set<(proxyId: string) => void>();
    get listener(): ((proxyId: string) => void) | undefined {
      return [...this.listeners].at(-1);
    }
    onProxyLeaving(listener: (proxyId: string) => void): () => void {
      this.listeners.add(listener);
      return () => {
        this.listeners.delete(listener);
      };
    }
    async stage(url: string, proxies: readonly ProxyInfo[], o: { range?: ByteRange } = {}): Promise<StagedAnswer[]> {
      this.hints.push({ url, proxies: proxies.map((p) => p.proxyId), ...(o.range ? { range: o.range } : {}) });
      return proxies.map((p) => ({
        type: 'staged',
        requestId: 'r',
        proxyId: p.proxyId,
        status: 'staged',
        originMs: 3,
        cached: false,
        bytes: 10,
      }));
    }
  }

  function stagingSetup(overrides: Partial<Settings> = {}) {
    const clients: StagingClient[] = [];
    const t = setup(overrides, {
      createClient: async () => {
        const c = new StagingClient();
        clients.push(c);
        return c;
      },
    });
    return { ...t, client: () => clients[clients.length - 1] };
  }

  /** Handles `request`, answering its download with 100 bytes. */
  async function served(t: ReturnType<typeof stagingSetup>, request: GetRequest) {
    const answer = t.d.handle(request);
    await flush();
    t.client().calls.at(-1)!.resolve(object(100));
    return answer;
  }

  const playlist = Array.from({ length: 8 }, (_, i) => `https://cdn.test/seg${i}.ts`);
  const at = (i: number, more: Partial<GetRequest> = {}) =>
    req(playlist[i], {
      track: 'https://cdn.test/index.m3u8',
      upcoming: playlist.slice(i + 1, i + 5).map((url) => ({ url })),
      ...more,
    });

  test('downloads go through one chosen set; the next segment is staged at it, never the one being fetched', async () => {
    const t = stagingSetup();
    for (let i = 0; i < 3; i++) {
      const answer = t.d.handle(at(i));
      await flush();
      const call = t.client().calls[i];
      expect(call.url).toBe(playlist[i]);
      expect(call.options.use).toEqual(SET);
      call.resolve(object(100, i));
      expect(await answer).toMatchObject({ ok: true });
    }
    const c = t.client();
    expect(c.chosen).toBe(1);
    expect(c.hints.map((h) => h.url)).not.toContain(playlist[0]);
    expect(c.hints.map((h) => h.url)).toEqual(expect.arrayContaining([playlist[1], playlist[2], playlist[3]]));
    for (const h of c.hints) expect(h.proxies).toEqual(['a', 'b']);
    expect(t.d.stagingStats()).toMatchObject({ wasted: 0, hintsStaged: c.hints.length * 2 });
  });

  test('a proxy going away (draining) is replaced before the next segment, which is staged at the newcomer first', async () => {
    const t = stagingSetup();
    const answer = t.d.handle(at(0));
    await flush();
    t.client().leaving = ['b']; // b said so while segment 0 downloads
    t.client().calls[0].resolve(object(100));
    await answer;
    await flush();
    const c = t.client();
    expect(c.hints.find((h) => h.proxies.includes('c'))).toEqual({ url: playlist[1], proxies: ['c'] });
    const next = t.d.handle(at(1));
    await flush();
    expect(c.calls[1].options.use!.map((p) => p.proxyId)).toEqual(['a', 'c']);
    expect(t.d.stagingStats()).toMatchObject({ handoffs: 1, goingAwayReplaced: 1 });
    c.calls[1].resolve(object(100, 1));
    expect(await next).toMatchObject({ ok: true });
  });

  test('told at once that a proxy is going away, the next segment is staged at the newcomer while this one downloads', async () => {
    const t = stagingSetup();
    const answer = t.d.handle(at(0));
    await flush();
    const c = t.client();
    c.leaving = ['b'];
    c.listener?.('b');
    await flush();
    // Segment 0 is still downloading, and segment 1 is already staged at the newcomer.
    expect(c.calls).toHaveLength(1);
    expect(c.hints.find((h) => h.proxies.includes('c'))).toEqual({ url: playlist[1], proxies: ['c'] });
    c.calls[0].resolve(object(100));
    await answer;
    await flush();
    const next = t.d.handle(at(1));
    await flush();
    expect(c.calls[1].options.use!.map((p) => p.proxyId)).toEqual(['a', 'c']);
    expect(t.d.stagingStats()).toMatchObject({ handoffs: 1, goingAwayReplaced: 1 });
    c.calls[1].resolve(object(100, 1));
    await next;
    t.d.close();
    expect(c.listener).toBeUndefined();
  });

  test("a staged download's record says whether it was staged, with the frame's staging so far", async () => {
    const t = stagingSetup();
    await served(t, at(0));
    await flush();
    await served(t, at(1));
    expect(t.records.map((r) => r.staged)).toEqual([false, true]);
    expect(t.records[1].staging).toEqual({
      ordersSent: t.client().hints.length,
      hintsStaged: t.client().hints.length * 2,
      wasted: 0,
      neededAhead: expect.any(Number),
      spread: 2,
    });
  });

  test('one session per client, mode and N: another N chooses a set of its own, and the old session stops listening', async () => {
    const t = stagingSetup();
    await served(t, at(0));
    const c = t.client();
    const before = c.listener;
    await served(t, at(1, { proxies: 2 }));
    expect(c.chosen).toBe(2);
    expect(c.listeners.size).toBe(1);
    expect(c.listener).not.toBe(before);
    await served(t, at(2, { proxies: 2 }));
    expect(c.chosen).toBe(2);
  });

  test('a seek: what was staged ahead and skipped counts as waste, at most the staged-ahead segments', async () => {
    const t = stagingSetup();
    await served(t, at(0));
    await served(t, at(5));
    const stats = t.d.stagingStats()!;
    expect(stats.wasted).toBeGreaterThanOrEqual(1);
    expect(stats.wasted).toBeLessThanOrEqual(stats.neededAhead);
  });

  test("choosing the set has the request's origo limit, and its failure is the request's (reason and cause)", async () => {
    const t = stagingSetup();
    await served(t, at(0));
    expect(t.client().chooseTimeouts).toEqual([expect.any(Number)]);
    expect(t.client().chooseTimeouts[0]).toBeLessThan(normalizeSettings({}).deadlineMs);

    const down = stagingSetup();
    down.d.prepare(); // makes the client, so the test can make origo fail before the first request
    await flush();
    down.client().refuse = new ClientError('origo-unreachable', 'origo handshake timed out');
    const refused = await down.d.handle(at(0));
    expect(refused).toMatchObject({ ok: false, reason: 'origo-unreachable' });
    expect(down.client().calls).toEqual([]); // no download without a set
  });

  test('ranged segments are staged as the ranges the manifest names', async () => {
    const t = stagingSetup();
    const url = 'https://cdn.test/all.ts';
    const answer = t.d.handle(
      req(url, {
        range: { kind: 'from', start: 0, end: 99 },
        track: 'https://cdn.test/ranged.m3u8',
        upcoming: [{ url, range: { start: 100, length: 100 } }],
      }),
    );
    await flush();
    t.client().calls[0].resolve(object(100), { range: { start: 0, completeLength: 1000 } });
    await answer;
    expect(t.client().hints).toEqual([{ url, proxies: ['a', 'b'], range: { start: 100, length: 100 } }]);
  });

  test('no hint with staging off, in Parallel HTTP, or without a playlist position; origo then picks per download', async () => {
    for (const [overrides, more] of [
      [{ staging: false }, {}],
      [{}, { mode: 'http' as const }],
      [{}, { track: undefined, upcoming: undefined }],
    ] as [Partial<Settings>, Partial<GetRequest>][]) {
      const t = stagingSetup(overrides);
      const answer = t.d.handle(at(0, more));
      await flush();
      expect(t.client().calls[0].options.use).toBeUndefined();
      t.client().calls[0].resolve(object(100));
      await answer;
      expect(t.client().hints).toEqual([]);
      expect(t.client().chosen).toBe(0);
    }
  });
});
