import { parsePlaylist, PlaylistError } from '../src/playlist';

test('an HLS media playlist: URIs resolved against its URL, byte ranges kept', () => {
  const text = [
    '#EXTM3U',
    '#EXT-X-VERSION:4',
    '#EXT-X-TARGETDURATION:4',
    '#EXTINF:4.0,',
    'seg-0.ts',
    '#EXTINF:4.0,',
    '#EXT-X-BYTERANGE:1000@0',
    'all.ts',
    '#EXTINF:4.0,',
    '#EXT-X-BYTERANGE:500',
    'all.ts',
    '#EXTINF:4.0,',
    'https://cdn.example/other/seg-3.ts',
    '#EXT-X-ENDLIST',
  ].join('\n');
  expect(parsePlaylist(text, 'https://media.example/v/index.m3u8')).toEqual([
    { url: 'https://media.example/v/seg-0.ts' },
    { url: 'https://media.example/v/all.ts', range: { start: 0, length: 1000 } },
    { url: 'https://media.example/v/all.ts', range: { start: 1000, length: 500 } },
    { url: 'https://cdn.example/other/seg-3.ts' },
  ]);
});

test('a list of URLs, one per line, comments and blank lines skipped', () => {
  expect(parsePlaylist('# list\nhttp://o.example/a\n\n  http://o.example/b  \n')).toEqual([
    { url: 'http://o.example/a' },
    { url: 'http://o.example/b' },
  ]);
});

test('what cannot be downloaded is refused with the reason', () => {
  const master = '#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nlow/index.m3u8\n';
  expect(() => parsePlaylist(master, 'https://m.example/master.m3u8')).toThrow(/master playlist.*low\/index\.m3u8/);
  expect(() => parsePlaylist('seg-0.ts\n')).toThrow(PlaylistError);
  expect(() => parsePlaylist('seg-0.ts\n')).toThrow(/not an absolute URL/);
  expect(() => parsePlaylist('file:///etc/passwd\n')).toThrow(/only http\(s\)/);
  expect(() => parsePlaylist('# nothing\n')).toThrow(/no segment/);
  expect(() => parsePlaylist('#EXTM3U\n#EXT-X-ENDLIST\n')).toThrow(/no segment/);
});
