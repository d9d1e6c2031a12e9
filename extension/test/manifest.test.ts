import { extractDash, extractHls, extractManifest, SegmentRegistry } from '../src/hook/manifest';

const HLS_MEDIA = `#EXTM3U
#EXT-X-VERSION:7
#EXT-X-TARGETDURATION:4
#EXT-X-MEDIA-SEQUENCE:0
#EXT-X-MAP:URI="init.mp4"
#EXT-X-KEY:METHOD=AES-128,URI="https://keys.example/k1"
#EXTINF:4.000,
seg-0.m4s
#EXTINF:4.000,
/abs/seg-1.m4s?token=a%20b#frag
#EXTINF:3.5,
https://cdn.example.net/other/seg-2.m4s
#EXT-X-ENDLIST
`;

const HLS_BYTERANGE = `#EXTM3U
#EXT-X-VERSION:4
#EXT-X-TARGETDURATION:4
#EXT-X-MAP:URI="main.mp4",BYTERANGE="720@0"
#EXTINF:4.0,
#EXT-X-BYTERANGE:1000@720
main.mp4
#EXTINF:4.0,
#EXT-X-BYTERANGE:2000
main.mp4
#EXT-X-ENDLIST
`;

const HLS_MASTER = `#EXTM3U
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",DEFAULT=YES,URI="audio/en.m3u8"
#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aud"
low/index.m3u8
#EXT-X-STREAM-INF:BANDWIDTH=2400000,RESOLUTION=1280x720,AUDIO="aud"
https://cdn.example.net/hi/index.m3u8
#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI="iframes.m3u8"
`;

const DASH_TEMPLATE = `<?xml version="1.0" encoding="UTF-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT8S" minBufferTime="PT2S"
     profiles="urn:mpeg:dash:profile:isoff-live:2011">
  <BaseURL>https://cdn.example.com/v/</BaseURL>
  <Period id="0" start="PT0S">
    <AdaptationSet mimeType="video/mp4" contentType="video">
      <SegmentTemplate timescale="1000" duration="4000" initialization="init-$RepresentationID$.m4s"
                       media="chunk-$RepresentationID$-$Number%05d$.m4s" startNumber="1"/>
      <Representation id="v0" bandwidth="800000" width="640" height="360" codecs="avc1.64001e"/>
    </AdaptationSet>
    <AdaptationSet mimeType="audio/mp4" contentType="audio" lang="en">
      <Representation id="a0" bandwidth="128000" codecs="mp4a.40.2">
        <BaseURL>audio/</BaseURL>
        <SegmentList duration="4">
          <Initialization sourceURL="a-init.mp4"/>
          <SegmentURL media="a1.m4s"/>
          <SegmentURL media="big.mp4" mediaRange="100-199"/>
        </SegmentList>
      </Representation>
    </AdaptationSet>
  </Period>
</MPD>`;

const DASH_TIMELINE_AND_BASE = `<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT10S" minBufferTime="PT2S">
  <Period id="0">
    <AdaptationSet mimeType="video/webm">
      <Representation id="v0" bandwidth="800000" width="640" height="360" codecs="vp9">
        <BaseURL>video-360.webm</BaseURL>
        <SegmentBase indexRange="500-899"><Initialization range="0-499"/></SegmentBase>
      </Representation>
      <Representation id="v1" bandwidth="1800000" width="1280" height="720" codecs="vp9">
        <BaseURL>video-720.webm</BaseURL>
      </Representation>
    </AdaptationSet>
    <AdaptationSet mimeType="video/mp4">
      <SegmentTemplate timescale="90000" initialization="$RepresentationID$/init.mp4" media="$RepresentationID$/$Time$.m4s">
        <SegmentTimeline><S t="0" d="360000" r="1"/><S d="180000"/></SegmentTimeline>
      </SegmentTemplate>
      <Representation id="hi" bandwidth="3000000" width="1920" height="1080" codecs="avc1.640028"/>
    </AdaptationSet>
  </Period>
</MPD>`;

const urls = (segments: { url: string }[]) => segments.map((s) => s.url);

describe('HLS', () => {
  test('media playlist: segments resolved against the playlist URL, init segment, no keys, no fragments', () => {
    const info = extractHls(HLS_MEDIA, 'https://site.example/video/stream/index.m3u8?sig=1');
    expect(info.kind).toBe('hls');
    expect(info.manifests).toEqual([]);
    expect(info.segments).toEqual([
      { url: 'https://site.example/video/stream/init.mp4', kind: 'init', track: 0 },
      { url: 'https://site.example/video/stream/seg-0.m4s', kind: 'media', duration: 4, track: 0 },
      { url: 'https://site.example/abs/seg-1.m4s?token=a%20b', kind: 'media', duration: 4, track: 0 },
      { url: 'https://cdn.example.net/other/seg-2.m4s', kind: 'media', duration: 3.5, track: 0 },
    ]);
  });

  test('EXT-X-BYTERANGE: offsets follow on from the previous range; the init segment has its own', () => {
    const info = extractHls(HLS_BYTERANGE, 'http://127.0.0.1:8080/hls/br.m3u8');
    expect(info.segments).toEqual([
      { url: 'http://127.0.0.1:8080/hls/main.mp4', kind: 'init', byteRange: { offset: 0, length: 720 }, track: 0 },
      {
        url: 'http://127.0.0.1:8080/hls/main.mp4',
        kind: 'media',
        duration: 4,
        byteRange: { offset: 720, length: 1000 },
        track: 0,
      },
      {
        url: 'http://127.0.0.1:8080/hls/main.mp4',
        kind: 'media',
        duration: 4,
        byteRange: { offset: 1720, length: 2000 },
        track: 0,
      },
    ]);
  });

  test('master playlist: no segments, the variant, rendition and I-frame playlists as manifests', () => {
    const info = extractHls(HLS_MASTER, 'https://site.example/master.m3u8');
    expect(info.segments).toEqual([]);
    expect(info.manifests.sort()).toEqual(
      [
        'https://cdn.example.net/hi/index.m3u8',
        'https://site.example/audio/en.m3u8',
        'https://site.example/iframes.m3u8',
        'https://site.example/low/index.m3u8',
      ].sort(),
    );
  });
});

describe('DASH', () => {
  test('SegmentTemplate ($Number$) with an MPD BaseURL, SegmentList with mediaRange and a Representation BaseURL', () => {
    const info = extractDash(DASH_TEMPLATE, 'https://site.example/m/stream.mpd');
    expect(info.kind).toBe('dash');
    expect(info.segments).toEqual(
      expect.arrayContaining([
        { url: 'https://cdn.example.com/v/init-v0.m4s', kind: 'init', track: 0 },
        { url: 'https://cdn.example.com/v/chunk-v0-00001.m4s', kind: 'media', duration: 4, track: 0 },
        { url: 'https://cdn.example.com/v/chunk-v0-00002.m4s', kind: 'media', duration: 4, track: 0 },
        { url: 'https://cdn.example.com/v/audio/a-init.mp4', kind: 'init', track: 1 },
        { url: 'https://cdn.example.com/v/audio/a1.m4s', kind: 'media', duration: 4, track: 1 },
        {
          url: 'https://cdn.example.com/v/audio/big.mp4',
          kind: 'media',
          duration: 4,
          byteRange: { offset: 100, length: 100 },
          track: 1,
        },
      ]),
    );
    expect(info.segments).toHaveLength(6);
  });

  test('SegmentTimeline ($Time$) relative to the MPD, SegmentBase ranges and single-file representations', () => {
    const info = extractDash(DASH_TIMELINE_AND_BASE, 'http://127.0.0.1:8080/dash/stream.mpd');
    const base = 'http://127.0.0.1:8080/dash/';
    expect(urls(info.segments.filter((s) => s.kind === 'media')).sort()).toEqual(
      [
        `${base}hi/0.m4s`,
        `${base}hi/360000.m4s`,
        `${base}hi/720000.m4s`,
        `${base}video-360.webm`,
        `${base}video-720.webm`,
      ].sort(),
    );
    expect(info.segments).toEqual(
      expect.arrayContaining([
        { url: `${base}hi/init.mp4`, kind: 'init', track: 2 },
        { url: `${base}video-360.webm`, kind: 'init', byteRange: { offset: 0, length: 500 }, track: 0 },
        { url: `${base}video-360.webm`, kind: 'index', byteRange: { offset: 500, length: 400 }, track: 0 },
      ]),
    );
    // The MPD itself is never a segment.
    expect(urls(info.segments)).not.toContain(`${base}stream.mpd`);
  });
});

describe('extractManifest', () => {
  test('judges the format by the body, not the URL', () => {
    jest.spyOn(console, 'warn').mockImplementation(() => undefined); // xmldom on the broken MPD (Node has no DOMParser)
    jest.spyOn(console, 'error').mockImplementation(() => undefined);
    expect(extractManifest(HLS_MEDIA, 'https://a.example/x.txt')?.kind).toBe('hls');
    expect(extractManifest(DASH_TEMPLATE, 'https://a.example/manifest')?.kind).toBe('dash');
    expect(extractManifest('{"not": "a manifest"}', 'https://a.example/x.m3u8')).toBeUndefined();
    expect(extractManifest('<MPD garbage', 'https://a.example/x.mpd')).toBeUndefined();
    jest.restoreAllMocks();
  });
});

describe('SegmentRegistry', () => {
  test('remembers segments with their kind, duration and whether they are addressed by ranges', () => {
    const r = new SegmentRegistry();
    r.addManifest('http://h/br.m3u8', extractHls(HLS_BYTERANGE, 'http://h/br.m3u8'));
    r.addManifest('http://h/i.m3u8', extractHls(HLS_MEDIA, 'http://h/i.m3u8'));
    expect(r.lookup('http://h/main.mp4')).toEqual({
      kind: 'media',
      duration: 4,
      manifest: 'http://h/br.m3u8',
      ranged: true,
    });
    expect(r.lookup('http://h/seg-0.m4s')).toEqual({
      kind: 'media',
      duration: 4,
      manifest: 'http://h/i.m3u8',
      ranged: false,
    });
    expect(r.lookup('http://h/init.mp4')?.kind).toBe('init');
    expect(r.lookup('http://h/nothing.m4s')).toBeUndefined();
    expect(r.manifestsSeen).toBe(2);
  });

  test('upcoming: the media segments after one in its playlist, by range for ranged ones, per DASH representation', () => {
    const r = new SegmentRegistry();
    r.addManifest('http://h/i.m3u8', extractHls(HLS_MEDIA, 'http://h/i.m3u8'));
    expect(r.upcoming('http://h/seg-0.m4s', undefined, 4)).toEqual({
      track: 'http://h/i.m3u8',
      segments: [{ url: 'http://h/abs/seg-1.m4s?token=a%20b' }, { url: 'https://cdn.example.net/other/seg-2.m4s' }],
    });
    expect(r.upcoming('https://cdn.example.net/other/seg-2.m4s', undefined, 4)?.segments).toEqual([]);
    expect(r.upcoming('http://h/init.mp4', undefined, 4)).toBeUndefined(); // not a media segment
    r.addManifest('http://h/br.m3u8', extractHls(HLS_BYTERANGE, 'http://h/br.m3u8'));
    expect(r.upcoming('http://h/main.mp4', 720, 1)).toEqual({
      track: 'http://h/br.m3u8',
      segments: [{ url: 'http://h/main.mp4', range: { start: 1720, length: 2000 } }],
    });
    expect(r.upcoming('http://h/main.mp4', 5, 1)).toBeUndefined(); // no segment starts there
    const mpd = 'https://site.example/m/stream.mpd';
    r.addManifest(mpd, extractDash(DASH_TEMPLATE, mpd));
    expect(r.upcoming('https://cdn.example.com/v/chunk-v0-00001.m4s', undefined, 4)).toEqual({
      track: `${mpd}#0`,
      segments: [{ url: 'https://cdn.example.com/v/chunk-v0-00002.m4s' }],
    });
    expect(r.upcoming('https://cdn.example.com/v/audio/a1.m4s', undefined, 4)?.track).toBe(`${mpd}#1`);
  });

  test('upcoming: a refreshed playlist replaces its order; only the last 16 playlists are kept', () => {
    const r = new SegmentRegistry();
    const live = (first: number) =>
      `#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:${first}\n` +
      [0, 1, 2].map((i) => `#EXTINF:4,\ns${first + i}.ts\n`).join('');
    r.addManifest('http://h/live.m3u8', extractHls(live(0), 'http://h/live.m3u8'));
    expect(r.upcoming('http://h/s2.ts', undefined, 4)?.segments).toEqual([]);
    r.addManifest('http://h/live.m3u8', extractHls(live(2), 'http://h/live.m3u8'));
    expect(r.upcoming('http://h/s2.ts', undefined, 4)?.segments).toEqual([
      { url: 'http://h/s3.ts' },
      { url: 'http://h/s4.ts' },
    ]);
    expect(r.upcoming('http://h/s0.ts', undefined, 4)).toBeUndefined();
    for (let i = 0; i < 16; i++)
      r.addManifest(`http://h/p${i}.m3u8`, extractHls(live(100 * (i + 1)), `http://h/p${i}.m3u8`));
    expect(r.upcoming('http://h/s2.ts', undefined, 4)).toBeUndefined();
    expect(r.upcoming('http://h/s100.ts', undefined, 4)?.track).toBe('http://h/p0.m3u8');
  });

  test('is bounded: the oldest segments are forgotten first', () => {
    const r = new SegmentRegistry(3);
    const live = (first: number) =>
      `#EXTM3U\n#EXT-X-TARGETDURATION:2\n${[0, 1, 2].map((i) => `#EXTINF:2,\ns${first + i}.ts\n`).join('')}`;
    r.addManifest('http://h/live.m3u8', extractHls(live(0), 'http://h/live.m3u8'));
    r.addManifest('http://h/live.m3u8', extractHls(live(2), 'http://h/live.m3u8'));
    expect(r.size).toBe(3);
    expect(r.lookup('http://h/s0.ts')).toBeUndefined();
    expect(r.lookup('http://h/s1.ts')).toBeUndefined();
    expect(r.lookup('http://h/s4.ts')).toBeDefined();
  });
});

describe('MPD expansion budget (issue 9, finding 14)', () => {
  const mpd = (attrs: string, template: string, reps = 1) => `<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" ${attrs} minBufferTime="PT2S">
  <Period id="0">
    <AdaptationSet mimeType="video/mp4">
      ${template}
      ${Array.from({ length: reps }, (_, i) => `<Representation id="r${i}" bandwidth="1000"/>`).join('\n      ')}
    </AdaptationSet>
  </Period>
</MPD>`;
  const template = (more = '') => `<SegmentTemplate timescale="1" duration="1" media="s-$Number$.m4s" ${more}/>`;

  test('a tiny MPD declaring 400,000 segments is refused before mpd-parser expands it', () => {
    const hostile = mpd('type="static" mediaPresentationDuration="PT400000S"', template());
    expect(hostile.length).toBeLessThan(1000);
    expect(() => extractDash(hostile, 'https://a.example/x.mpd')).toThrow(/declares 40000[01] segments/);
    expect(extractManifest(hostile, 'https://a.example/x.mpd')).toBeUndefined();
  });

  test('every way to declare many segments is counted: representations, timelines, endNumber, live windows', () => {
    const url = 'https://a.example/x.mpd';
    // 10 representations share a 10,000-segment template.
    expect(() => extractDash(mpd('type="static" mediaPresentationDuration="PT10000S"', template(), 10), url)).toThrow(
      /declares 1000(00|10) segments/,
    );
    // A timeline repeat.
    const timeline = `<SegmentTemplate timescale="1" media="s-$Time$.m4s"><SegmentTimeline><S t="0" d="1" r="999999"/></SegmentTimeline></SegmentTemplate>`;
    expect(() => extractDash(mpd('type="static" mediaPresentationDuration="PT10S"', timeline), url)).toThrow(
      /declares 1000000 segments/,
    );
    // endNumber.
    expect(() =>
      extractDash(mpd('type="static" mediaPresentationDuration="PT10S"', template('endNumber="60000"')), url),
    ).toThrow(/declares 60000 segments/);
    // A live MPD whose availability started in 1970 with no time-shift window.
    expect(() =>
      extractDash(mpd('type="dynamic" availabilityStartTime="1970-01-01T00:00:00Z"', template()), url),
    ).toThrow(/declares \d+ segments/);
    // The same with a 60 s window is fine.
    const live = extractDash(
      mpd('type="dynamic" availabilityStartTime="1970-01-01T00:00:00Z" timeShiftBufferDepth="PT60S"', template()),
      url,
    );
    expect(live.segments.length).toBeGreaterThan(50);
    expect(live.segments.length).toBeLessThan(70);
  });

  test('ordinary MPDs are untouched', () => {
    const info = extractDash(
      mpd('type="static" mediaPresentationDuration="PT3600S"', template(), 4),
      'https://a.example/x.mpd',
    );
    // The same URLs for each representation: kept once.
    expect(info.segments.filter((s) => s.kind === 'media')).toHaveLength(3600);
  });
});
