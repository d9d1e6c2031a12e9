/**
 * Manifest parsing (`extension/src/hook/manifest.ts` extractManifest): HLS playlists and DASH MPDs
 * built from their grammar with odd values, then mutated, and raw text. extractManifest returns
 * undefined for what it cannot read; a crash is a throw, a hang, or a result that breaks its
 * bounds (more segments than the cap, a URL that is not absolute http(s) without fragment).
 */
import { createRequire } from 'node:module';
import fc from 'fast-check';
import { FuzzTarget, invariant, mutatedText, utf8 } from '../target';

interface ManifestInfoLike {
  kind: string;
  segments: { url: string; kind: string; duration?: number; byteRange?: { offset: number; length: number } }[];
  manifests: string[];
}
interface ManifestModule {
  extractManifest(text: string, manifestUrl: string): ManifestInfoLike | undefined;
  MAX_SEGMENTS_PER_MANIFEST: number;
}

/**
 * The extension is type-checked on its own (DOM lib, its own declarations for mpd-parser), so it
 * is loaded here at run time rather than imported into the root project's type check.
 */
const manifestModule = createRequire(__filename)('@mutp/extension/manifest') as ManifestModule;

const MANIFEST_URL = 'https://cdn.example/v/master.m3u8';

const uri = fc.oneof(
  fc.constantFrom(
    'seg-1.ts',
    '../a/seg.m4s',
    '/abs/init.mp4',
    'https://other.example/x.ts',
    'http://127.0.0.1/y.ts',
    'javascript:alert(1)',
    'data:video/mp2t;base64,AAAA',
    '//host.example/p.ts',
    'seg.ts#frag',
    'blob:https://cdn.example/1',
    '',
    ' ',
    'a b.ts',
    '%zz.ts',
    'http://[::1',
  ),
  fc.string({ maxLength: 30 }),
);
// Mostly the small values real manifests carry; now and then one that breaks arithmetic.
const number = fc.oneof(
  { weight: 12, arbitrary: fc.integer({ min: 1, max: 12 }).map(String) },
  { weight: 1, arbitrary: fc.double({ noNaN: false }).map(String) },
  { weight: 1, arbitrary: fc.integer().map(String) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('0', '-1', '1e308', 'NaN', 'Infinity', '', '4294967296', '9007199254740993', '0x10'),
  },
);
const byterange = fc.tuple(number, fc.option(number)).map(([n, o]) => (o === null ? n : `${n}@${o}`));

const hlsLine = fc.oneof(
  fc.tuple(number, fc.string({ maxLength: 10 })).map(([d, t]) => `#EXTINF:${d},${t}`),
  uri,
  byterange.map((b) => `#EXT-X-BYTERANGE:${b}`),
  fc.tuple(uri, fc.option(byterange)).map(([u, b]) => `#EXT-X-MAP:URI="${u}"${b === null ? '' : `,BYTERANGE="${b}"`}`),
  fc
    .tuple(number, uri, fc.option(byterange))
    .map(([d, u, b]) => `#EXT-X-PART:DURATION=${d},URI="${u}"${b === null ? '' : `,BYTERANGE=${b}`}`),
  fc.tuple(number, uri).map(([bw, u]) => `#EXT-X-STREAM-INF:BANDWIDTH=${bw},CODECS="avc1.4d401f"\n${u}`),
  fc
    .tuple(fc.constantFrom('AUDIO', 'SUBTITLES', 'VIDEO', 'X'), uri)
    .map(([t, u]) => `#EXT-X-MEDIA:TYPE=${t},GROUP-ID="g",NAME="n",URI="${u}"`),
  uri.map((u) => `#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1,URI="${u}"`),
  uri.map((u) => `#EXT-X-PRELOAD-HINT:TYPE=PART,URI="${u}"`),
  number.map((n) => `#EXT-X-TARGETDURATION:${n}`),
  number.map((n) => `#EXT-X-MEDIA-SEQUENCE:${n}`),
  fc.constantFrom('#EXT-X-ENDLIST', '#EXT-X-DISCONTINUITY', '#EXT-X-VERSION:7', '#EXT-X-INDEPENDENT-SEGMENTS', '#', ''),
  fc.string({ maxLength: 40 }),
);
const hls = fc
  .tuple(
    fc.constantFrom('#EXTM3U', '\uFEFF#EXTM3U', '  #EXTM3U'),
    fc.array(hlsLine, { maxLength: 60 }),
    fc.constantFrom('\n', '\r\n'),
  )
  .map(([head, lines, eol]) => [head, ...lines].join(eol));
/** Many segments (past the cap, which must hold). Costly, so drawn rarely. */
const longHls = fc
  .integer({ min: 1_000, max: 25_000 })
  .map((n) => '#EXTM3U\n' + Array.from({ length: n }, (_, i) => `#EXTINF:1,\ns${i}.ts`).join('\n'));

const attr = (name: string) => fc.option(number).map((v) => (v === null ? '' : ` ${name}="${v}"`));
const segmentTemplate = fc
  .tuple(
    attr('duration'),
    attr('timescale'),
    attr('startNumber'),
    uri,
    uri,
    fc.option(fc.array(fc.tuple(number, number, number), { maxLength: 5 })),
  )
  .map(([duration, timescale, start, media, init, timeline]) => {
    const t =
      timeline === null
        ? ''
        : `<SegmentTimeline>${timeline.map(([tt, d, r]) => `<S t="${tt}" d="${d}" r="${r}"/>`).join('')}</SegmentTimeline>`;
    return `<SegmentTemplate media="${media}$Number$.m4s" initialization="${init}"${duration}${timescale}${start}>${t}</SegmentTemplate>`;
  });
const segmentList = fc
  .tuple(attr('duration'), uri, fc.array(fc.tuple(uri, fc.option(byterange)), { maxLength: 8 }))
  .map(
    ([duration, init, urls]) =>
      `<SegmentList${duration}><Initialization sourceURL="${init}"/>${urls
        .map(([u, r]) => `<SegmentURL media="${u}"${r === null ? '' : ` mediaRange="${r.replace('@', '-')}"`}/>`)
        .join('')}</SegmentList>`,
  );
const segmentBase = fc
  .tuple(byterange, byterange)
  .map(
    ([index, init]) =>
      `<SegmentBase indexRange="${index.replace('@', '-')}"><Initialization range="${init.replace('@', '-')}"/></SegmentBase>`,
  );
const representation = fc
  .tuple(
    fc.option(uri),
    fc.oneof(segmentTemplate, segmentList, segmentBase, fc.constant('')),
    fc.constantFrom('video/mp4', 'audio/mp4', 'text/vtt'),
  )
  .map(
    ([base, segments, mime]) =>
      `<AdaptationSet mimeType="${mime}"><Representation id="r" bandwidth="1" codecs="avc1">${base === null ? '' : `<BaseURL>${base}</BaseURL>`}${segments}</Representation></AdaptationSet>`,
  );
const dash = fc
  .tuple(
    fc.constantFrom('', '<?xml version="1.0"?>', '<!-- c -->'),
    fc.constantFrom('static', 'dynamic', 'x'),
    fc.oneof(
      { weight: 4, arbitrary: number.map((n) => `PT${n}S`) },
      { weight: 1, arbitrary: fc.constantFrom('PT10M', 'PT1H', 'P1Y', 'PT0S', 'PT-5S', 'garbage', 'PT100000000H') },
    ),
    fc.option(uri),
    fc.array(representation, { minLength: 0, maxLength: 3 }),
  )
  .map(
    ([head, type, duration, base, sets]) =>
      `${head}<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="${type}" mediaPresentationDuration="${duration}" minBufferTime="PT2S">` +
      `${base === null ? '' : `<BaseURL>${base}</BaseURL>`}<Period id="p0">${sets.join('')}</Period></MPD>`,
  );

export const manifestTarget: FuzzTarget<string> = {
  name: 'manifest',
  about: 'HLS and DASH manifests (extension/src/hook/manifest.ts extractManifest)',
  inputs: fc.oneof(
    { weight: 300, arbitrary: hls },
    { weight: 300, arbitrary: dash },
    { weight: 300, arbitrary: mutatedText(fc.oneof(hls, dash)) },
    { weight: 1, arbitrary: longHls },
    { weight: 100, arbitrary: fc.string({ maxLength: 200 }).map((s) => `#EXTM3U\n${s}`) },
    { weight: 100, arbitrary: fc.string({ maxLength: 200 }).map((s) => `<MPD>${s}`) },
  ),
  check(text) {
    const info = manifestModule.extractManifest(text, MANIFEST_URL);
    if (info === undefined) return;
    invariant(info.kind === 'hls' || info.kind === 'dash', `kind ${info.kind}`);
    invariant(info.segments.length <= manifestModule.MAX_SEGMENTS_PER_MANIFEST, `${info.segments.length} segments`);
    invariant(info.manifests.length <= 1000, `${info.manifests.length} child manifests`);
    for (const url of [...info.segments.map((s) => s.url), ...info.manifests]) {
      invariant(
        /^https?:\/\/[^#]*$/.test(url) && new URL(url).href === url,
        `URL ${url} is not absolute http(s) without fragment`,
      );
    }
    for (const s of info.segments) {
      invariant(s.duration === undefined || (Number.isFinite(s.duration) && s.duration > 0), `duration ${s.duration}`);
      const r = s.byteRange;
      invariant(r === undefined || (r.offset >= 0 && r.length > 0), `byte range ${JSON.stringify(r)}`);
    }
  },
  bytes: utf8,
};
