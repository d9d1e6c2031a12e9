/**
 * Locality on the namespace testbed (issue 34): two regions of two proxies, each declaring its
 * region and the client prefix it serves; the client (10 ms RTT to region a, 80 ms to b) moves
 * from a's prefix to b's in the middle of a segment (a network change). Its segments come from
 * its region's proxies, and the one after the next after the move from region b's: one
 * `MutpClient.get()` per segment, and a PlaybackSession (`mutp playlist`, the extension's loader),
 * whose proxy set chosen in region a must move to b's at a segment boundary.
 * Needs root, iproute2, /dev/net/tun and linkem built (scripts/setup.sh); skipped otherwise.
 * The two series run side by side, each in a testbed of its own (they mostly wait on set-up and
 * the emulated links; CI time), and each test checks its own.
 */
import { existsSync } from 'node:fs';
import { LINKEM, netnsUnavailable } from '@mutp/testbed';
import type { SeriesResult } from '../src/bench-locality';
import { runJson, startEarly } from './script-runs';

let unavailable: string | undefined;
beforeAll(async () => {
  unavailable = (await netnsUnavailable()) ?? (existsSync(LINKEM) ? undefined : `${LINKEM} not built`);
  if (unavailable) console.warn(`locality testbed test skipped: ${unavailable}`);
});

const describeTestbed = process.getuid?.() === 0 ? describe : describe.skip;

const MOVE_DURING = 3;

/** The two ways a client downloads a series: the extra arguments of bench-locality for each. */
const PATHS: [string, string[]][] = [
  ['one get() per segment', []],
  ['a PlaybackSession (one proxy set, staging)', ['--playback']],
];

describeTestbed('locality on the testbed', () => {
  jest.setTimeout(120_000);

  const series = new Map<string, () => Promise<SeriesResult>>();

  beforeAll(() => {
    if (unavailable) return;
    for (const [path, extra] of PATHS) {
      const args = ['--run', ...extra, '--segments', '8', '--move-during', String(MOVE_DURING)];
      args.push('--segment-bytes', '524288');
      series.set(
        path,
        startEarly(() => runJson<SeriesResult>('e2e/src/bench-locality.ts', args, 'bench-locality --run', 100_000)),
      );
    }
  });

  afterAll(async () => {
    // Each run takes its own testbed down: wait for them (also when a test failed before them).
    await Promise.all([...series.values()].map((r) => r().catch(() => undefined)));
  }, 120_000);

  test.each(PATHS)(
    "%s: the client's region's proxies, and after a move region b's from the segment after the next",
    async (path) => {
      if (unavailable) return;
      const r = await series.get(path)!();
      const shown = JSON.stringify(r.segments);
      expect(r.segments).toHaveLength(8);
      for (const s of r.segments) expect([s.index, s.verified, s.error]).toEqual([s.index, true, undefined]);
      // The client noticed the move from its interfaces, during the segment it was told to.
      expect(r.networkChanges).toBe(1);
      expect(r.movedDuring).toBe(MOVE_DURING);
      // Before the move (and the segment it interrupted, which resumes on its links): region a.
      for (const s of r.segments.filter((x) => x.index <= MOVE_DURING))
        expect([s.index, s.sourceRegions]).toEqual([s.index, ['a', 'a']]);
      // The segment after the next, and every later one: region b's proxies only.
      for (const s of r.segments.filter((x) => x.index >= MOVE_DURING + 2))
        expect([s.index, s.sourceRegions]).toEqual([s.index, ['b', 'b']]);
      expect(r.inRegion / r.sources).toBeGreaterThanOrEqual(0.9);
      // The session's set moved by a handoff: both of region a's proxies replaced.
      if (r.playback) expect(r.relocatedReplaced).toBe(2);
      console.log(`locality: ${r.inRegion}/${r.sources} sources in the client's region; segments ${shown}`);
    },
  );
});
