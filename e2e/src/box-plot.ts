/**
 * Hand-made SVG box plots (grouped: one group per number of sources, one box per mode), in the
 * manner of the MUTP paper's Fig. 2. Boxes span the quartiles with the median drawn across,
 * whiskers reach the furthest sample within 1.5 × IQR, samples beyond are drawn as dots.
 */

export interface BoxSeries {
  group: string;
  series: string;
  values: number[];
}

export interface BoxPlotOptions {
  title: string;
  yLabel: string;
  groups: string[];
  series: string[];
  colors: Record<string, string>;
  yMax?: number;
  /** A dashed reference level per group (e.g. the sum of the proxies' upload caps). */
  reference?: { label: string; values: Record<string, number> };
  width?: number;
  height?: number;
}

export interface BoxStats {
  n: number;
  min: number;
  q1: number;
  median: number;
  q3: number;
  max: number;
  whiskerLow: number;
  whiskerHigh: number;
  outliers: number[];
}

/** Quantile with linear interpolation between closest ranks (sorted input). */
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

export function boxStats(values: number[]): BoxStats | undefined {
  const s = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return undefined;
  const q1 = quantile(s, 0.25);
  const q3 = quantile(s, 0.75);
  const iqr = q3 - q1;
  const inside = s.filter((v) => v >= q1 - 1.5 * iqr && v <= q3 + 1.5 * iqr);
  return {
    n: s.length,
    min: s[0],
    q1,
    median: quantile(s, 0.5),
    q3,
    max: s[s.length - 1],
    whiskerLow: inside[0],
    whiskerHigh: inside[inside.length - 1],
    outliers: s.filter((v) => v < q1 - 1.5 * iqr || v > q3 + 1.5 * iqr),
  };
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A tick step of 1, 2 or 5 × 10^k giving about `target` ticks over [0, max]. */
function tickStep(max: number, target = 6): number {
  const raw = max / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  return (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
}

/** A tick label with as many decimals as the step needs. */
function fmt(v: number, step: number): string {
  return v.toFixed(Math.max(0, -Math.floor(Math.log10(step) + 1e-9)));
}

export function boxPlotSvg(data: BoxSeries[], o: BoxPlotOptions): string {
  const width = o.width ?? 900;
  const height = o.height ?? 460;
  const m = { left: 70, right: 20, top: 48, bottom: 70 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const dataMax = Math.max(
    0,
    ...data.flatMap((d) => d.values.filter(Number.isFinite)),
    ...Object.values(o.reference?.values ?? {}),
  );
  const step = tickStep(o.yMax ?? (dataMax > 0 ? dataMax * 1.05 : 1));
  const yMax = o.yMax ?? Math.max(step, Math.ceil((dataMax * 1.05) / step) * step);
  const y = (v: number) => m.top + plotH - (Math.min(v, yMax) / yMax) * plotH;
  const groupW = plotW / o.groups.length;
  const boxW = Math.min(46, (groupW * 0.8) / o.series.length);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${width / 2}" y="24" text-anchor="middle" font-size="16" font-weight="bold">${esc(o.title)}</text>`,
  );
  for (let v = 0; v <= yMax + step / 1e6; v += step) {
    out.push(
      `<line x1="${m.left}" x2="${m.left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#e3e3e3"/>`,
      `<text x="${m.left - 8}" y="${y(v) + 4}" text-anchor="end">${fmt(v, step)}</text>`,
    );
  }
  out.push(
    `<line x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${m.top + plotH}" stroke="#333"/>`,
    `<line x1="${m.left}" x2="${m.left + plotW}" y1="${m.top + plotH}" y2="${m.top + plotH}" stroke="#333"/>`,
    `<text transform="translate(18 ${m.top + plotH / 2}) rotate(-90)" text-anchor="middle">${esc(o.yLabel)}</text>`,
  );
  o.groups.forEach((group, gi) => {
    const gx = m.left + gi * groupW;
    out.push(
      `<text x="${gx + groupW / 2}" y="${m.top + plotH + 22}" text-anchor="middle" font-weight="bold">${esc(group)}</text>`,
    );
    if (gi > 0)
      out.push(
        `<line x1="${gx}" x2="${gx}" y1="${m.top}" y2="${m.top + plotH}" stroke="#bbb" stroke-dasharray="4 4"/>`,
      );
    const ref = o.reference?.values[group];
    if (ref !== undefined && Number.isFinite(ref)) {
      out.push(
        `<line x1="${gx + 8}" x2="${gx + groupW - 8}" y1="${y(ref)}" y2="${y(ref)}" stroke="#555" stroke-dasharray="6 3"/>`,
        `<text x="${gx + groupW - 10}" y="${y(ref) - 5}" text-anchor="end" font-size="11" fill="#555">${esc(o.reference!.label)}</text>`,
      );
    }
    o.series.forEach((series, si) => {
      const cx = gx + groupW / 2 + (si - (o.series.length - 1) / 2) * (boxW * 1.25);
      const color = o.colors[series] ?? '#888';
      const st = boxStats(data.find((d) => d.group === group && d.series === series)?.values ?? []);
      if (!st) {
        out.push(`<text x="${cx}" y="${m.top + plotH - 6}" text-anchor="middle" fill="#999">–</text>`);
        return;
      }
      const half = boxW / 2;
      out.push(
        `<line x1="${cx}" x2="${cx}" y1="${y(st.whiskerHigh)}" y2="${y(st.q3)}" stroke="#333"/>`,
        `<line x1="${cx}" x2="${cx}" y1="${y(st.q1)}" y2="${y(st.whiskerLow)}" stroke="#333"/>`,
        `<line x1="${cx - half / 2}" x2="${cx + half / 2}" y1="${y(st.whiskerHigh)}" y2="${y(st.whiskerHigh)}" stroke="#333"/>`,
        `<line x1="${cx - half / 2}" x2="${cx + half / 2}" y1="${y(st.whiskerLow)}" y2="${y(st.whiskerLow)}" stroke="#333"/>`,
        `<rect x="${cx - half}" y="${y(st.q3)}" width="${boxW}" height="${Math.max(1, y(st.q1) - y(st.q3))}" fill="${color}" fill-opacity="0.75" stroke="#333"/>`,
        `<line x1="${cx - half}" x2="${cx + half}" y1="${y(st.median)}" y2="${y(st.median)}" stroke="#000" stroke-width="2.5"/>`,
        ...st.outliers.map(
          (v) => `<circle cx="${cx}" cy="${y(v)}" r="3" fill="none" stroke="${color}" stroke-width="1.5"/>`,
        ),
        `<text x="${cx}" y="${m.top + plotH + 40}" text-anchor="middle" font-size="10" fill="#555">n=${st.n}</text>`,
      );
    });
  });
  // Legend.
  const legendY = height - 14;
  const itemW = 120;
  const legendX = m.left + plotW / 2 - (o.series.length * itemW) / 2;
  o.series.forEach((series, i) => {
    const x = legendX + i * itemW;
    out.push(
      `<rect x="${x}" y="${legendY - 11}" width="14" height="14" fill="${o.colors[series] ?? '#888'}" fill-opacity="0.75" stroke="#333"/>`,
      `<text x="${x + 20}" y="${legendY}">${esc(series)}</text>`,
    );
  });
  out.push('</svg>');
  return out.join('\n');
}
