/**
 * Which proxies of the set each upcoming segment goes to: its hint and its download use the same
 * ones, or the download would miss the proxies that staged it. A segment given `k` of the set
 * takes the next `k` in turn, so each proxy gets its share of segments; the whole set needs no
 * turn. A segment keeps its proxies once given, across changes of `k`; a handoff hands a
 * leaver's segments to its newcomer. Remembered for MAX_ASSIGNED segments at most (far more than
 * are ever staged ahead); a segment's entry goes when its download completes.
 */
import type { ProxyInfo } from '../../signalling';

const MAX_ASSIGNED = 256;

export class Assignments {
  /** Proxy ids by segment key, oldest first. */
  private readonly given = new Map<string, string[]>();
  private turn = 0;

  /** The proxy ids `key` was given, if any. */
  of(key: string): readonly string[] | undefined {
    return this.given.get(key);
  }

  /**
   * The proxies of `set` for segment `key`: those it was given (topped up from the set when one
   * left it), or for a new segment `k` of them, the next in turn.
   */
  assign(key: string, set: readonly ProxyInfo[], k: number): ProxyInfo[] {
    const ids = this.given.get(key);
    const count = ids === undefined ? k : Math.min(Math.max(1, ids.length), set.length);
    if (count >= set.length && ids === undefined) {
      this.remember(key, set);
      return [...set];
    }
    const chosen = ids === undefined ? [] : set.filter((p) => ids.includes(p.proxyId));
    const start = ids === undefined ? this.turn++ * count : 0;
    for (let j = 0; chosen.length < count && j < set.length; j++) {
      const p = set[(start + j) % set.length];
      if (!chosen.includes(p)) chosen.push(p);
    }
    this.remember(key, chosen);
    return chosen;
  }

  /** A handoff: segments given to a leaver (a key of `successor`) go to its newcomer. */
  handOver(successor: ReadonlyMap<string, string>): void {
    for (const [key, ids] of this.given)
      this.given.set(
        key,
        ids.map((id) => successor.get(id) ?? id),
      );
  }

  /** `key` was downloaded: its proxies need not be remembered. */
  forget(key: string): void {
    this.given.delete(key);
  }

  private remember(key: string, proxies: readonly ProxyInfo[]): void {
    if (!this.given.has(key) && this.given.size >= MAX_ASSIGNED) {
      this.given.delete(this.given.keys().next().value as string);
    }
    this.given.set(
      key,
      proxies.map((p) => p.proxyId),
    );
  }
}
