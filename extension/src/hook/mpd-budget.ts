/**
 * How many segments mpd-parser would generate from an MPD, counted from the XML before it
 * expands anything. A SegmentTemplate with `@duration` (or a SegmentTimeline `S@r="-1"`) becomes
 * one object per segment of the period, so a 1 KB MPD can declare millions of them and block the
 * page for seconds; the hook refuses such an MPD before it is expanded (see manifest.ts). The count
 * follows mpd-parser's rules (templates inherited Period → AdaptationSet → Representation,
 * `@endNumber`, static period lengths, the live window of dynamic MPDs) and errs on the high side.
 */

/** Seconds in an ISO 8601 duration (`PT2S`, `P1DT1H`), NaN when it is not one. */
export function isoDurationSeconds(value: string | null | undefined): number {
  if (!value) return NaN;
  const m =
    /^P(?:(\d+(?:\.\d+)?)Y)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$/.exec(
      value.trim(),
    );
  if (!m) return NaN;
  const [y, mo, d, h, mi, s] = m.slice(1).map((x) => (x === undefined ? 0 : Number(x)));
  return y * 365 * 86400 + mo * 30 * 86400 + d * 86400 + h * 3600 + mi * 60 + s;
}

/** The minimal DOM the count needs (xmldom's and the browser's elements both have it). */
export interface XmlElement {
  readonly nodeType: number;
  readonly nodeName: string;
  readonly childNodes: ArrayLike<unknown>;
  getAttribute(name: string): string | null;
}

function children(el: XmlElement, name: string): XmlElement[] {
  const out: XmlElement[] = [];
  for (let i = 0; i < el.childNodes.length; i++) {
    const c = el.childNodes[i] as XmlElement;
    if (c.nodeType === 1 && c.nodeName.replace(/^.*:/, '') === name) out.push(c);
  }
  return out;
}

function num(value: string | null | undefined): number {
  return value === null || value === undefined || value.trim() === '' ? NaN : Number(value);
}

/** Segments one template chain yields over `horizon` seconds (Infinity when it cannot be bounded). */
function templateCount(chain: XmlElement[], horizon: number): number {
  const attr = (name: string) => {
    let v: string | null = null;
    for (const t of chain) v = t.getAttribute(name) ?? v; // the innermost wins
    return v;
  };
  const timescale = num(attr('timescale')) > 0 ? num(attr('timescale')) : 1;
  let timeline: XmlElement | undefined;
  for (const t of chain) timeline = children(t, 'SegmentTimeline')[0] ?? timeline;
  if (timeline) {
    let count = 0;
    for (const s of children(timeline, 'S')) {
      const r = Number.isFinite(num(s.getAttribute('r'))) ? Math.trunc(num(s.getAttribute('r'))) : 0;
      const d = num(s.getAttribute('d'));
      if (r >= 0) count += r + 1;
      else if (!(d > 0)) return Infinity;
      else count += Number.isFinite(horizon) ? Math.ceil((Math.max(0, horizon) * timescale) / d) : Infinity;
    }
    return count;
  }
  const duration = num(attr('duration'));
  if (!(duration > 0)) return 0; // no template expansion without a duration
  const endNumber = num(attr('endNumber'));
  if (Number.isFinite(endNumber)) return Math.max(0, endNumber);
  if (!Number.isFinite(horizon)) return Number.isNaN(horizon) ? 0 : Infinity;
  return Math.ceil((Math.max(0, horizon) * timescale) / duration);
}

/** Upper bound of the segments mpd-parser generates for `mpd` (the MPD element) at `nowMs`. */
export function countMpdSegments(mpd: XmlElement, nowMs: number): number {
  const dynamic = mpd.getAttribute('type') === 'dynamic';
  const presentation = isoDurationSeconds(mpd.getAttribute('mediaPresentationDuration'));
  const update = isoDurationSeconds(mpd.getAttribute('minimumUpdatePeriod'));
  const shift = isoDurationSeconds(mpd.getAttribute('timeShiftBufferDepth'));
  const availabilityStart = Date.parse(mpd.getAttribute('availabilityStartTime') ?? '') / 1000;
  let total = 0;
  for (const period of children(mpd, 'Period')) {
    let horizon = isoDurationSeconds(period.getAttribute('duration'));
    if (dynamic) {
      const start = isoDurationSeconds(period.getAttribute('start'));
      const live = nowMs / 1000 - availabilityStart - (Number.isFinite(start) ? start : 0);
      const window = Number.isFinite(shift) ? Math.min(live, shift) + 1 : live;
      horizon = (Number.isFinite(window) ? window : NaN) + (Number.isFinite(update) ? update : 0);
    } else if (!Number.isFinite(horizon)) {
      horizon = presentation;
    }
    const periodTemplates = children(period, 'SegmentTemplate');
    for (const set of children(period, 'AdaptationSet')) {
      const setTemplates = [...periodTemplates, ...children(set, 'SegmentTemplate')];
      const representations = children(set, 'Representation');
      for (const rep of representations) {
        total += templateCount([...setTemplates, ...children(rep, 'SegmentTemplate')], horizon);
        if (total === Infinity) return total;
      }
    }
  }
  return total;
}
