/**
 * How many segments an MPD makes mpd-parser list, counted from its attributes before mpd-parser
 * lists them. A few hundred bytes of MPD can declare millions of segments (a SegmentTimeline
 * `<S r="4294967296">`, or a SegmentTemplate duration of 1 ms over an hour): mpd-parser then
 * builds every one of them, blocking the page for seconds or running it out of memory, long before
 * the hook's own cap applies. Such an MPD is refused (the page's requests go to the network).
 */
import { inheritAttributes, stringToMpdXml } from 'mpd-parser';

/** About an eighth of a second of mpd-parser's work; far beyond what players list in practice. */
export const MAX_DECLARED_DASH_SEGMENTS = 50_000;

type Attributes = Record<string, unknown>;

const num = (v: unknown): number => (typeof v === 'number' ? v : NaN);

/** Seconds the representation's segments may cover (what mpd-parser divides by the segment duration). */
function spanSeconds(a: Attributes): number {
  if (a.type === 'dynamic') {
    // Live: segments from the period start up to now (mpd-parser's NOW, in ms) plus an update period.
    const now = (num(a.NOW) + (num(a.clientOffset) || 0)) / 1000 + (num(a.minimumUpdatePeriod) || 0);
    const start = (num(a.availabilityStartTime) || 0) + (num(a.periodStart) || 0);
    const depth = num(a.timeShiftBufferDepth);
    const span = now - start;
    return Number.isFinite(depth) && depth >= 0 ? Math.min(span, depth + (num(a.minimumUpdatePeriod) || 0) + 1) : span;
  }
  const candidates = [a.periodDuration, a.sourceDuration, a.mediaPresentationDuration].map(num);
  return candidates.find((d) => Number.isFinite(d)) ?? 0;
}

/** Segments of one representation, or Infinity when they cannot be bounded. */
function representationSegments(a: Attributes, info: Attributes): number {
  // mpd-parser merges the representation's attributes with its SegmentTemplate or SegmentList.
  const merged: Attributes = { ...a, ...((info.template ?? info.list ?? {}) as Attributes) };
  const timescale = num(merged.timescale) > 0 ? num(merged.timescale) : 1;
  const span = Math.max(0, spanSeconds(a)) * timescale;
  const byDuration = (d: number) => (d > 0 ? Math.ceil(span / d) + 1 : Infinity);
  const duration = num(merged.duration);
  const timeline = Array.isArray(info.segmentTimeline) ? (info.segmentTimeline as Attributes[]) : undefined;
  if (!info.template && !info.list) return 1; // SegmentBase or a single file
  // An endNumber makes mpd-parser list up to it whatever the period's length (60,000 from 10 s).
  const endNumber = Number(merged.endNumber);
  if (Number.isFinite(endNumber)) {
    const startNumber = Number(merged.startNumber ?? 1);
    return Math.max(0, endNumber - (Number.isFinite(startNumber) ? startNumber : 1) + 1);
  }
  // A duration wins over a timeline (as in mpd-parser); a SegmentList is timed slot by slot
  // before its URLs are matched to the slots.
  if (duration) return byDuration(duration);
  if (timeline) return timelineSegments(timeline, merged, timescale);
  if (info.list) return Array.isArray(merged.segmentUrls) ? merged.segmentUrls.length : 0;
  return 1;
}

/**
 * Where an open repeat on the last S runs to, in timescale units, as mpd-parser decides it
 * (parseByTimeline, getLiveRValue): live templates numbered by $Number$ run to now plus the update
 * period; everything else to the presentation's duration. Both are counted from the S's own time,
 * which may be negative.
 */
function openRepeatEnd(a: Attributes, timescale: number): number {
  const media = typeof a.media === 'string' ? a.media : '';
  if (a.type === 'dynamic' && num(a.minimumUpdatePeriod) > 0 && media.indexOf('$Number$') > 0) {
    const now = (num(a.NOW) + num(a.clientOffset)) / 1000;
    const periodStart = num(a.availabilityStartTime) + (num(a.periodStart) || 0);
    return (now + num(a.minimumUpdatePeriod) - periodStart) * timescale;
  }
  return num(a.sourceDuration) * timescale;
}

/**
 * As mpd-parser counts a SegmentTimeline (parseByTimeline): an open repeat (r < 0) runs to the
 * next S's time, or to the end of the presentation; numbers count up from startNumber one by one,
 * so a start near 2^53 never reaches the end. A count mpd-parser cannot finish (NaN, Infinity) or
 * one past the budget ends the count early.
 */
function timelineSegments(timeline: Attributes[], merged: Attributes, timescale: number): number {
  const startNumber = num(merged.startNumber ?? 1);
  let count = 0;
  let time = -1;
  for (let i = 0; i < timeline.length && count <= MAX_DECLARED_DASH_SEGMENTS; i++) {
    const s = timeline[i];
    const d = num(s.d);
    const r = num(s.r ?? 0) || 0;
    const t = num(s.t ?? 0) || 0;
    if (time < 0) time = t;
    if (t && t > time) time = t;
    const next = timeline[i + 1];
    const n = r >= 0 ? r + 1 : ((next ? num(next.t) : openRepeatEnd(merged, timescale)) - time) / d;
    if (!Number.isFinite(n)) return Infinity;
    const listed = n > 0 ? Math.ceil(n) : 0;
    count += listed;
    time += listed * d;
  }
  return Number.isSafeInteger(startNumber + count) || count === 0 ? count : Infinity;
}

/** Segments mpd-parser would list for this MPD (NaN-free: Infinity when unbounded). */
export function declaredDashSegments(text: string, manifestUrl: string, now = Date.now()): number {
  const { representationInfo } = inheritAttributes(stringToMpdXml(text), { manifestUri: manifestUrl, NOW: now });
  let total = 0;
  for (const r of representationInfo) {
    const n = representationSegments(r.attributes, r.segmentInfo);
    total += Number.isNaN(n) ? Infinity : n;
  }
  return total;
}
