/**
 * Issue 31: the content script's decision whether the proxies (and the consent HEAD) may fetch a
 * URL for the page, from the page's meta CSP, the browser's `connect-src` refusals and the
 * origins the page's own fetch/XHR reached. e2e/test/csp.browser.test.ts shows it in Chromium.
 */
import { CSP_LIMITS, PageConnectGate } from '../src/content/csp-gate';

const PAGE = 'https://site.example';

function gate(): PageConnectGate {
  return new PageConnectGate(new URL(`${PAGE}/watch`), PAGE);
}

describe('PageConnectGate', () => {
  test('same-origin URLs pass when no policy is known; cross-origin ones only once the page reached the origin', () => {
    const g = gate();
    expect(g.verdict(`${PAGE}/v/a.m4s`)).toEqual({ ok: true });
    expect(g.verdict('https://cdn.example/v/a.m4s')).toEqual({ ok: false, reason: 'csp-unseen' });
    g.noteReached('https://cdn.example/v/master.m3u8', 'fetch');
    expect(g.verdict('https://cdn.example/v/a.m4s')).toEqual({ ok: true });
    expect(g.verdict('http://cdn.example/v/a.m4s')).toEqual({ ok: false, reason: 'csp-unseen' }); // another origin
  });

  test('only connect-src requests (fetch, XHR, beacon) show an origin is allowed', () => {
    const g = gate();
    for (const type of ['img', 'script', 'link', 'css', 'video', 'iframe', 'other', 'navigation']) {
      g.noteReached(`https://${type}.example/x`, type);
      expect(g.verdict(`https://${type}.example/a.ts`)).toEqual({ ok: false, reason: 'csp-unseen' });
    }
    g.noteReached('https://x.example/a', 'xmlhttprequest');
    g.noteReached('https://y.example/b', 'beacon');
    expect([g.verdict('https://x.example/1').ok, g.verdict('https://y.example/2').ok]).toEqual([true, true]);
  });

  test('a meta policy refuses what its connect-src does not list, same-origin and seen origins included', () => {
    const g = gate();
    g.noteReached('https://cdn.example/v/master.m3u8', 'fetch');
    g.noteReached('https://evil.example/pixel', 'fetch');
    g.addMetaPolicy("default-src 'self'; connect-src https://cdn.example/v/");
    expect(g.verdict('https://cdn.example/v/a.m4s')).toEqual({ ok: true });
    expect(g.verdict('https://cdn.example/other/a.m4s')).toEqual({ ok: false, reason: 'csp' });
    expect(g.verdict('https://evil.example/a.m4s?secret=1')).toEqual({ ok: false, reason: 'csp' });
    expect(g.verdict(`${PAGE}/v/a.m4s`)).toEqual({ ok: false, reason: 'csp' }); // no 'self' in connect-src
  });

  test('every meta policy is enforced: a second one narrows, never widens', () => {
    const g = gate();
    g.noteReached('https://a.example/x', 'fetch');
    g.noteReached('https://b.example/x', 'fetch');
    g.addMetaPolicy('connect-src https://a.example https://b.example');
    g.addMetaPolicy('connect-src https://b.example https://c.example');
    expect(g.verdict('https://a.example/s.ts').ok).toBe(false);
    expect(g.verdict('https://b.example/s.ts').ok).toBe(true);
    g.addMetaPolicy('connect-src *'); // a later, wider policy changes nothing
    expect(g.verdict('https://a.example/s.ts').ok).toBe(false);
  });

  test("connect-src 'none' refuses everything", () => {
    const g = gate();
    g.addMetaPolicy("connect-src 'none'");
    expect(g.verdict(`${PAGE}/a.ts`)).toEqual({ ok: false, reason: 'csp' });
  });

  test('an enforced connect-src violation marks its origin; report-only and other directives do not', () => {
    const g = gate();
    g.noteReached('https://cdn.example/master.m3u8', 'fetch');
    g.noteViolation({ blockedURI: 'https://cdn.example/x', effectiveDirective: 'connect-src', disposition: 'report' });
    g.noteViolation({ blockedURI: 'https://cdn.example/x', effectiveDirective: 'img-src', disposition: 'enforce' });
    g.noteViolation({ blockedURI: 'inline', effectiveDirective: 'connect-src', disposition: 'enforce' });
    expect(g.verdict('https://cdn.example/a.ts')).toEqual({ ok: true });
    g.noteViolation({ blockedURI: 'https://cdn.example/x', effectiveDirective: 'connect-src', disposition: 'enforce' });
    expect(g.verdict('https://cdn.example/a.ts')).toEqual({ ok: false, reason: 'csp' });
    g.noteViolation({ blockedURI: `${PAGE}/api`, effectiveDirective: 'connect-src', disposition: 'enforce' });
    expect(g.verdict(`${PAGE}/a.ts`)).toEqual({ ok: false, reason: 'csp' });
  });

  test('a page that floods it with policies or refusals gets every URL refused (bounded, fails closed)', () => {
    const g = gate();
    for (let i = 0; i < CSP_LIMITS.metaPolicies; i++) g.addMetaPolicy(`connect-src * https://${i}.example`);
    expect(g.verdict(`${PAGE}/a.ts`)).toEqual({ ok: true });
    g.addMetaPolicy('connect-src * https://one-too-many.example');
    expect(g.verdict(`${PAGE}/a.ts`)).toEqual({ ok: false, reason: 'csp' });

    const h = gate();
    for (let i = 0; i <= CSP_LIMITS.origins; i++) {
      h.noteViolation({
        blockedURI: `https://${i}.example/`,
        effectiveDirective: 'connect-src',
        disposition: 'enforce',
      });
    }
    expect(h.verdict(`${PAGE}/a.ts`)).toEqual({ ok: false, reason: 'csp' });
  });

  test('the origins learnt are bounded: past the bound new ones stay unseen', () => {
    const g = gate();
    for (let i = 0; i < CSP_LIMITS.origins + 10; i++) g.noteReached(`https://${i}.example/x`, 'fetch');
    expect(g.verdict('https://0.example/a.ts').ok).toBe(true);
    expect(g.verdict(`https://${CSP_LIMITS.origins + 5}.example/a.ts`)).toEqual({ ok: false, reason: 'csp-unseen' });
  });

  test('a sandboxed page (origin "null") has no same-origin exemption', () => {
    const g = new PageConnectGate(new URL(`${PAGE}/frame`), 'null');
    expect(g.verdict(`${PAGE}/a.ts`)).toEqual({ ok: false, reason: 'csp-unseen' });
  });

  test('an unparsable URL is refused', () => {
    expect(gate().verdict('not a url')).toEqual({ ok: false, reason: 'csp' });
  });
});
