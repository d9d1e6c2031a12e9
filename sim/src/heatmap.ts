/**
 * Heatmaps as PNG (@napi-rs/canvas: Skia, prebuilt, no system libraries; text uses the system's
 * DejaVu or Liberation fonts, which the project's setup installs with Chromium and Firefox).
 * One image holds one or more panels that share axes and a colour scale: a title, subtitle lines,
 * per panel a grid of cells with the value printed in each, tick labels and axis labels, a colour
 * bar with its label, and notes under it all.
 */
import { createCanvas, SKRSContext2D } from '@napi-rs/canvas';

export interface HeatmapPanel {
  title: string;
  /** values[row][column]; null: no value (drawn grey, "-"). */
  values: (number | null)[][];
  /** Cells to mark with "!" (e.g. a failed or inexact download among the seeds). */
  flags?: boolean[][];
}

export interface HeatmapSpec {
  title: string;
  subtitle: string[];
  xLabel: string;
  yLabel: string;
  /** Column labels, left to right, and row labels, top to bottom. */
  xTicks: string[];
  yTicks: string[];
  panels: HeatmapPanel[];
  /**
   * Colours run from min to max (values outside are clamped); `label` names the quantity. `log`:
   * colour by log(value), for ratios spanning more than a decade (min must be > 0).
   */
  scale: { min: number; max: number; label: string; log?: boolean };
  /** How a value is printed in its cell, and on the colour bar unless `tickFormat` is given. */
  format: (v: number) => string;
  tickFormat?: (v: number) => string;
  notes?: string[];
  /** Panels per row of the image; default 2. */
  panelColumns?: number;
}

const FONT_FAMILY = '"DejaVu Sans", "Liberation Sans", sans-serif';
const font = (px: number, bold = false) => `${bold ? 'bold ' : ''}${px}px ${FONT_FAMILY}`;
const TITLE_PX = 20;
const SUBTITLE_PX = 14;
const PANEL_TITLE_PX = 15;
const TICK_PX = 13;
const CELL_PX = 13;
const NOTE_PX = 12;
const MARGIN = 24;
const CELL_HEIGHT = 32;
const GAP = 36;
const BAR_WIDTH = 18;
const BAR_TICKS = 5;
/** From a panel's top to its first row of cells: the panel title, then the column labels. */
const GRID_OFFSET = PANEL_TITLE_PX + 10 + TICK_PX + 8;

/** Viridis sampled at 0, 0.1, ..., 1 (perceptually uniform, readable in grey and by most colour-blind readers). */
const VIRIDIS = [
  '#440154',
  '#482475',
  '#414487',
  '#355f8d',
  '#2a788e',
  '#21918c',
  '#22a884',
  '#44bf70',
  '#7ad151',
  '#bddf26',
  '#fde725',
].map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));

/** The colour of `t` in [0, 1] as [r, g, b]. */
export function colourAt(t: number): number[] {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - i;
  return VIRIDIS[i].map((c, k) => Math.round(c + (VIRIDIS[i + 1][k] - c) * f));
}

const css = (rgb: number[]) => `rgb(${rgb.join(',')})`;
/** Black text on light cells, white on dark (relative luminance, sRGB weights). */
const textOn = (rgb: number[]) => (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2] > 140 ? '#000' : '#fff');

export interface HeatmapLayout {
  width: number;
  height: number;
  cellWidth: number;
  /** Left edge of the cells within a panel (after the y label and tick labels). */
  gridLeft: number;
  panelWidth: number;
  panelHeight: number;
  /** Top of the first row of panels. */
  panelsTop: number;
  rows: number;
  columns: number;
}

/** Sizes everything from the text it must hold; deterministic for a given spec and font set. */
export function layoutHeatmap(spec: HeatmapSpec): HeatmapLayout {
  const measure = createCanvas(8, 8).getContext('2d');
  const widthOf = (text: string, px: number, bold = false) => {
    measure.font = font(px, bold);
    return Math.ceil(measure.measureText(text).width);
  };
  const cellTexts = spec.panels.flatMap((p) => p.values.flat().map((v) => (v == null ? '-' : `${spec.format(v)}!`)));
  const cellWidth = Math.max(
    56,
    ...spec.xTicks.map((t) => widthOf(t, TICK_PX) + 12),
    ...cellTexts.map((t) => widthOf(t, CELL_PX) + 12),
  );
  const yTickWidth = Math.max(0, ...spec.yTicks.map((t) => widthOf(t, TICK_PX)));
  const gridLeft = TICK_PX + 12 + yTickWidth + 8;
  const gridWidth = cellWidth * spec.xTicks.length;
  const panelWidth = Math.max(
    gridLeft + gridWidth,
    gridLeft + widthOf(spec.xLabel, TICK_PX),
    ...spec.panels.map((p) => widthOf(p.title, PANEL_TITLE_PX, true)),
  );
  // Panel title, x tick labels above the grid, the grid, the x label below.
  const panelHeight = GRID_OFFSET + CELL_HEIGHT * spec.yTicks.length + 8 + TICK_PX + 4;
  const columns = Math.max(1, Math.min(spec.panelColumns ?? 2, spec.panels.length));
  const rows = Math.ceil(spec.panels.length / columns);
  const panelsTop = MARGIN + TITLE_PX + 8 + spec.subtitle.length * (SUBTITLE_PX + 6) + 12;
  const tickFormat = spec.tickFormat ?? spec.format;
  const barLabels = Math.max(...barTicks(spec).map((v) => widthOf(tickFormat(v), TICK_PX)));
  const barArea = GAP + BAR_WIDTH + 6 + barLabels + 10 + TICK_PX + 4;
  const notes = spec.notes ?? [];
  const textWidth = Math.max(
    widthOf(spec.title, TITLE_PX, true),
    ...spec.subtitle.map((s) => widthOf(s, SUBTITLE_PX)),
    ...notes.map((n) => widthOf(n, NOTE_PX)),
  );
  const width = MARGIN * 2 + Math.max(textWidth, columns * panelWidth + (columns - 1) * GAP + barArea);
  const height = panelsTop + rows * panelHeight + (rows - 1) * GAP + 12 + notes.length * (NOTE_PX + 6) + MARGIN;
  return { width, height, cellWidth, gridLeft, panelWidth, panelHeight, panelsTop, rows, columns };
}

/** Linear: five evenly spaced. Log: the powers of two in range (ends included when too few). */
function barTicks(spec: HeatmapSpec): number[] {
  const { min, max, log } = spec.scale;
  if (log) {
    const powers: number[] = [];
    for (let k = Math.ceil(Math.log2(min) - 1e-9); 2 ** k <= max * (1 + 1e-9); k++) powers.push(2 ** k);
    return powers.length >= 2 ? powers : [min, max];
  }
  return Array.from({ length: BAR_TICKS }, (_, i) => min + ((max - min) * i) / (BAR_TICKS - 1));
}

/** Where `v` falls on the scale, 0 (min) to 1 (max), unclamped. */
export function scalePosition(scale: HeatmapSpec['scale'], v: number): number {
  const { min, max, log } = scale;
  if (log) return max > min && v > 0 ? Math.log(v / min) / Math.log(max / min) : 0;
  return max > min ? (v - min) / (max - min) : 0;
}

/** Top-left corner of a panel. */
function panelOrigin(layout: HeatmapLayout, panel: number): { left: number; top: number } {
  return {
    left: MARGIN + (panel % layout.columns) * (layout.panelWidth + GAP),
    top: layout.panelsTop + Math.floor(panel / layout.columns) * (layout.panelHeight + GAP),
  };
}

/** Where a cell is drawn: its top-left corner and size in pixels. */
export function cellRect(
  layout: HeatmapLayout,
  panel: number,
  row: number,
  column: number,
): { x: number; y: number; width: number; height: number } {
  const { left, top } = panelOrigin(layout, panel);
  return {
    x: left + layout.gridLeft + column * layout.cellWidth,
    y: top + GRID_OFFSET + row * CELL_HEIGHT,
    width: layout.cellWidth,
    height: CELL_HEIGHT,
  };
}

/** The image as PNG bytes. */
export function renderHeatmap(spec: HeatmapSpec): Buffer {
  const layout = layoutHeatmap(spec);
  const canvas = createCanvas(layout.width, layout.height);
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, layout.width, layout.height);
  ctx.fillStyle = '#000';
  ctx.textBaseline = 'top';
  ctx.textAlign = 'left';
  ctx.font = font(TITLE_PX, true);
  ctx.fillText(spec.title, MARGIN, MARGIN);
  ctx.font = font(SUBTITLE_PX);
  spec.subtitle.forEach((line, i) => ctx.fillText(line, MARGIN, MARGIN + TITLE_PX + 8 + i * (SUBTITLE_PX + 6)));
  spec.panels.forEach((panel, i) => drawPanel(ctx, spec, layout, panel, i));
  drawColourBar(ctx, spec, layout);
  ctx.fillStyle = '#333';
  ctx.font = font(NOTE_PX);
  ctx.textAlign = 'left';
  const notesTop = layout.panelsTop + layout.rows * layout.panelHeight + (layout.rows - 1) * GAP + 12;
  (spec.notes ?? []).forEach((note, i) => ctx.fillText(note, MARGIN, notesTop + i * (NOTE_PX + 6)));
  return canvas.toBuffer('image/png');
}

function drawPanel(
  ctx: SKRSContext2D,
  spec: HeatmapSpec,
  layout: HeatmapLayout,
  panel: HeatmapPanel,
  index: number,
): void {
  const { cellWidth, gridLeft } = layout;
  const { left, top } = panelOrigin(layout, index);
  const gridTop = top + GRID_OFFSET;
  const gridHeight = CELL_HEIGHT * spec.yTicks.length;
  ctx.fillStyle = '#000';
  ctx.textBaseline = 'top';
  ctx.textAlign = 'left';
  ctx.font = font(PANEL_TITLE_PX, true);
  ctx.fillText(panel.title, left, top);
  // Column labels above the cells, row labels left of them.
  ctx.font = font(TICK_PX);
  ctx.textAlign = 'center';
  spec.xTicks.forEach((t, c) => ctx.fillText(t, left + gridLeft + (c + 0.5) * cellWidth, gridTop - TICK_PX - 6));
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  spec.yTicks.forEach((t, r) => ctx.fillText(t, left + gridLeft - 8, gridTop + (r + 0.5) * CELL_HEIGHT));
  // Axis labels: x under the grid, y rotated along its left edge.
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  ctx.fillText(spec.xLabel, left + gridLeft + (cellWidth * spec.xTicks.length) / 2, gridTop + gridHeight + 8);
  ctx.save();
  ctx.translate(left, gridTop + gridHeight / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText(spec.yLabel, 0, 0);
  ctx.restore();
  ctx.font = font(CELL_PX);
  ctx.textBaseline = 'middle';
  spec.yTicks.forEach((_, r) =>
    spec.xTicks.forEach((__, c) => {
      const v = panel.values[r]?.[c] ?? null;
      const { x, y } = cellRect(layout, index, r, c);
      const rgb = v == null ? [220, 220, 220] : colourAt(scalePosition(spec.scale, v));
      ctx.fillStyle = css(rgb);
      ctx.fillRect(x, y, cellWidth, CELL_HEIGHT);
      ctx.strokeStyle = '#fff';
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, y + 0.5, cellWidth - 1, CELL_HEIGHT - 1);
      ctx.fillStyle = v == null ? '#555' : textOn(rgb);
      const text = v == null ? '-' : `${spec.format(v)}${panel.flags?.[r]?.[c] ? '!' : ''}`;
      ctx.fillText(text, x + cellWidth / 2, y + CELL_HEIGHT / 2);
    }),
  );
}

function drawColourBar(ctx: SKRSContext2D, spec: HeatmapSpec, layout: HeatmapLayout): void {
  const left = MARGIN + layout.columns * layout.panelWidth + (layout.columns - 1) * GAP + GAP;
  const top = layout.panelsTop + GRID_OFFSET;
  // From the first row of panels' top cell to the last row's bottom cell.
  const height = Math.max(
    CELL_HEIGHT * 3,
    (layout.rows - 1) * (layout.panelHeight + GAP) + CELL_HEIGHT * spec.yTicks.length,
  );
  for (let y = 0; y < height; y++) {
    ctx.fillStyle = css(colourAt(1 - y / (height - 1)));
    ctx.fillRect(left, top + y, BAR_WIDTH, 1);
  }
  ctx.strokeStyle = '#000';
  ctx.lineWidth = 1;
  ctx.strokeRect(left + 0.5, top + 0.5, BAR_WIDTH - 1, height - 1);
  ctx.fillStyle = '#000';
  ctx.font = font(TICK_PX);
  ctx.textAlign = 'left';
  ctx.textBaseline = 'middle';
  let labelsRight = 0;
  for (const v of barTicks(spec)) {
    const y = top + (1 - scalePosition(spec.scale, v)) * (height - 1);
    ctx.fillRect(left + BAR_WIDTH, Math.round(y), 4, 1);
    const text = (spec.tickFormat ?? spec.format)(v);
    ctx.fillText(text, left + BAR_WIDTH + 6, y);
    labelsRight = Math.max(labelsRight, left + BAR_WIDTH + 6 + ctx.measureText(text).width);
  }
  ctx.save();
  ctx.translate(labelsRight + 10 + TICK_PX, top + height / 2);
  ctx.rotate(Math.PI / 2);
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  ctx.fillText(spec.scale.label, 0, 0);
  ctx.restore();
}
