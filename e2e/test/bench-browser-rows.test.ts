/**
 * bench:browser's rows (e2e/src/bench-browser-rows.ts) for both runtimes: a Chromium cell is made
 * of the extension's records (cached and failed ones left out), a Firefox cell of the page's
 * timings (browser-play.ts, pageSegmentsOf) with the proxies' bytes as shares and no normalized
 * goodput; both carry the page-timed median.
 */
import { pageSegmentsOf, PlayResult } from '../src/browser-play';
import type { PlayerState, SegmentRecord } from '../src/browser';
import { Cell, measuredSegments, rowOf } from '../src/bench-browser-rows';

const RUN = { stream: 's.m3u8', transport: 'quic', profile: 'paper-loss2', cold: false, settings: {} };

function state(loaded: PlayerState['loaded']): PlayerState {
  return {
    player: 'hls',
    src: 's.m3u8',
    currentTime: 10,
    duration: 40,
    readyState: 4,
    paused: false,
    ended: false,
    started: true,
    stalls: 0,
    stalledEvents: 0,
    events: [['playing', 0, 900]],
    errors: [],
    warnings: [],
    loaded,
    hashing: 0,
  };
}

function record(url: string, goodputBps: number, extra: Partial<SegmentRecord> = {}): SegmentRecord {
  return {
    at: 0,
    url,
    ok: true,
    mode: 'rlnc',
    bytes: 2_000_000,
    objectBytes: 2_000_000,
    durationMs: 2e9 / goodputBps,
    totalMs: 2e9 / goodputBps,
    goodputBps,
    normalizedGoodput: 0.98,
    cached: false,
    proxies: [
      { name: 'a', share: 0.5 } as SegmentRecord['proxies'][number],
      { name: 'b', share: 0.5 } as SegmentRecord['proxies'][number],
    ],
    ...extra,
  };
}

// The page timed three segments: 1 s, 0.5 s, and one without times (a dash.js page has none).
const LOADED: PlayerState['loaded'] = [
  { url: 'http://o/2.ts', bytes: 1_000_000, sha256: 'x', at: 2000, startMs: 1500, endMs: 2000 },
  { url: 'http://o/1.ts', bytes: 2_000_000, sha256: 'x', at: 1000, startMs: 0, endMs: 1000 },
  { url: 'http://o/3.ts', bytes: 1_000_000, sha256: 'x', at: 3000 },
];

function play(segments: SegmentRecord[]): PlayResult {
  const s = state(LOADED);
  return {
    repeat: 0,
    segments,
    pageSegments: pageSegmentsOf(s),
    counters: { served: 3, fallbacks: {} } as unknown as PlayResult['counters'],
    state: s,
    startupMs: 900,
    wallMs: 5000,
    seeks: 0,
  };
}

function cell(runtime: Cell['runtime'], segments: SegmentRecord[]): Cell {
  return {
    runtime,
    mode: 'rlnc',
    sources: 2,
    capsKBps: [896, 1792],
    plays: [play(segments)],
    origoRecords: 3,
    stageHints: {},
    proxyBytes: { a: 3_000_000, b: 1_000_000 },
    quicSessionsAccepted: 2,
  };
}

test('the page times the segments its loader timed, in answer order', () => {
  expect(pageSegmentsOf(state(LOADED))).toEqual([
    { url: 'http://o/1.ts', bytes: 2_000_000, durationMs: 1000, goodputBps: 2_000_000 },
    { url: 'http://o/2.ts', bytes: 1_000_000, durationMs: 500, goodputBps: 2_000_000 },
  ]);
});

test('a Chromium row is made of the records served by MUTP and not from the cache', () => {
  const c = cell('chromium', [
    record('http://o/1.ts', 4e6),
    record('http://o/2.ts', 3e6),
    record('http://o/3.ts', 9e6, { cached: true }),
    record('http://o/4.ts', 1e6, { ok: false }),
  ]);
  expect(measuredSegments(c).map((s) => s.goodputBps)).toEqual([4e6, 3e6]);
  expect(rowOf(c, RUN)).toMatchObject({
    runtime: 'chromium',
    timing: 'extension',
    segments: 2,
    served: 3,
    medianSegmentGoodputBps: 3.5e6,
    pageMedianSegmentGoodputBps: 2e6,
    normalizedGoodput: 0.98,
    proxyShares: { a: 0.5, b: 0.5 },
    quicSessionsAccepted: 2,
    transport: 'quic',
  });
});

test("a Firefox row is made of the page's timings, its shares of the proxies' bytes, no normalized goodput", () => {
  // Records would not exist in Firefox; any given are not used.
  const row = rowOf(cell('firefox', [record('http://o/1.ts', 9e6)]), RUN);
  expect(row).toMatchObject({
    runtime: 'firefox',
    timing: 'page',
    segments: 2,
    medianSegmentGoodputBps: 2e6,
    pageMedianSegmentGoodputBps: 2e6,
    normalizedGoodput: null,
    proxyShares: { a: 0.75, b: 0.25 },
    staging: null,
  });
});
