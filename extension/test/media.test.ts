import {
  contentRange,
  formatRange,
  guessContentType,
  manifestHint,
  normalizeUrl,
  parseRangeHeader,
  resolveRange,
  sniffManifest,
} from '../src/common/media';

describe('parseRangeHeader', () => {
  test.each([
    ['bytes=0-499', { kind: 'from', start: 0, end: 499 }],
    ['bytes=500-', { kind: 'from', start: 500 }],
    ['bytes=-500', { kind: 'suffix', length: 500 }],
    [' Bytes = 10 - 20 ', { kind: 'from', start: 10, end: 20 }],
    ['bytes=0-0', { kind: 'from', start: 0, end: 0 }],
    ['bytes=7-7,', { kind: 'from', start: 7, end: 7 }],
  ])('%s', (header, range) => {
    expect(parseRangeHeader(header)).toEqual({ ok: true, range });
  });

  test.each([
    ['bytes=0-1,4-5', 'multi-range'],
    ['bytes=0-1, -5', 'multi-range'],
    ['bytes=5-1', 'bad-range'],
    ['bytes=-', 'bad-range'],
    ['bytes=', 'bad-range'],
    ['items=0-1', 'bad-range'],
    ['bytes=a-b', 'bad-range'],
    ['bytes=1.5-2', 'bad-range'],
    ['bytes=99999999999999999999-', 'bad-range'],
    ['0-100', 'bad-range'],
  ])('%s is refused (%s)', (header, reason) => {
    expect(parseRangeHeader(header)).toEqual({ ok: false, reason });
  });
});

describe('resolveRange (RFC 9110 §14.1.2)', () => {
  test('a closed range, clamped to the object', () => {
    expect(resolveRange({ kind: 'from', start: 0, end: 99 }, 1000)).toEqual({ start: 0, end: 99 });
    expect(resolveRange({ kind: 'from', start: 900, end: 5000 }, 1000)).toEqual({ start: 900, end: 999 });
  });
  test('open-ended and suffix ranges', () => {
    expect(resolveRange({ kind: 'from', start: 10 }, 1000)).toEqual({ start: 10, end: 999 });
    expect(resolveRange({ kind: 'suffix', length: 100 }, 1000)).toEqual({ start: 900, end: 999 });
    expect(resolveRange({ kind: 'suffix', length: 5000 }, 1000)).toEqual({ start: 0, end: 999 });
  });
  test('unsatisfiable ranges', () => {
    expect(resolveRange({ kind: 'from', start: 1000 }, 1000)).toBeNull();
    expect(resolveRange({ kind: 'suffix', length: 0 }, 1000)).toBeNull();
    expect(resolveRange({ kind: 'from', start: 0 }, 0)).toBeNull();
  });
  test('Content-Range and the header form', () => {
    expect(contentRange(0, 99, 1000)).toBe('bytes 0-99/1000');
    expect(formatRange({ kind: 'from', start: 5 })).toBe('bytes=5-');
    expect(formatRange({ kind: 'from', start: 5, end: 9 })).toBe('bytes=5-9');
    expect(formatRange({ kind: 'suffix', length: 3 })).toBe('bytes=-3');
  });
});

describe('URLs and types', () => {
  test('normalizeUrl resolves and drops the fragment', () => {
    expect(normalizeUrl('../a/b.ts?x=1#t=5', 'https://h.example/v/p/index.m3u8')).toBe(
      'https://h.example/v/a/b.ts?x=1',
    );
    expect(normalizeUrl('not a url')).toBeUndefined();
  });
  test('content types from the path', () => {
    expect(guessContentType('https://h/a/seg.ts?x=.mp4')).toBe('video/mp2t');
    expect(guessContentType('https://h/a/seg.M4S')).toBe('video/iso.segment');
    expect(guessContentType('https://h/a/v.webm')).toBe('video/webm');
    expect(guessContentType('https://h/videoplayback?range=0-1')).toBe('application/octet-stream');
  });
  test('manifest hints and sniffing', () => {
    expect(manifestHint('https://h/x.m3u8?a=1', null)).toBe('hls');
    expect(manifestHint('https://h/x', 'application/vnd.apple.mpegurl')).toBe('hls');
    expect(manifestHint('https://h/x', 'application/dash+xml; charset=utf-8')).toBe('dash');
    expect(manifestHint('https://h/x.mpd', null)).toBe('dash');
    expect(manifestHint('https://h/x.json', 'application/json')).toBeUndefined();
    expect(sniffManifest('\uFEFF#EXTM3U\n')).toBe('hls');
    expect(sniffManifest('<?xml version="1.0"?>\n<!-- x -->\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011">')).toBe(
      'dash',
    );
    expect(sniffManifest('<html><MPD>')).toBeUndefined();
  });
});
