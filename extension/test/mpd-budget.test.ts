/**
 * Found by `npm run fuzz`: a tiny MPD declaring millions of segments made mpd-parser list them all
 * (seconds of work, or the page out of memory) before the hook's cap applied.
 */
import { extractDash, extractManifest } from '../src/hook/manifest';
import { declaredDashSegments, MAX_DECLARED_DASH_SEGMENTS } from '../src/hook/mpd-budget';

const URL_ = 'https://cdn.example/v/manifest.mpd';
const mpd = (type: string, body: string, extra = '') =>
  `<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="${type}" mediaPresentationDuration="PT1H" minBufferTime="PT2S"${extra}>` +
  `<Period id="p0"><AdaptationSet mimeType="video/mp4"><Representation id="r" bandwidth="1">${body}</Representation></AdaptationSet></Period></MPD>`;

describe('MPDs that declare more segments than the budget are refused before mpd-parser lists them', () => {
  test.each([
    // The input the fuzzer found (shortened): a SegmentTimeline repeat of 2^32.
    [
      'timeline repeat of 2^32',
      mpd(
        'static',
        '<SegmentTemplate media="$Number$.m4s" timescale="1"><SegmentTimeline><S t="0" d="1" r="4294967296"/></SegmentTimeline></SegmentTemplate>',
      ),
    ],
    [
      '1 ms segments over an hour',
      mpd('static', '<SegmentTemplate media="$Number$.m4s" duration="1" timescale="1000"/>'),
    ],
    [
      'an open-ended repeat of 5 ms',
      mpd(
        'static',
        '<SegmentTemplate media="$Number$.m4s" timescale="1000"><SegmentTimeline><S t="0" d="5" r="-1"/></SegmentTimeline></SegmentTemplate>',
      ),
    ],
    // Also found by the fuzzer: numbers counted up from 2^53 never reach the end (an endless loop).
    [
      'a timeline starting at number 2^53',
      mpd(
        'static',
        '<SegmentTemplate media="$Number$.m4s" startNumber="9007199254740993"><SegmentTimeline><S t="0" d="1" r="7"/></SegmentTimeline></SegmentTemplate>',
      ),
    ],
    // A SegmentList with a duration is timed slot by slot before URLs are matched to slots.
    [
      'a SegmentList of 61 million slots',
      mpd('static', '<SegmentList duration="8"><Initialization sourceURL="i.mp4"/></SegmentList>', '').replace(
        'PT1H',
        'PT489983345S',
      ),
    ],
    // A duration wins over a timeline in mpd-parser, however short the timeline.
    [
      'a duration beside a short timeline',
      mpd(
        'static',
        '<SegmentTemplate media="$Number$.m4s" duration="1" timescale="1000"><SegmentTimeline><S t="0" d="2" r="2"/></SegmentTimeline></SegmentTemplate>',
      ),
    ],
    // Found by `npm run fuzz -- --iterations 1000000` (seed 408332858): an open repeat runs from
    // its S's own time, here far below zero, so 5-tick segments cover 62 million seconds.
    [
      'an open-ended repeat from a negative time',
      mpd(
        'static',
        '<SegmentTemplate media="$Number$.m4s" timescale="8"><SegmentTimeline><S t="-497957007" d="5" r="-1"/></SegmentTimeline></SegmentTemplate>',
      ),
    ],
    [
      'a live open-ended repeat from a negative time',
      mpd(
        'dynamic',
        '<SegmentTemplate media="s$Number$.m4s" timescale="8"><SegmentTimeline><S t="-497957007" d="5" r="-1"/></SegmentTimeline></SegmentTemplate>',
        ' availabilityStartTime="2026-01-01T00:00:00Z" minimumUpdatePeriod="PT2S"',
      ),
    ],
    [
      'live since 1970 in 1 s segments',
      mpd(
        'dynamic',
        '<SegmentTemplate media="$Number$.m4s" duration="1"/>',
        ' availabilityStartTime="1970-01-01T00:00:00Z"',
      ),
    ],
  ])('%s', (_name, text) => {
    expect(declaredDashSegments(text, URL_)).toBeGreaterThan(MAX_DECLARED_DASH_SEGMENTS);
    expect(() => extractDash(text, URL_)).toThrow(/declares/);
    expect(extractManifest(text, URL_)).toBeUndefined();
  });

  test('an open repeat counts from its own time, as mpd-parser does', () => {
    // 100 s at timescale 10, the first S at 600: mpd-parser lists (1000 - 600) / 10 = 40 segments.
    const text = mpd(
      'static',
      '<SegmentTemplate media="$Number$.m4s" timescale="10"><SegmentTimeline><S t="600" d="10" r="-1"/></SegmentTimeline></SegmentTemplate>',
    ).replace('PT1H', 'PT100S');
    expect(declaredDashSegments(text, URL_)).toBe(40);
    expect(extractManifest(text, URL_)?.segments.filter((s) => s.kind === 'media').length).toBe(40);
  });

  test('ordinary VOD and live MPDs stay under the budget and are read', () => {
    const vod = mpd('static', '<SegmentTemplate media="$Number$.m4s" duration="4"/>');
    expect(declaredDashSegments(vod, URL_)).toBeLessThan(1000);
    expect(extractManifest(vod, URL_)?.segments.length).toBeGreaterThanOrEqual(900);
    const live = mpd(
      'dynamic',
      '<SegmentTemplate media="$Number$.m4s" duration="2"/>',
      ' availabilityStartTime="1970-01-01T00:00:00Z" timeShiftBufferDepth="PT5M"',
    );
    expect(declaredDashSegments(live, URL_)).toBeLessThan(1000);
    expect(extractManifest(live, URL_)?.segments.length).toBeGreaterThan(100);
  });
});
