/**
 * Property tests of manifest parsing (src/hook/manifest.ts): playlists and MPDs generated from a
 * model give back exactly the model's segments, and mutated or arbitrary text never throws and
 * stays within the bounds (segment cap, absolute http(s) URLs without fragment).
 */
import fc from 'fast-check';
import { extractDash, extractHls, extractManifest, MAX_SEGMENTS_PER_MANIFEST } from '../src/hook/manifest';

const BASE = 'https://cdn.example/v/720p/index.m3u8';
const PARAMS = { seed: 13, numRuns: 300 };
const name = fc.stringMatching(/^[a-z0-9_-]{1,12}$/);
const dir = fc.constantFrom('', '../', 'sub/', '/abs/', 'https://other.example/p/');

interface ModelSegment {
  uri: string;
  duration: number;
  range?: { length: number; offset: number };
}

const segments = fc
  .uniqueArray(fc.tuple(dir, name), { minLength: 1, maxLength: 40, selector: ([d, n]) => d + n })
  .chain((uris) =>
    fc.tuple(
      ...uris.map(([d, n]) =>
        fc.record({
          uri: fc.constant(`${d}${n}.ts`),
          duration: fc.integer({ min: 1, max: 20_000 }).map((ms) => ms / 1000),
          range: fc.option(fc.record({ length: fc.integer({ min: 1, max: 1e7 }), offset: fc.nat(1e9) }), {
            nil: undefined,
          }),
        }),
      ),
    ),
  );

test('an HLS media playlist gives back its segments, resolved against the playlist URL', () => {
  fc.assert(
    fc.property(segments, fc.constantFrom('\n', '\r\n'), (model: ModelSegment[], eol) => {
      const lines = ['#EXTM3U', '#EXT-X-VERSION:4', '#EXT-X-TARGETDURATION:20'];
      for (const s of model) {
        lines.push(`#EXTINF:${s.duration},`);
        if (s.range) lines.push(`#EXT-X-BYTERANGE:${s.range.length}@${s.range.offset}`);
        lines.push(s.uri);
      }
      lines.push('#EXT-X-ENDLIST');
      const info = extractHls(lines.join(eol), BASE);
      expect(info.segments).toEqual(
        model.map((s) => ({
          url: new URL(s.uri, BASE).href,
          kind: 'media',
          duration: s.duration,
          ...(s.range ? { byteRange: s.range } : {}),
          track: 0,
        })),
      );
    }),
    PARAMS,
  );
});

test('a DASH SegmentList gives back its init segment and segments', () => {
  fc.assert(
    fc.property(segments, name, (model: ModelSegment[], init) => {
      const urls = model.map((s) => `<SegmentURL media="${s.uri}"/>`).join('');
      const text =
        '<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT1H" minBufferTime="PT2S">' +
        '<Period id="p0"><AdaptationSet mimeType="video/mp4"><Representation id="r" bandwidth="1000" codecs="avc1.4d401f">' +
        `<SegmentList timescale="1" duration="2"><Initialization sourceURL="${init}.mp4"/>${urls}</SegmentList>` +
        '</Representation></AdaptationSet></Period></MPD>';
      const info = extractDash(text, BASE);
      expect(info.segments.filter((s) => s.kind === 'media').map((s) => s.url)).toEqual(
        model.map((s) => new URL(s.uri, BASE).href),
      );
      expect(info.segments.filter((s) => s.kind === 'init').map((s) => s.url)).toEqual([
        new URL(`${init}.mp4`, BASE).href,
      ]);
    }),
    PARAMS,
  );
});

test('mutated and arbitrary manifests never throw and stay within bounds', () => {
  // xmldom reports every broken MPD on the console; a thousand of them would bury the test output.
  const quiet = ['error', 'warn', 'log'].map((level) =>
    jest.spyOn(console, level as 'error' | 'warn' | 'log').mockImplementation(() => {}),
  );
  const hls = segments.map((m: ModelSegment[]) =>
    ['#EXTM3U', ...m.flatMap((s) => [`#EXTINF:${s.duration},`, s.uri])].join('\n'),
  );
  const dash = segments.map(
    (m: ModelSegment[]) =>
      `<MPD type="static" mediaPresentationDuration="PT1H"><Period><AdaptationSet><Representation id="r"><SegmentList duration="2">${m
        .map((s) => `<SegmentURL media="${s.uri}"/>`)
        .join('')}</SegmentList></Representation></AdaptationSet></Period></MPD>`,
  );
  const edit = fc.tuple(fc.nat(), fc.string({ maxLength: 12 }), fc.nat(8)).map(
    ([at, insert, cut]) =>
      (text: string) =>
        text.slice(0, at % (text.length + 1)) + insert + text.slice((at % (text.length + 1)) + cut),
  );
  const text = fc.oneof(
    fc
      .tuple(fc.oneof(hls, dash), fc.array(edit, { minLength: 1, maxLength: 5 }))
      .map(([t, edits]) => edits.reduce((x, f) => f(x), t)),
    fc.string({ maxLength: 200 }).map((s) => `#EXTM3U\n${s}`),
    fc.string({ maxLength: 200 }).map((s) => `<MPD>${s}`),
  );
  try {
    fc.assert(
      fc.property(text, (t) => {
        const info = extractManifest(t, BASE);
        if (!info) return;
        expect(info.segments.length).toBeLessThanOrEqual(MAX_SEGMENTS_PER_MANIFEST);
        for (const url of [...info.segments.map((s) => s.url), ...info.manifests]) {
          expect(url).toMatch(/^https?:\/\/[^#]*$/);
        }
        for (const s of info.segments) {
          if (s.duration !== undefined) expect(s.duration).toBeGreaterThan(0);
          if (s.byteRange) expect(s.byteRange.length).toBeGreaterThan(0);
        }
      }),
      { seed: 13, numRuns: 1000 },
    );
  } finally {
    for (const spy of quiet) spy.mockRestore();
  }
});
