/**
 * The sweep's publishing side: heatmaps rendered to PNG (sim/src/heatmap.ts) and the Markdown page
 * and README section (sim/src/sweep-report.ts), from documents made without simulating.
 */
import { inflateSync } from 'node:zlib';
import { createCanvas, loadImage } from '@napi-rs/canvas';
import { cellRect, colourAt, HeatmapSpec, layoutHeatmap, renderHeatmap, scalePosition } from '../src/heatmap';
import { sweepMatrix } from '../src/sweep';
import {
  heatmapFiles,
  markdownTable,
  README_BEGIN,
  README_END,
  readmeSummary,
  replaceBetweenMarkers,
  sweepMarkdown,
} from '../src/sweep-report';
import { fakeDocument } from './sweep-fixtures';

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** The PNG's chunks by type, checking the signature and each chunk's length. */
function pngChunks(png: Buffer): Map<string, Buffer[]> {
  expect([...png.subarray(0, 8)]).toEqual(PNG_SIGNATURE);
  const chunks = new Map<string, Buffer[]>();
  let at = 8;
  while (at < png.length) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    chunks.set(type, [...(chunks.get(type) ?? []), png.subarray(at + 8, at + 8 + length)]);
    at += 12 + length;
  }
  expect(at).toBe(png.length);
  return chunks;
}

const small: HeatmapSpec = {
  title: 'Efficiency, test map',
  subtitle: ['two panels, three by two cells'],
  xLabel: 'RTT (ms)',
  yLabel: 'sources N',
  xTicks: ['5', '40', '100'],
  yTicks: ['1', '6'],
  panels: [
    {
      title: 'rlnc',
      values: [
        [0, 0.5, 1],
        [0.25, null, 0.75],
      ],
      flags: [
        [false, false, true],
        [false, false, false],
      ],
    },
    {
      title: 'fountain',
      values: [
        [1, 1, 1],
        [0.9, 0.9, 0.9],
      ],
    },
  ],
  scale: { min: 0, max: 1, label: 'efficiency' },
  format: (v) => v.toFixed(2),
  notes: ['a note'],
};

describe('renderHeatmap', () => {
  test('a valid PNG of the laid-out size', () => {
    const png = renderHeatmap(small);
    const chunks = pngChunks(png);
    const ihdr = chunks.get('IHDR')![0];
    const layout = layoutHeatmap(small);
    expect(ihdr.readUInt32BE(0)).toBe(layout.width);
    expect(ihdr.readUInt32BE(4)).toBe(layout.height);
    expect(ihdr[8]).toBe(8); // bit depth
    expect(chunks.has('IEND')).toBe(true);
    // The image data inflates to one filter byte plus 3 or 4 bytes per pixel for every row.
    const raw = inflateSync(Buffer.concat(chunks.get('IDAT')!));
    const channels = { 2: 3, 6: 4 }[ihdr[9]]!;
    expect(raw.length).toBe(layout.height * (1 + layout.width * channels));
    expect(layout.columns).toBe(2);
    expect(layout.width).toBeGreaterThan(2 * layout.panelWidth);
  });

  test('each cell is painted with its value on the colour scale, missing values grey', async () => {
    const layout = layoutHeatmap(small);
    const image = await loadImage(renderHeatmap(small));
    const canvas = createCanvas(layout.width, layout.height);
    const ctx = canvas.getContext('2d');
    ctx.drawImage(image, 0, 0);
    // A pixel near the cell's corner: inside the fill, clear of the white border and the printed value.
    const pixel = (panel: number, row: number, column: number) => {
      const r = cellRect(layout, panel, row, column);
      return [...ctx.getImageData(r.x + 4, r.y + 4, 1, 1).data.subarray(0, 3)];
    };
    const near = (actual: number[], expected: number[]) =>
      actual.forEach((c, i) => expect(Math.abs(c - expected[i])).toBeLessThanOrEqual(2));
    near(pixel(0, 0, 0), colourAt(0));
    near(pixel(0, 0, 2), colourAt(1));
    near(pixel(0, 1, 0), colourAt(0.25));
    near(pixel(1, 1, 1), colourAt(0.9));
    near(pixel(0, 1, 1), [220, 220, 220]);
  });

  test('log scales place powers of two evenly', () => {
    const scale = { min: 1, max: 16, label: 'x', log: true };
    expect(scalePosition(scale, 1)).toBe(0);
    expect(scalePosition(scale, 4)).toBeCloseTo(0.5, 12);
    expect(scalePosition(scale, 16)).toBeCloseTo(1, 12);
    expect(colourAt(-1)).toEqual(colourAt(0));
    expect(colourAt(2)).toEqual(colourAt(1));
  });
});

describe('sweep report', () => {
  const doc = fakeDocument();

  test('two heatmaps per slice and cap mix, every mode on the efficiency one', () => {
    const files = heatmapFiles(doc);
    expect(files).toHaveLength(doc.slices.length * 2 * 2);
    const eff = files.find((f) => f.file === 'n-loss-mixed-efficiency.png')!;
    expect(eff.spec.panels.map((p) => p.title)).toEqual(doc.variants);
    expect(eff.spec.xTicks).toEqual(['0 %', '1 %', '2 %', '5 %', '2 % link', '2 % burst']);
    expect(eff.spec.title).toContain('sources × loss');
    expect(eff.spec.subtitle.join(' ')).toContain('2 MiB, RTT 40 ms, mixed caps');
    const rlnc = sweepMatrix(doc, 'n-loss', 'mixed', 'rlnc / partitioned');
    expect(eff.spec.panels[2].values[3][5]).toBe(rlnc[3][5]!.efficiency);
    const speedup = files.find((f) => f.file === 'size-rtt-uniform-speedup.png')!;
    expect(speedup.spec.panels.map((p) => p.title)).not.toContain('Parallel HTTP');
    expect(speedup.spec.scale.log).toBe(true);
    expect(Math.log2(speedup.spec.scale.max) % 1).toBe(0);
    // Renders (the PNG itself is checked above).
    expect([...renderHeatmap(speedup.spec).subarray(0, 8)]).toEqual(PNG_SIGNATURE);
  });

  test('the Markdown page embeds every image and lists every value', () => {
    const page = sweepMarkdown(doc);
    for (const f of heatmapFiles(doc)) expect(page).toContain(`(sim-sweep/${f.file})`);
    expect(page).toContain('npx tsx sim/src/sweep-doc.ts');
    const rows = doc.rows.filter((r) => r.slice === 'rtt-loss' && r.capKind === 'uniform' && r.mode === 'uncoded');
    const table = markdownTable(
      doc,
      doc.slices.find((s) => s.id === 'rtt-loss')!,
      'uniform',
      'uncoded / partitioned',
    );
    expect(table).toHaveLength(2 + 5);
    for (const r of rows) {
      const line = table.find((l) => l.startsWith(`| ${r.y} |`))!;
      expect(line).toContain(`${r.efficiency.toFixed(2)} · ${r.speedupVsHttp!.toFixed(2)}×`);
      expect(page).toContain(line);
    }
    expect(page).toContain('Every simulated download in the sweep completed byte-exact.');
  });

  test('the README summary gives the base point and each map range per mode', () => {
    const summary = readmeSummary(doc);
    const base = doc.rows.find(
      (r) => r.slice === 'size-rtt' && r.mode === 'fountain' && r.capKind === 'mixed' && r.x === '40' && r.y === '2',
    )!;
    const line = summary.split('\n').find((l) => l.startsWith('| fountain / partitioned |'))!;
    expect(line).toContain(`| ${base.efficiency.toFixed(2)} |`);
    const nLoss = doc.rows.filter((r) => r.slice === 'n-loss' && r.mode === 'fountain').map((r) => r.efficiency);
    expect(line).toContain(`${Math.min(...nLoss).toFixed(2)} – ${Math.max(...nLoss).toFixed(2)}`);
    expect(summary).toContain('docs/sim-sweep.md');
  });

  test('the README section is replaced between its markers only', () => {
    const readme = `# Title\n\nbefore\n\n${README_BEGIN}\nold text\n${README_END}\n\nafter\n`;
    const next = replaceBetweenMarkers(readme, 'new section\n');
    expect(next).toBe(`# Title\n\nbefore\n\n${README_BEGIN}\n\nnew section\n\n${README_END}\n\nafter\n`);
    expect(replaceBetweenMarkers(next, 'new section')).toBe(next);
    expect(() => replaceBetweenMarkers('# no markers\n', 'x')).toThrow(/markers/);
  });
});
