/**
 * The downloader frame's own timeline of its downloads (extension/src/downloader/timeline.ts),
 * read through the frame's DevTools session, summarized per download: the gap since the previous
 * one ended, time to the first datagram, time from it to the end; and how the WebTransport links
 * batched their datagrams (datagram-batches.ts), where the build has them.
 */
import type { CDPSession } from 'puppeteer-core';

export const FRAME_TIMELINE_EXPRESSION = 'globalThis.__mutpFrameTimeline?.()';

interface Entry {
  mode: string;
  startedAt: number;
  firstByteAt?: number;
  endedAt?: number;
  datagrams: number;
  objectBytes: number;
  ok?: boolean;
}

const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;

export interface TimelineRow {
  mode: string;
  ok?: boolean;
  /** From the previous download's end to this one's start (the player's and the hook's part), ms. */
  gapMs: number | null;
  firstByteMs: number | null;
  transferMs: number | null;
  totalMs: number | null;
  MBps: number | null;
  datagrams: number;
}

interface Batches {
  datagrams: number;
  batches: number;
  largestBatch: number;
  /** Datagrams the frame sent (requests, feedback, STOPs). */
  sent?: number;
}

export interface FrameTimeline {
  downloads: TimelineRow[];
  datagramBatches?: Batches & { meanBatch: number };
}

/** One row per download, in order, and the datagram batches, or why there are none. */
export async function readFrameTimeline(session: CDPSession): Promise<FrameTimeline | string> {
  const r = (await session
    .send('Runtime.evaluate', { expression: FRAME_TIMELINE_EXPRESSION, returnByValue: true })
    .catch((e: unknown) => ({ error: String(e) }))) as {
    result?: { value?: Entry[] | { downloads: Entry[]; datagramBatches?: Batches } };
    error?: string;
  };
  const value = r.result?.value;
  // A build from before the batches gave the downloads alone.
  const entries = Array.isArray(value) ? value : value?.downloads;
  if (!Array.isArray(entries)) return r.error ?? 'this build has no frame timeline';
  const batches = Array.isArray(value) ? undefined : value?.datagramBatches;
  return {
    downloads: rowsOf(entries),
    ...(batches
      ? { datagramBatches: { ...batches, meanBatch: round(batches.datagrams / Math.max(1, batches.batches), 2) } }
      : {}),
  };
}

function rowsOf(entries: Entry[]): TimelineRow[] {
  return entries.map((e, i) => {
    const previousEnd = i > 0 ? entries[i - 1].endedAt : undefined;
    const totalMs = e.endedAt === undefined ? null : e.endedAt - e.startedAt;
    return {
      mode: e.mode,
      ok: e.ok,
      gapMs: previousEnd === undefined ? null : round(e.startedAt - previousEnd),
      firstByteMs: e.firstByteAt === undefined ? null : round(e.firstByteAt - e.startedAt),
      transferMs: e.firstByteAt === undefined || e.endedAt === undefined ? null : round(e.endedAt - e.firstByteAt),
      totalMs: totalMs === null ? null : round(totalMs),
      MBps: totalMs && e.objectBytes ? round(e.objectBytes / totalMs / 1000, 2) : null,
      datagrams: e.datagrams,
    };
  });
}
