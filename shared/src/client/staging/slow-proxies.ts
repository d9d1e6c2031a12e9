/**
 * Which proxies of a set are degrading (a trigger of the chunk-aware handoff besides failures):
 * a proxy that delivered much less of a segment than its share, segment after segment. Its share
 * is what its claimed capacity (origo's ProxyInfo.capacityBps) is of the set's, or an even split
 * when not every proxy claims one; the Receiver already moves work to the faster sources within a
 * segment, so a proxy far below its share has a path or a machine that no longer keeps up.
 *
 * Judged per segment from each source's share of the useful packets; a segment too small to say
 * anything (an audio segment, a short range) leaves the streaks as they were.
 */
import type { ProxyInfo } from '../../signalling';
import type { GetResult } from '../client';

/** Slow in a segment: a share of the useful packets below this fraction of what it should be. */
export const SLOW_SHARE_FRACTION = 0.25;
/** Slow in this many judged segments in a row: degrading. */
export const SLOW_SEGMENTS = 2;
/** A segment of fewer bytes is not judged (about 64 packets). */
export const MIN_JUDGED_BYTES = 64 * 1024;

export class SlowProxies {
  private readonly streaks = new Map<string, number>();

  /** The proxies of `set` degrading after this segment's `result`. */
  judge(result: Pick<GetResult, 'sources'>, set: readonly ProxyInfo[]): ProxyInfo[] {
    const served = set.filter((p) => result.sources.some((s) => s.proxyId === p.proxyId));
    const bytes = result.sources.reduce((sum, s) => sum + s.bytes, 0);
    if (served.length < 2 || bytes < MIN_JUDGED_BYTES) return [];
    const claimed = served.every((p) => p.capacityBps > 0);
    const weight = (p: ProxyInfo) => (claimed ? p.capacityBps : 1);
    const weights = served.reduce((sum, p) => sum + weight(p), 0);
    const degrading: ProxyInfo[] = [];
    for (const p of served) {
      const share = result.sources.find((s) => s.proxyId === p.proxyId)!.share;
      const slow = share < SLOW_SHARE_FRACTION * (weight(p) / weights);
      const streak = slow ? (this.streaks.get(p.proxyId) ?? 0) + 1 : 0;
      this.streaks.set(p.proxyId, streak);
      if (streak >= SLOW_SEGMENTS) degrading.push(p);
    }
    return degrading;
  }

  /** `proxyId` left the set: its streak goes with it. */
  forget(proxyId: string): void {
    this.streaks.delete(proxyId);
  }
}
