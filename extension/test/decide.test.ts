import { compilePatterns, decide, DecisionContext, RequestFacts } from '../src/hook/decide';
import { HookConfig } from '../src/common/messages';
import { extractHls, SegmentRegistry } from '../src/hook/manifest';
import { DEFAULT_SETTINGS } from '../src/common/settings';

const PAGE = 'https://site.example';
const PLAYLIST = `#EXTM3U
#EXT-X-TARGETDURATION:4
#EXT-X-MAP:URI="init.mp4"
#EXTINF:4,
seg-0.m4s
#EXTINF:4,
#EXT-X-BYTERANGE:1000@0
all.mp4
#EXT-X-ENDLIST
`;

const config: HookConfig = {
  enabled: true,
  mode: 'rlnc',
  proxies: 4,
  deadlineMs: 10_000,
  urlPatterns: [...DEFAULT_SETTINGS.urlPatterns, '/\\/media\\/chunk-\\d+$/'],
  exposeCounters: false,
};

function context(c: HookConfig | undefined = config): DecisionContext {
  const registry = new SegmentRegistry();
  registry.addManifest(`${PAGE}/v/index.m3u8`, extractHls(PLAYLIST, `${PAGE}/v/index.m3u8`));
  return { config: c, lookup: (u) => registry.lookup(u), patterns: compilePatterns(c?.urlPatterns ?? []) };
}

function xhr(url: string, more: Partial<RequestFacts> = {}): RequestFacts {
  return { api: 'xhr', method: 'GET', url, headers: [], baseUrl: `${PAGE}/v/player.html`, pageOrigin: PAGE, ...more };
}

function fetchFacts(url: string, more: Partial<RequestFacts> = {}): RequestFacts {
  return {
    api: 'fetch',
    method: 'GET',
    url,
    headers: [],
    baseUrl: `${PAGE}/v/player.html`,
    pageOrigin: PAGE,
    credentials: 'same-origin',
    mode: 'cors',
    cache: 'default',
    ...more,
  };
}

describe('what is intercepted', () => {
  test('a segment listed in a manifest, by absolute or relative URL, fragment ignored', () => {
    const ctx = context();
    expect(decide(xhr(`${PAGE}/v/seg-0.m4s`), ctx)).toMatchObject({
      intercept: true,
      url: `${PAGE}/v/seg-0.m4s`,
      match: 'manifest',
      segment: { kind: 'media', duration: 4 },
    });
    expect(decide(xhr('seg-0.m4s#t=1'), ctx)).toMatchObject({ intercept: true, url: `${PAGE}/v/seg-0.m4s` });
    expect(decide(fetchFacts('init.mp4'), ctx)).toMatchObject({ intercept: true, segment: { kind: 'init' } });
  });

  test('a manifest byte range carries its Range header into the decision', () => {
    const d = decide(xhr(`${PAGE}/v/all.mp4`, { headers: [['Range', 'bytes=0-999']] }), context());
    expect(d).toMatchObject({ intercept: true, match: 'manifest', range: { kind: 'from', start: 0, end: 999 } });
  });

  test('a Range request for a media file not in any manifest', () => {
    for (const ext of ['mp4', 'webm', 'm4s', 'ts']) {
      const d = decide(
        fetchFacts(`https://cdn.example/movie.${ext}`, { headers: [['range', 'bytes=100-']] }),
        context(),
      );
      expect(d).toMatchObject({ intercept: true, match: 'range-file', range: { kind: 'from', start: 100 } });
    }
  });

  test('a configured URL pattern (glob and regex), without a Range header', () => {
    const yt = 'https://r4---sn.example.com/videoplayback?expire=1&itag=137&range=0-65535&rn=1';
    expect(decide(xhr(yt), context())).toMatchObject({ intercept: true, match: 'pattern' });
    expect(decide(xhr('https://cdn.example/media/chunk-12'), context())).toMatchObject({
      intercept: true,
      match: 'pattern',
    });
  });
});

describe('what passes through, and why', () => {
  test('anything that is not media is not counted as media', () => {
    const ctx = context();
    expect(decide(xhr(`${PAGE}/api/user.json`), ctx)).toEqual({ intercept: false, media: false, reason: 'not-media' });
    // a media file without a Range header is not recognised by its extension alone
    expect(decide(xhr('https://cdn.example/movie.mp4'), ctx)).toMatchObject({ intercept: false, media: false });
    // nor a ranged request for something that is not a media file
    expect(decide(xhr('https://cdn.example/archive.zip', { headers: [['Range', 'bytes=0-1']] }), ctx)).toMatchObject({
      intercept: false,
      media: false,
    });
    expect(decide(xhr('data:video/mp4;base64,AAAA'), ctx)).toMatchObject({ intercept: false, reason: 'scheme' });
    expect(decide(xhr('blob:https://site.example/123'), ctx)).toMatchObject({ intercept: false, reason: 'scheme' });
  });

  const seg = `${PAGE}/v/seg-0.m4s`;
  const cases: [string, RequestFacts, string][] = [
    ['POST', xhr(seg, { method: 'POST' }), 'method'],
    ['HEAD', fetchFacts(seg, { method: 'HEAD' }), 'method'],
    ['GET with a body', fetchFacts(seg, { hasBody: true }), 'method'],
    ['synchronous XHR', xhr(seg, { sync: true }), 'sync'],
    ['withCredentials', xhr(seg, { withCredentials: true }), 'credentials'],
    ['user:password in open()', xhr(seg, { hasUserInfo: true }), 'credentials'],
    [
      "credentials: 'include' cross-origin",
      fetchFacts('https://cdn.example/movie.mp4', { credentials: 'include', headers: [['Range', 'bytes=0-1']] }),
      'credentials',
    ],
    ['Authorization header', xhr(seg, { headers: [['Authorization', 'Bearer x']] }), 'authorization'],
    ['a custom header', xhr(seg, { headers: [['X-Token', 'abc']] }), 'headers'],
    ["responseType 'document'", xhr(seg, { responseType: 'document' }), 'response-type'],
    ["mode 'no-cors'", fetchFacts(seg, { mode: 'no-cors' }), 'no-cors'],
    // Issue 9, finding 10: what the network itself would refuse or treat differently.
    [
      "mode 'same-origin' to another origin",
      fetchFacts('https://cdn.example/movie.mp4', { mode: 'same-origin', headers: [['Range', 'bytes=0-1']] }),
      'same-origin-mode',
    ],
    ["redirect 'error'", fetchFacts(seg, { redirect: 'error' }), 'redirect'],
    ["redirect 'manual'", fetchFacts(seg, { redirect: 'manual' }), 'redirect'],
    [
      'user:pass@ in the URL',
      xhr('https://u:p@site.example/v/seg-0.m4s', { headers: [['Range', 'bytes=0-1']] }),
      'credentials',
    ],
    [
      'a user name alone in the URL',
      fetchFacts('https://u@cdn.example/a.mp4', { headers: [['Range', 'bytes=0-1']] }),
      'credentials',
    ],
    ['subresource integrity', fetchFacts(seg, { integrity: 'sha256-abc' }), 'integrity'],
    ["cache 'only-if-cached'", fetchFacts(seg, { cache: 'only-if-cached' }), 'cache-mode'],
    ['a multipart range', xhr(seg, { headers: [['Range', 'bytes=0-1,5-9']] }), 'multi-range'],
    ['an invalid range', xhr(seg, { headers: [['Range', 'bytes=9-1']] }), 'bad-range'],
  ];
  test.each(cases)('%s', (_name, facts, reason) => {
    expect(decide(facts, context())).toEqual({ intercept: false, media: true, reason, match: expect.any(String) });
  });

  test("credentials: 'include' on the page's own origin is fine (cookies go there anyway)", () => {
    expect(decide(fetchFacts(seg, { credentials: 'include' }), context())).toMatchObject({ intercept: true });
  });

  test("mode 'same-origin' on the page's own origin and redirect 'follow' are fine", () => {
    expect(decide(fetchFacts(seg, { mode: 'same-origin', redirect: 'follow' }), context())).toMatchObject({
      intercept: true,
    });
  });

  test('replayable headers are fine', () => {
    const headers: [string, string][] = [
      ['Accept', '*/*'],
      ['Accept-Language', 'en'],
      ['Cache-Control', 'no-cache'],
      ['Range', 'bytes=0-10'],
    ];
    expect(decide(xhr(seg, { headers }), context())).toMatchObject({ intercept: true });
  });

  test('before the configuration arrives, and when switched off globally or for the site', () => {
    const unconfigured = { ...context(), config: undefined };
    expect(decide(xhr(seg), unconfigured)).toMatchObject({ intercept: false, media: true, reason: 'not-ready' });
    expect(decide(xhr(seg), context({ ...config, enabled: false, disabledReason: 'disabled' }))).toMatchObject({
      reason: 'disabled',
    });
    expect(decide(xhr(seg), context({ ...config, enabled: false, disabledReason: 'site-disabled' }))).toMatchObject({
      reason: 'site-disabled',
    });
  });

  test('before the configuration, not-ready means only the settings are missing: other obstacles say what they are', () => {
    const unconfigured = { ...context(), config: undefined };
    const ranged = xhr(seg, { headers: [['Range', 'bytes=0-10']] });
    expect(decide(ranged, unconfigured)).toMatchObject({ intercept: false, media: true, reason: 'not-ready' });
    expect(decide(xhr(seg, { sync: true }), unconfigured)).toMatchObject({ media: true, reason: 'sync' });
    expect(decide(xhr(seg, { method: 'POST' }), unconfigured)).toMatchObject({ media: true, reason: 'method' });
    expect(decide(fetchFacts(seg, { integrity: 'sha256-x' }), unconfigured)).toMatchObject({ reason: 'integrity' });
    expect(decide(xhr(seg, { headers: [['Range', 'bytes=0-1,4-5']] }), unconfigured)).toMatchObject({
      reason: 'multi-range',
    });
    // Once configured the switch comes first, as it always did.
    const off = context({ ...config, enabled: false, disabledReason: 'disabled' });
    expect(decide(xhr(seg, { sync: true }), off)).toMatchObject({ reason: 'disabled' });
  });
});

describe('compilePatterns', () => {
  test('globs match the whole URL; regexes as written; invalid ones match nothing', () => {
    const p = compilePatterns([
      '*://*/videoplayback?*range=*',
      '/^https:\\/\\/x\\.example\\/seg\\d+$/i',
      '/[unclosed/',
      '',
    ]);
    expect(p.test('https://a.example/videoplayback?id=1&range=0-99')).toBe(true);
    expect(p.test('https://a.example/videoplayback?id=1')).toBe(false);
    expect(p.test('https://a.example/not/videoplayback?range=0-1x')).toBe(true);
    expect(p.test('HTTPS://X.EXAMPLE/SEG12')).toBe(true);
    expect(p.test('https://x.example/seg12/extra')).toBe(false);
    // glob metacharacters other than * are literal
    expect(compilePatterns(['https://a.example/v.mp4?x=1']).test('https://a.example/vXmp4?x=1')).toBe(false);
  });
});
