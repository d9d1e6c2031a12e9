/**
 * The popup's chart: goodput of the last downloads as an inline SVG bar chart (no library).
 * Failed downloads show as a short red mark, range-cache hits are left out.
 */
import { SegmentRecord } from '../common/messages';
import { formatRate } from './format';

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 400;
const HEIGHT = 90;
const PAD_TOP = 14;
const BARS = 40;

function node<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number>,
): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

export function goodputChart(segments: SegmentRecord[]): SVGSVGElement {
  const svg = node('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': 'goodput per download' });
  const shown = segments.filter((s) => !s.cached).slice(-BARS);
  if (shown.length === 0) {
    const t = node('text', { x: WIDTH / 2, y: HEIGHT / 2, 'text-anchor': 'middle', fill: '#6e7781', 'font-size': 12 });
    t.textContent = 'no downloads yet';
    svg.append(t);
    return svg;
  }
  const max = Math.max(...shown.map((s) => (s.ok ? s.goodputBps : 0)), 1);
  const step = WIDTH / BARS;
  shown.forEach((s, i) => {
    const x = i * step + 1;
    if (!s.ok) {
      svg.append(node('rect', { x, y: HEIGHT - 4, width: step - 2, height: 4, fill: '#cf222e' }));
      return;
    }
    const h = Math.max(1, ((HEIGHT - PAD_TOP) * s.goodputBps) / max);
    const bar = node('rect', { x, y: HEIGHT - h, width: step - 2, height: h, fill: '#1f6feb' });
    const title = node('title', {});
    title.textContent = `${formatRate(s.goodputBps)}, ${s.mode}`;
    bar.append(title);
    svg.append(bar);
  });
  const label = node('text', { x: 4, y: 11, fill: '#6e7781', 'font-size': 10 });
  label.textContent = `max ${formatRate(max)}`;
  svg.append(label);
  return svg;
}
