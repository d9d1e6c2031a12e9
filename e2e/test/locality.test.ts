/**
 * Locality on the namespace testbed (issue 34): two regions of two proxies, each declaring its
 * region and the client prefix it serves; the client (10 ms RTT to region a, 80 ms to b) moves
 * from a's prefix to b's in the middle of a segment (a network change). Its segments come from
 * its region's proxies, and the one after the next after the move from region b's: one
 * `MutpClient.get()` per segment, and a PlaybackSession (`mutp playlist`, the extension's loader),
 * whose proxy set chosen in region a must move to b's at a segment boundary.
 * Needs root, iproute2, /dev/net/tun and linkem built (scripts/setup.sh); skipped otherwise.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { LINKEM, netnsUnavailable } from '@mutp/testbed';
import type { SeriesResult } from '../src/bench-locality';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

let unavailable: string | undefined;
beforeAll(async () => {
  unavailable = (await netnsUnavailable()) ?? (existsSync(LINKEM) ? undefined : `${LINKEM} not built`);
  if (unavailable) console.warn(`locality testbed test skipped: ${unavailable}`);
});

const describeTestbed = process.getuid?.() === 0 ? describe : describe.skip;

describeTestbed('locality on the testbed', () => {
  jest.setTimeout(120_000);

  test.each([
    ['one get() per segment', []],
    ['a PlaybackSession (one proxy set, staging)', ['--playback']],
  ])(
    "%s: the client's region's proxies, and after a move region b's from the segment after the next",
    async (_path, extra) => {
      if (unavailable) return;
      const MOVE_DURING = 3;
      const args = ['--import', 'tsx', join(ROOT, 'e2e/src/bench-locality.ts'), '--run', ...extra];
      args.push('--segments', '8', '--move-during', String(MOVE_DURING), '--segment-bytes', '524288');
      const { stdout } = await run(process.execPath, args, { cwd: ROOT, timeout: 100_000, maxBuffer: 8 << 20 }).catch(
        (e: unknown) => {
          const err = e as { stderr?: string; message: string };
          throw new Error(`bench-locality --run failed: ${err.message}\n${(err.stderr ?? '').slice(-4000)}`);
        },
      );
      const r = JSON.parse(stdout.trim().split('\n').pop() ?? '') as SeriesResult;
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
