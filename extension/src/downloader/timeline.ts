/**
 * The frame's last downloads as a timeline, for profiling (e2e's profile:browser reads it through
 * the DevTools protocol): when each started, got its first byte and ended, and how many datagrams
 * it took. Bounded (the last MAX_ENTRIES downloads); no URLs. The frame is an extension page, so
 * the page that embeds it cannot read it.
 */

/** Downloads kept. */
export const MAX_ENTRIES = 64;

export interface TimelineEntry {
  mode: string;
  /** performance.now() of the frame, ms. */
  startedAt: number;
  firstByteAt?: number;
  endedAt?: number;
  /** Datagrams the client reported progress for (every one that reached the transfer). */
  datagrams: number;
  /** The object's length once META told it (0 before). */
  objectBytes: number;
  ok?: boolean;
}

export class FrameTimeline {
  private readonly entries: TimelineEntry[] = [];

  /** A new download: its entry, which the caller updates (progress, end). */
  start(mode: string, now: number): TimelineEntry {
    const entry: TimelineEntry = { mode, startedAt: now, datagrams: 0, objectBytes: 0 };
    if (this.entries.length >= MAX_ENTRIES) this.entries.shift();
    this.entries.push(entry);
    return entry;
  }

  /** Called for every datagram of the download: cheap. */
  static progress(entry: TimelineEntry, objectBytes: number, now: () => number): void {
    if (entry.firstByteAt === undefined) entry.firstByteAt = now();
    entry.datagrams++;
    entry.objectBytes = objectBytes;
  }

  static end(entry: TimelineEntry, ok: boolean, now: number): void {
    entry.endedAt = now;
    entry.ok = ok;
  }

  snapshot(): TimelineEntry[] {
    return this.entries.map((e) => ({ ...e }));
  }
}
