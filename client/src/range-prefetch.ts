/**
 * Pipelined ranges for `mutp get`: while one range of a split download is transferred, the
 * next few are staged (SoftStage hints) at the same proxy set, so each proxy fetches them from
 * the origin meanwhile and the next range starts from its cache instead of waiting for the
 * origin. Only hints travel ahead, never bytes: the client holds one range at a time, and a
 * download stopped anywhere has fetched no verified byte twice when it resumes (what a proxy
 * staged and nobody asked for is dropped by the proxy after its hold time).
 *
 * The set is chosen once from origo (MutpClient.chooseProxies) and every range is downloaded
 * from it (GetOptions.use), which also asks origo for a replacement of a proxy that cannot be
 * reached. After a failed range the set is chosen again. Without a set (origo offered none, or
 * could not be asked) ranges are fetched as before and nothing is hinted.
 */
import type { ByteRange, ProxyInfo, StagedAnswer } from '@mutp/shared';
import type { DownloadMode } from '@mutp/shared/client';

/** What prefetching needs of MutpClient. */
export interface PrefetchClient {
  chooseProxies(count: number, mode: DownloadMode, o?: { signal?: AbortSignal }): Promise<ProxyInfo[]>;
  stage(
    url: string,
    proxies: readonly ProxyInfo[],
    o?: { range?: ByteRange; timeoutMs?: number; mode?: DownloadMode },
  ): Promise<StagedAnswer[]>;
}

/** How long a hint's answers are waited for (counting only: the proxy stages whatever we wait). */
const HINT_ANSWER_MS = 60_000;

export interface PrefetchStats {
  /** Ranges hinted. */
  hinted: number;
  /** Proxy answers: staged (in its cache now), or failed (busy, over budget, an origin error...). */
  staged: number;
  failed: number;
}

export class RangePrefetch {
  private set?: Promise<ProxyInfo[] | undefined>;
  /** Starts of the ranges hinted at the current set (only those ahead of the download are kept). */
  private readonly hinted = new Set<number>();
  readonly stats: PrefetchStats = { hinted: 0, staged: 0, failed: 0 };

  constructor(
    private readonly client: PrefetchClient,
    private readonly url: string,
    private readonly mode: DownloadMode,
    private readonly proxies: number,
    private readonly signal?: AbortSignal,
  ) {}

  /** The proxies every range is downloaded from; undefined: let the client choose per range. */
  proxySet(): Promise<ProxyInfo[] | undefined> {
    this.set ??= this.client.chooseProxies(this.proxies, this.mode, { signal: this.signal }).then(
      (set) => (set.length > 0 ? set : undefined),
      // The range's own request meets the same failure and reports it with its exit code.
      () => undefined,
    );
    return this.set;
  }

  /** Stages these ranges (those not hinted yet) at the set. Never waits, never throws. */
  ahead(ranges: readonly ByteRange[]): void {
    if (ranges.length === 0 || this.signal?.aborted) return;
    const first = ranges[0].start;
    for (const start of this.hinted) if (start < first) this.hinted.delete(start);
    const fresh = ranges.filter((r) => !this.hinted.has(r.start));
    if (fresh.length === 0) return;
    for (const r of fresh) this.hinted.add(r.start);
    void this.proxySet().then((set) => {
      if (set === undefined || this.signal?.aborted) return;
      for (const range of fresh) {
        this.stats.hinted++;
        void this.client
          .stage(this.url, set, { range, mode: this.mode, timeoutMs: HINT_ANSWER_MS })
          .then((answers) => this.count(answers));
      }
    });
  }

  /** A range failed: the next one asks origo for a set again (and hints there). */
  forget(): void {
    this.set = undefined;
    this.hinted.clear();
  }

  private count(answers: readonly StagedAnswer[]): void {
    for (const a of answers) {
      if (a.status === 'staged') this.stats.staged++;
      else this.stats.failed++;
    }
  }
}
