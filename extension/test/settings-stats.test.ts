import { emptyCounters, sanitizeCounters, sumCounters, totalFallbacks } from '../src/common/counters';
import { SegmentRecord } from '../src/common/messages';
import { DEFAULT_SETTINGS, normalizeSettings, siteEnabled } from '../src/common/settings';
import { applyCounters, applySegment, emptyTab, MAX_SEGMENTS, tabCounters } from '../src/common/stats';

describe('settings', () => {
  test('defaults for anything missing', () => {
    expect(normalizeSettings(undefined)).toEqual({ ...DEFAULT_SETTINGS });
    expect(normalizeSettings({ mode: 'fountain' })).toEqual({ ...DEFAULT_SETTINGS, mode: 'fountain' });
    expect(DEFAULT_SETTINGS).toMatchObject({
      origoUrl: 'ws://127.0.0.1:8700/v1/client',
      mode: 'rlnc',
      proxies: 4,
      enabled: true,
    });
  });

  test('out-of-range and wrong-typed values are clamped or replaced', () => {
    const s = normalizeSettings({
      enabled: 'yes',
      origoUrl: 'http://origo.example/v1/client',
      mode: 'quantum',
      transport: 'carrier-pigeon',
      proxies: 1000,
      deadlineMs: '2500',
      concurrency: 0,
      disabledSites: ['Example.COM.', 'example.com', 42, ''],
      urlPatterns: 'not a list',
    });
    expect(s).toMatchObject({
      enabled: true,
      origoUrl: DEFAULT_SETTINGS.origoUrl,
      mode: 'rlnc',
      transport: 'auto',
      proxies: 32,
      deadlineMs: 2500,
      concurrency: 1,
      disabledSites: ['example.com'],
      urlPatterns: DEFAULT_SETTINGS.urlPatterns,
    });
    expect(['auto', 'quic', 'webrtc'].map((transport) => normalizeSettings({ transport }).transport)).toEqual([
      'auto',
      'quic',
      'webrtc',
    ]);
    expect(normalizeSettings({ origoUrl: 'wss://origo.example:443/v1/client' }).origoUrl).toBe(
      'wss://origo.example/v1/client',
    );
  });

  test('the per-site switch covers subdomains', () => {
    const s = normalizeSettings({ disabledSites: ['example.com'] });
    expect(siteEnabled(s, 'example.com')).toBe(false);
    expect(siteEnabled(s, 'www.Example.com')).toBe(false);
    expect(siteEnabled(s, 'notexample.com')).toBe(true);
    expect(siteEnabled(s, 'example.org')).toBe(true);
  });
});

describe('counters', () => {
  test('sum and sanitize', () => {
    const a = { ...emptyCounters(), media: 3, served: 2, fallbacks: { timeout: 1 } };
    const b = { ...emptyCounters(), media: 1, fallbacks: { timeout: 2, 'no-proxies': 1 } };
    expect(sumCounters([a, b])).toMatchObject({ media: 4, served: 2, fallbacks: { timeout: 3, 'no-proxies': 1 } });
    expect(totalFallbacks(sumCounters([a, b]))).toBe(4);
    expect(sanitizeCounters({ media: -1, served: 'x', fallbacks: { ok: 2, 'Bad Reason!': 1, zero: 0 } })).toMatchObject(
      {
        media: 0,
        served: 0,
        fallbacks: { ok: 2 },
      },
    );
  });
});

describe('tab statistics', () => {
  const record = (n: number, more: Partial<SegmentRecord> = {}): SegmentRecord => ({
    at: n,
    url: `https://cdn.example/${n}.ts`,
    ok: true,
    mode: 'rlnc',
    bytes: 1000,
    objectBytes: 1000,
    durationMs: 10,
    totalMs: 12,
    goodputBps: 100_000,
    normalizedGoodput: 0.9,
    cached: false,
    proxies: [
      { name: 'a', proxyId: 'a', share: 0.6, useful: 6 },
      { name: 'b', proxyId: 'b', share: 0.4, useful: 4 },
    ],
    ...more,
  });

  test('frames add up; a new top-level document starts the tab afresh', () => {
    let tab = emptyTab(7);
    tab = applyCounters(tab, { session: 'top1', top: true, pageUrl: 'https://a/', counters: { media: 2 } }, 1);
    tab = applyCounters(tab, { session: 'frame', top: false, pageUrl: 'https://b/', counters: { media: 3 } }, 2);
    tab = applyCounters(tab, { session: 'top1', top: true, pageUrl: 'https://a/', counters: { media: 4 } }, 3);
    expect(tabCounters(tab).media).toBe(7);
    expect(tab.pageUrl).toBe('https://a/');
    tab = applySegment(tab, record(1), 4);
    tab = applyCounters(tab, { session: 'top2', top: true, pageUrl: 'https://c/', counters: { media: 1 } }, 5);
    expect(tabCounters(tab).media).toBe(1);
    expect(tab.segments).toEqual([]);
    expect(tab.pageUrl).toBe('https://c/');
  });

  test('segments are bounded; per-proxy totals weight bytes by share; cache hits and failures add no proxy bytes', () => {
    let tab = emptyTab(1);
    for (let i = 0; i < MAX_SEGMENTS + 5; i++) tab = applySegment(tab, record(i), i);
    tab = applySegment(tab, record(999, { cached: true }), 1000);
    tab = applySegment(tab, record(1000, { ok: false, reason: 'timeout' }), 1001);
    expect(tab.segments).toHaveLength(MAX_SEGMENTS);
    expect(tab.segments[tab.segments.length - 1].reason).toBe('timeout');
    expect(tab.proxies.a).toEqual({ name: 'a', downloads: MAX_SEGMENTS + 5, bytes: 600 * (MAX_SEGMENTS + 5) });
    expect(tab.proxies.b.bytes).toBe(400 * (MAX_SEGMENTS + 5));
  });
});
