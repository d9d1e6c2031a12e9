/**
 * Issue 31: the page's CSP `connect-src` as the content script reads it. Parsing (CSP Level 3
 * "parse a serialized CSP") and source-list matching: 'self', 'none', schemes and their secure
 * upgrade, host wildcards, ports, paths, and the fallback to `default-src`.
 */
import {
  connectSources,
  parseMetaPolicies,
  parsePolicy,
  policyAllowsConnect,
  sourceListMatches,
} from '../src/content/csp-policy';

const HTTPS_PAGE = new URL('https://site.example/watch?v=1');
const HTTP_PAGE = new URL('http://site.example:8080/watch');

function allows(sources: string, url: string, self = HTTPS_PAGE): boolean {
  return sourceListMatches(sources.split(' ').filter(Boolean), new URL(url), self);
}

describe('parsePolicy', () => {
  test('directives split on ";", names case-insensitive, values on whitespace', () => {
    const p = parsePolicy("  Default-Src 'self' ;connect-src\thttps://cdn.example  *.media.example ;; img-src *");
    expect([...p.entries()]).toEqual([
      ['default-src', ["'self'"]],
      ['connect-src', ['https://cdn.example', '*.media.example']],
      ['img-src', ['*']],
    ]);
  });

  test('the first of a repeated directive wins', () => {
    expect(parsePolicy("connect-src 'none'; connect-src *").get('connect-src')).toEqual(["'none'"]);
  });

  test('a token with a non-ASCII character is skipped as a whole (then default-src governs)', () => {
    const p = parsePolicy("default-src 'none'; connect-src https://cdn.exämple");
    expect(p.has('connect-src')).toBe(false);
    expect(connectSources(p)).toEqual(["'none'"]);
  });

  test('a directive with no value is an empty source list, which matches nothing', () => {
    const p = parsePolicy('connect-src');
    expect(p.get('connect-src')).toEqual([]);
    expect(policyAllowsConnect(p, new URL('https://site.example/a.ts'), HTTPS_PAGE)).toBe(false);
  });

  test('a meta content with a comma is read both ways (one policy, and one per part)', () => {
    const readings = parseMetaPolicies('connect-src https://a.example, connect-src https://b.example');
    expect(readings).toHaveLength(3);
    const url = new URL('https://a.example/x.ts');
    // One reading allows a.example (the second part), another does not: the gate needs all.
    expect(readings.map((p) => policyAllowsConnect(p, url, HTTPS_PAGE))).toEqual([false, true, false]);
  });
});

describe('connect-src and default-src', () => {
  test('connect-src governs fetches; without it default-src; without both anything goes', () => {
    const url = new URL('https://cdn.example/seg.m4s');
    expect(
      policyAllowsConnect(parsePolicy("default-src 'self'; connect-src https://cdn.example"), url, HTTPS_PAGE),
    ).toBe(true);
    expect(policyAllowsConnect(parsePolicy("default-src 'self'"), url, HTTPS_PAGE)).toBe(false);
    expect(policyAllowsConnect(parsePolicy("img-src 'none'; script-src 'self'"), url, HTTPS_PAGE)).toBe(true);
    expect(policyAllowsConnect(parsePolicy("connect-src 'self'; default-src *"), url, HTTPS_PAGE)).toBe(false);
  });
});

describe('source-list matching', () => {
  test("'none' alone matches nothing; beside other sources it is ignored", () => {
    expect(allows("'none'", 'https://site.example/a.ts')).toBe(false);
    expect(allows("'NONE'", 'https://site.example/a.ts')).toBe(false);
    expect(allows("'none' https://cdn.example", 'https://cdn.example/a.ts')).toBe(true);
  });

  test("'self' is the page's origin and its secure upgrade", () => {
    expect(allows("'self'", 'https://site.example/v/a.ts')).toBe(true);
    expect(allows("'self'", 'https://other.example/a.ts')).toBe(false);
    expect(allows("'self'", 'https://sub.site.example/a.ts')).toBe(false);
    expect(allows("'self'", 'https://site.example:8443/a.ts')).toBe(false);
    expect(allows("'self'", 'http://site.example/a.ts')).toBe(false); // a downgrade
    expect(allows("'self'", 'http://site.example:8080/a.ts', HTTP_PAGE)).toBe(true);
    expect(allows("'self'", 'https://site.example:8080/a.ts', HTTP_PAGE)).toBe(true); // upgrade, same port
    expect(allows("'self'", 'http://site.example:8081/a.ts', HTTP_PAGE)).toBe(false);
  });

  test('"*" matches http(s) URLs of any host', () => {
    expect(allows('*', 'https://anything.example/a.ts')).toBe(true);
    expect(allows('*', 'http://10.0.0.1:9000/a.ts')).toBe(true);
  });

  test('scheme sources, with http: admitting https: but not the reverse', () => {
    expect(allows('https:', 'https://evil.example/a.ts')).toBe(true);
    expect(allows('https:', 'http://evil.example/a.ts')).toBe(false);
    expect(allows('http:', 'https://evil.example/a.ts')).toBe(true);
    expect(allows('HTTPS:', 'https://evil.example/a.ts')).toBe(true);
    expect(allows('data:', 'https://evil.example/a.ts')).toBe(false);
  });

  test('host wildcards are subdomains only', () => {
    expect(allows('*.cdn.example', 'https://a.cdn.example/x.ts')).toBe(true);
    expect(allows('*.cdn.example', 'https://a.b.cdn.example/x.ts')).toBe(true);
    expect(allows('*.cdn.example', 'https://cdn.example/x.ts')).toBe(false);
    expect(allows('*.cdn.example', 'https://evilcdn.example/x.ts')).toBe(false);
    expect(allows('https://*', 'https://any.example/x.ts')).toBe(true);
    expect(allows('CDN.Example', 'https://cdn.example/x.ts')).toBe(true);
  });

  test('a scheme-less host source takes the page scheme (and its upgrade)', () => {
    expect(allows('cdn.example', 'https://cdn.example/x.ts')).toBe(true);
    expect(allows('cdn.example', 'http://cdn.example/x.ts')).toBe(false); // https page
    expect(allows('cdn.example', 'http://cdn.example/x.ts', HTTP_PAGE)).toBe(true);
    expect(allows('cdn.example', 'https://cdn.example/x.ts', HTTP_PAGE)).toBe(true);
    expect(allows('http://cdn.example', 'https://cdn.example/x.ts')).toBe(true);
    expect(allows('https://cdn.example', 'http://cdn.example/x.ts')).toBe(false);
  });

  test('ports: none means the default, * any, a number that port', () => {
    expect(allows('https://cdn.example', 'https://cdn.example:8443/x.ts')).toBe(false);
    expect(allows('https://cdn.example:*', 'https://cdn.example:8443/x.ts')).toBe(true);
    expect(allows('https://cdn.example:8443', 'https://cdn.example:8443/x.ts')).toBe(true);
    expect(allows('https://cdn.example:8443', 'https://cdn.example:9443/x.ts')).toBe(false);
    expect(allows('https://cdn.example:443', 'https://cdn.example/x.ts')).toBe(true);
    expect(allows('http://127.0.0.1:8000', 'http://127.0.0.1:8000/x.ts')).toBe(true);
    expect(allows('http://127.0.0.1:8000', 'http://localhost:8000/x.ts')).toBe(false);
  });

  test('paths: a trailing slash is a prefix of whole segments, otherwise exact', () => {
    expect(allows('https://cdn.example/video/', 'https://cdn.example/video/a/b.ts')).toBe(true);
    expect(allows('https://cdn.example/video/', 'https://cdn.example/videos/b.ts')).toBe(false);
    expect(allows('https://cdn.example/video/', 'https://cdn.example/other?video/')).toBe(false);
    expect(allows('https://cdn.example/video/a.ts', 'https://cdn.example/video/a.ts?x=1')).toBe(true);
    expect(allows('https://cdn.example/video/a.ts', 'https://cdn.example/video/a.tsx')).toBe(false);
    expect(allows('https://cdn.example/v%69deo/', 'https://cdn.example/video/a.ts')).toBe(true);
    expect(allows('https://cdn.example/%zz/', 'https://cdn.example/%zz/a.ts')).toBe(false);
  });

  test('nonces, hashes and keywords never match a URL', () => {
    for (const s of ["'nonce-abc'", "'sha256-abc='", "'unsafe-inline'", "'strict-dynamic'", 'not a source', '//x']) {
      expect(allows(s, 'https://site.example/a.ts')).toBe(false);
    }
  });
});
