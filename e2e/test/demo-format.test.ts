/** What the demo prints (e2e/src/demo-format.ts), without a cluster: plan, per-proxy lines, table, units. */
import type { GetResult } from '@mutp/shared/client';
import {
  capBytesPerSecond,
  DemoRow,
  describePlan,
  formatBytes,
  formatDownload,
  formatRate,
  formatTable,
  sizeRange,
  tableNotes,
} from '../src/demo-format';

const FLEET = [
  { name: 'edge-896-a', uploadKBps: 896 },
  { name: 'edge-896-b', uploadKBps: 896 },
  { name: 'edge-1792-a', uploadKBps: 1792 },
  { name: 'edge-1792-b', uploadKBps: 1792 },
];

test('units are SI throughout: kB = 1000 B, MB = 10^6 B, rates in MB/s', () => {
  expect(formatBytes(512)).toBe('512 B');
  expect(formatBytes(1000)).toBe('1.0 kB');
  expect(formatBytes(12_345)).toBe('12.3 kB');
  expect(formatBytes(1_995_432)).toBe('2.00 MB');
  expect(formatBytes(2.1e9)).toBe('2.10 GB');
  expect(formatRate(1_835_008)).toBe('1.84 MB/s');
  // The proxies' flag is in KiB/s: 896 of them are 0.92 MB/s.
  expect(capBytesPerSecond(896)).toBe(917_504);
  expect(formatRate(capBytesPerSecond(896))).toBe('0.92 MB/s');
});

test('sizeRange: one size, or the range in one unit', () => {
  expect(sizeRange([1_950_000, 1_950_100])).toBe('1.95 MB');
  expect(sizeRange([1_870_000, 1_995_432])).toBe('1.87-2.00 MB');
  expect(sizeRange([900_000, 1_200_000])).toBe('900.0 kB to 1.20 MB');
});

test('the plan says what starts, which modes, how many proxies and which sizes, before anything runs', () => {
  const plan = describePlan({
    stream: 'high/hls-ts',
    segmentBytes: [1_995_432, 1_870_112, 1_902_000, 1_911_000],
    modes: ['http', 'uncoded', 'rlnc', 'fountain'],
    proxies: FLEET,
  });
  expect(plan).toContain('start a local origin serving 4 generated H.264 segments of high/hls-ts');
  expect(plan).toContain('(1.87-2.00 MB each, 7.68 MB in all)');
  expect(plan).toContain('start origo and 4 proxy processes on loopback');
  expect(plan).toContain('edge-896-a 0.92 MB/s');
  expect(plan).toContain('edge-1792-b 1.84 MB/s (5.51 MB/s together)');
  expect(plan).toContain('download the same 4 segments in each of 4 modes, every download through all 4 proxies');
  for (const mode of ['http', 'uncoded', 'rlnc', 'fountain']) expect(plan).toMatch(new RegExp(`^ +${mode} +\\S`, 'm'));
  expect(plan).toMatch(/http +Parallel HTTP.*wasted/);
  expect(plan).toContain('1 kB = 1000 B, 1 MB = 10^6 B');
  // No binary unit spelled as a decimal one.
  expect(plan).not.toMatch(/KB\/s/);
});

test('http mode: the winner is named, and the bytes of the losing proxies are called wasted, with their sum', () => {
  const result: GetResult = {
    object: new Uint8Array(1_000_000),
    mode: 'http',
    startedAt: 0,
    durationMs: 1000,
    goodputBps: 1e6,
    normalizedGoodput: 1_000_000 / 2_500_000,
    sources: [
      { proxyId: 'a', name: 'edge-896-a', bytes: 500_000, share: 0 },
      { proxyId: 'b', name: 'edge-896-b', bytes: 450_000, share: 0 },
      { proxyId: 'c', name: 'edge-1792-a', bytes: 1_000_000, share: 1 },
      { proxyId: 'd', name: 'edge-1792-b', bytes: 550_000, share: 0 },
    ],
    contentType: 'video/mp2t',
    polluters: [],
  };
  const text = formatDownload('high/hls-ts/seg-003.ts', result);
  expect(text.split('\n')[0]).toBe(
    'high/hls-ts/seg-003.ts: 1.00 MB in 1000 ms (http), goodput 1.00 MB/s, normalized goodput 0.400',
  );
  expect(text).toMatch(/edge-1792-a +won +1\.00 MB/);
  expect(text).toMatch(/edge-896-a +wasted +500\.0 kB +\(lost the race\)$/m);
  expect(text).toMatch(/edge-1792-b +wasted +550\.0 kB/);
  expect(text).toContain('wasted: 1.50 MB sent by the 3 proxies that lost the race');
});

test('coded modes: packet counts say "packets", bytes have a unit, a failed proxy is named', () => {
  const source = (name: string, useful: number, received: number, bytes: number, share: number) => ({
    proxyId: name,
    name,
    state: 'active' as const,
    received,
    useful,
    redundant: received - useful,
    beforeMeta: 0,
    afterComplete: 0,
    invalid: 0,
    malformed: 0,
    bytes,
    rateBps: 0,
    polluter: false,
    share,
  });
  const result: GetResult = {
    object: new Uint8Array(1_995_432),
    mode: 'rlnc',
    startedAt: 0,
    durationMs: 400,
    goodputBps: 4_988_580,
    normalizedGoodput: 0.97,
    sources: [
      source('edge-896-a', 300, 310, 350_000, 0.17),
      { ...source('edge-896-b', 0, 0, 0, 0), state: 'failed' as const },
      source('edge-1792-a', 700, 720, 800_000, 0.4),
      source('edge-1792-b', 750, 760, 850_000, 0.43),
    ],
  };
  const text = formatDownload('seg', result);
  expect(text).toMatch(/edge-896-a +share +17\.0% +300 of 310 packets useful, 350\.0 kB received$/m);
  expect(text).toMatch(/edge-896-b +share +0\.0% +0 of 0 packets useful, 0 B received, failed$/m);
  expect(text).toMatch(/edge-1792-b +share +43\.0% +750 of 760 packets useful, 850\.0 kB received$/m);
  expect(text).not.toContain('wasted');
});

test('the table has units in its header and a dash where there is no http row to compare with', () => {
  const row = (mode: string, speedupVsHttp: number | null): DemoRow => ({
    mode,
    sources: 4,
    capsKBps: [896, 896, 1792, 1792],
    segments: 4,
    bytes: 7_680_000,
    medianSegmentMs: 1234,
    medianGoodputBps: 1_560_000,
    normalizedGoodput: 0.5,
    efficiency: 0.283,
    speedupVsHttp,
    verified: true,
  });
  const lines = formatTable([row('http', 1), row('rlnc', 2.5), row('fountain', null)]).split('\n');
  expect(lines[0]).toMatch(/median ms +goodput MB\/s +normalized +efficiency +vs http +verified/);
  expect(lines[1]).toMatch(/^http +4 +1234 +1\.56 +0\.500 +0\.283 +1\.00x +yes$/);
  expect(lines[2]).toMatch(/ 2\.50x {2}yes$/);
  expect(lines[3]).toMatch(/ - {3}yes$/);
  // Every row is as wide as the others: the columns line up.
  expect(new Set(lines.slice(1).map((l) => l.length)).size).toBe(1);
});

test('the notes give the sum of the caps in MB/s and the best Parallel HTTP share', () => {
  const notes = tableNotes([896, 896, 1792, 1792]);
  expect(notes).toContain('sum of the caps (5.51 MB/s)');
  expect(notes).toContain("fastest proxy's share (0.33)");
});
