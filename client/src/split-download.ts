/**
 * One object fetched as consecutive ranges (aria2's split, done in order): each range is its
 * own MUTP transfer, agreed on and verified by the proxies like any object, then handed to a
 * sink that writes it and records how far the file is good. Memory stays at one range whatever
 * the object's size, and a download stopped anywhere resumes at the first range not recorded.
 *
 * The object's complete length comes from the first range's answer (Content-Range, as the
 * proxies agreed on it); every later range must state the same length, or the object changed
 * under the download and it fails rather than stitch two versions together.
 */
import type { ByteRange } from '@mutp/shared';
import type { DownloadProgress, GetResult } from '@mutp/shared/client';

/** What to fetch: bytes `start` .. `end` (inclusive) of the resource, or to its end. */
export interface SplitPlan {
  start: number;
  end?: number;
  /** Largest range asked for at once (the memory a download holds). */
  chunkBytes: number;
  /** Tries per range (aria2's --max-tries); a failure that trying again can mend is retried. Default 1. */
  maxTries?: number;
  /**
   * Ranges announced ahead of the one fetched (SplitEvents.onUpcoming), so the proxies can fetch
   * them from the origin meanwhile. Only ranges known to exist are announced: none past the end,
   * none before the resource's length is known unless `end` is given. Default 0.
   */
  lookahead?: number;
}

/** How far a download got: every byte before `nextOffset` is written and verified. */
export interface SplitProgress {
  nextOffset: number;
  completeLength?: number;
}

export interface SplitSink {
  /** Writes a verified range at `offset` (of the resource), in order. */
  write(offset: number, bytes: Uint8Array): Promise<void>;
  /** Records that everything before `progress.nextOffset` is written (the resume point). */
  commit(progress: SplitProgress): Promise<void>;
}

export type FetchRange = (range: ByteRange, onProgress: (progress: DownloadProgress) => void) => Promise<GetResult>;

/** What a proxy did over every range of one download. */
export interface ProxyTotals {
  proxyId: string;
  name: string;
  /** Bytes received from it (coded packets included). */
  bytes: number;
  /** Its share of the object, weighted by each range's length. */
  share: number;
  /** Ranges it took part in. */
  ranges: number;
  /** Coded modes: data packets received from it, and those that added to what the client had. */
  packets?: { received: number; useful: number };
  /** Why it stopped serving, per range where it did (deduplicated). */
  failures: string[];
}

export interface SplitResult {
  /** Bytes written by this run (a resumed download counts only its new bytes). */
  fetchedBytes: number;
  /** Where this run started (plan.start unless resumed). */
  resumedFrom: number;
  /** The resource's end as the proxies stated it; undefined when the origin never said. */
  completeLength?: number;
  ranges: number;
  /** Ranges tried again after a failure that trying again could mend. */
  retries: number;
  /** Bytes of all ranges / bytes received from every proxy (each range's normalized goodput, weighted). */
  normalizedGoodput: number;
  contentType?: string;
  proxies: ProxyTotals[];
  /** The most proxies any range was served by. */
  mostProxies: number;
}

export class SplitError extends Error {
  override readonly name = 'SplitError';
}

export interface SplitEvents {
  /** A range failed and is tried again after `waitMs` (attempt counts from 2). */
  onRetry?: (range: ByteRange, attempt: number, error: unknown, waitMs: number) => void;
  /** How to wait between tries (tests pass one that does not). */
  sleep?: (ms: number) => Promise<void>;
  /** Called per datagram of a range with the bytes of the download done so far (from `plan.start`). */
  onBytes?: (done: number, total: number | undefined, progress: DownloadProgress) => void;
  /** Called after each range is committed. */
  onRange?: (result: GetResult, progress: SplitProgress) => void;
  /**
   * Called before each range is fetched with the next `plan.lookahead` ranges after it (fewer
   * near the end), in order; the same range may be announced again before its turn.
   */
  onUpcoming?: (ranges: ByteRange[]) => void;
}

/** The range a 416 refused: the end of a resource whose length the origin never stated. */
const NOT_SATISFIABLE = /range not satisfiable|range-not-satisfiable/;

/**
 * Failures another try can mend: sources that stayed silent or could not confirm the range, lost
 * connections, a proxy that could not be reached. Not: what the origin answered (404, 416, too
 * large), sources that disagree (a conflict is judged by origo, not retried into agreement), a
 * cancel, origo unreachable (the client already moved through every instance).
 */
export function retryable(error: unknown): boolean {
  const text = String(error instanceof Error ? error.message : error);
  if (/^cancelled|origin not found|origin error|range not satisfiable|too large|bad request|unsupported/.test(text))
    return false;
  return /^connect-failed|^download-failed: (metadata-unconfirmed|idle-timeout|all-sources-failed)/.test(text);
}

/** Waits 1 s, 2 s, 4 s ... between tries, at most 8 s. */
const retryWaitMs = (attempt: number) => Math.min(8000, 1000 * 2 ** (attempt - 2));

export async function downloadSplit(
  fetchRange: FetchRange,
  plan: SplitPlan,
  sink: SplitSink,
  from: SplitProgress = { nextOffset: plan.start },
  events: SplitEvents = {},
): Promise<SplitResult> {
  if (!(plan.chunkBytes >= 1) || from.nextOffset < plan.start) throw new RangeError('bad split plan');
  let offset = from.nextOffset;
  let completeLength = from.completeLength;
  const totals = new Map<string, ProxyTotals>();
  let ranges = 0;
  let retries = 0;
  let weightedGoodput = 0;
  let contentType: string | undefined;
  let mostProxies = 0;

  const lastByte = () => Math.min(plan.end ?? Infinity, completeLength !== undefined ? completeLength - 1 : Infinity);
  const total = () => (Number.isFinite(lastByte()) ? lastByte() + 1 - plan.start : undefined);

  while (offset <= lastByte()) {
    const length = Math.min(plan.chunkBytes, lastByte() - offset + 1);
    const done = offset - plan.start;
    if (plan.lookahead && events.onUpcoming) {
      const upcoming = rangesAfter(offset + length, lastByte(), plan.chunkBytes, plan.lookahead);
      if (upcoming.length > 0) events.onUpcoming(upcoming);
    }
    let result: GetResult | undefined;
    for (let attempt = 1; !result; attempt++) {
      try {
        result = await fetchRange({ start: offset, length }, (p) => {
          const fraction = p.totalDof > 0 ? p.dof / p.totalDof : 0;
          events.onBytes?.(done + Math.floor(fraction * (p.bytes || length)), total(), p);
        });
      } catch (e) {
        if (attempt < (plan.maxTries ?? 1) && retryable(e)) {
          const waitMs = retryWaitMs(attempt + 1);
          retries++;
          events.onRetry?.({ start: offset, length }, attempt + 1, e, waitMs);
          await (events.sleep ?? ((ms) => new Promise<void>((r) => setTimeout(r, ms))))(waitMs);
          continue;
        }
        // Past the end of a resource of unknown length: the previous range was its last.
        if (completeLength === undefined && offset > plan.start && NOT_SATISFIABLE.test(String(e))) break;
        throw e;
      }
    }
    if (!result) break;
    const served = result.attributes?.range;
    if (!served || served.start !== offset)
      throw new SplitError(`bytes from ${offset} came back without their place in the object`);
    if (served.completeLength !== undefined) {
      if (completeLength !== undefined && served.completeLength !== completeLength)
        throw new SplitError(
          `the object changed while it was downloaded: it had ${completeLength} bytes, now ${served.completeLength}`,
        );
      completeLength = served.completeLength;
    }
    if (result.object.length === 0) throw new SplitError(`no bytes at offset ${offset}`);
    await sink.write(offset, result.object);
    offset += result.object.length;
    await sink.commit({ nextOffset: offset, ...(completeLength !== undefined ? { completeLength } : {}) });

    ranges++;
    weightedGoodput += result.normalizedGoodput * result.object.length;
    contentType ??= result.attributes?.contentType;
    mostProxies = Math.max(mostProxies, result.sources.length);
    addTotals(totals, result);
    events.onRange?.(result, { nextOffset: offset, completeLength });
    // A short range without a stated length is the end of the resource.
    if (result.object.length < length && completeLength === undefined) break;
  }

  const fetchedBytes = offset - from.nextOffset;
  const proxies = [...totals.values()];
  for (const p of proxies) p.share = fetchedBytes > 0 ? p.share / fetchedBytes : 0;
  return {
    fetchedBytes,
    resumedFrom: from.nextOffset,
    ...(completeLength !== undefined ? { completeLength } : {}),
    ranges,
    retries,
    normalizedGoodput: fetchedBytes > 0 ? weightedGoodput / fetchedBytes : 0,
    ...(contentType !== undefined ? { contentType } : {}),
    proxies,
    mostProxies,
  };
}

/** Up to `count` ranges of `chunkBytes` from `from` to `lastByte` (inclusive); none when the end is unknown. */
function rangesAfter(from: number, lastByte: number, chunkBytes: number, count: number): ByteRange[] {
  const ranges: ByteRange[] = [];
  if (!Number.isFinite(lastByte)) return ranges;
  for (let at = from; at <= lastByte && ranges.length < count; at += chunkBytes)
    ranges.push({ start: at, length: Math.min(chunkBytes, lastByte - at + 1) });
  return ranges;
}

/** Adds one range's per-proxy figures (share still weighted by bytes: divided at the end). */
function addTotals(totals: Map<string, ProxyTotals>, result: GetResult): void {
  for (const s of result.sources) {
    const t = totals.get(s.proxyId) ?? {
      proxyId: s.proxyId,
      name: s.name,
      bytes: 0,
      share: 0,
      ranges: 0,
      failures: [],
    };
    t.bytes += s.bytes;
    t.share += s.share * result.object.length;
    t.ranges++;
    if ('useful' in s) {
      t.packets ??= { received: 0, useful: 0 };
      t.packets.received += s.received;
      t.packets.useful += s.useful;
    }
    const failure = 'state' in s && (s.state === 'failed' || s.state === 'dropped') ? (s.error ?? s.state) : undefined;
    if (failure !== undefined && !t.failures.includes(failure)) t.failures.push(failure);
    totals.set(s.proxyId, t);
  }
}
