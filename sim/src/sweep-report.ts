/**
 * What sweep-doc.ts writes, as pure functions of a SweepDocument: the heatmaps' specifications,
 * the Markdown page (docs/sim-sweep.md) and the README summary between its markers.
 */
import { HeatmapSpec } from './heatmap';
import { CapKind, capKindName, SliceMeta, SweepDocument, sweepMatrix, SweepRow, variantName } from './sweep';

export const README_BEGIN = '<!-- sim-sweep:begin -->';
export const README_END = '<!-- sim-sweep:end -->';
/** Where the images go, relative to docs/ (the page's folder). */
export const IMAGE_DIR = 'sim-sweep';

export const REGENERATE = [
  'npm run --silent bench:sim -- --sweep --json | tail -n 1 > /tmp/sweep.json   # 10-16 min on 2 cores',
  'npx tsx sim/src/sweep-doc.ts /tmp/sweep.json   # docs/sim-sweep/*.png, docs/sim-sweep.md, README section',
];

export type Metric = 'efficiency' | 'speedup';

export interface HeatmapFile {
  /** File name inside IMAGE_DIR. */
  file: string;
  slice: SliceMeta;
  capKind: CapKind;
  metric: Metric;
  spec: HeatmapSpec;
}

const failedOrInexact = (r: SweepRow | null) => !!r && (r.failed > 0 || !r.byteExact);

/** A fixed window, or one sized per cell from its path (the rows carry each cell's value). */
function windowText(doc: SweepDocument): string {
  if (typeof doc.protocol.window === 'number') return `w = ${doc.protocol.window}`;
  const sizes = doc.rows.map((r) => r.window);
  return `w from each cell's bandwidth-delay product (${Math.min(...sizes)} to ${Math.max(...sizes)} packets)`;
}

function configLine(doc: SweepDocument): string {
  const p = doc.protocol;
  return (
    `--config ${doc.config}: ${windowText(doc)}, g = ${p.generationSize}, ${p.symbolSize}-byte symbols, ` +
    `weights in ${p.weightLevels} levels${p.capacityHints ? ' seeded from the known caps' : ''}, ` +
    `sources ${p.startAtCap ? 'start at their cap' : 'grow from the initial window'}; jitter ${p.jitterMs} ms`
  );
}

export function imageFile(sliceId: string, capKind: CapKind, metric: Metric): string {
  return `${sliceId}-${capKind}-${metric}.png`;
}

/** Two images per slice and cap mix: efficiency of every mode, goodput of each MUTP mode against HTTP. */
export function heatmapFiles(doc: SweepDocument): HeatmapFile[] {
  const files: HeatmapFile[] = [];
  const mutp = doc.variants.filter((v) => v !== variantName({ mode: 'http' }));
  for (const slice of doc.slices) {
    // One speedup scale per slice, so its two cap mixes compare by colour.
    const speedups = doc.rows
      .filter((r) => r.slice === slice.id && r.mode !== 'http' && r.speedupVsHttp != null)
      .map((r) => r.speedupVsHttp!);
    // Powers of two at both ends, so the log scale's ticks read 1x, 2x, 4x ...
    const speedupMax = 2 ** Math.ceil(Math.log2(Math.max(2, ...speedups)));
    const speedupMin = 2 ** Math.floor(Math.log2(Math.min(1, ...speedups.filter((v) => v > 0))));
    for (const capKind of slice.capKinds) {
      const common = {
        xLabel: slice.x.label,
        yLabel: slice.y.label,
        xTicks: slice.x.values,
        yTicks: slice.y.values,
        notes: [...slice.notes, '"!": a seed of this cell failed or was not byte-exact.'],
      };
      const subtitle = [
        `${slice.fixed}, ${capKindName(capKind)}; median of ${doc.seeds} seeds per cell`,
        configLine(doc),
      ];
      const panels = (variants: string[], value: (r: SweepRow) => number | null) =>
        variants.map((v) => {
          const matrix = sweepMatrix(doc, slice.id, capKind, v);
          return {
            title: v,
            values: matrix.map((cells) => cells.map((r) => (r ? value(r) : null))),
            flags: matrix.map((cells) => cells.map(failedOrInexact)),
          };
        });
      files.push({
        file: imageFile(slice.id, capKind, 'efficiency'),
        slice,
        capKind,
        metric: 'efficiency',
        spec: {
          ...common,
          title: `Efficiency, ${slice.title}`,
          subtitle: [...subtitle, 'efficiency = (RTT + bytes / sum of caps) / download time; 1 is ideal'],
          panels: panels(doc.variants, (r) => r.efficiency),
          scale: { min: 0, max: 1, label: 'efficiency' },
          format: (v) => v.toFixed(2),
        },
      });
      files.push({
        file: imageFile(slice.id, capKind, 'speedup'),
        slice,
        capKind,
        metric: 'speedup',
        spec: {
          ...common,
          title: `Goodput against Parallel HTTP, ${slice.title}`,
          subtitle: [...subtitle, 'goodput / Parallel HTTP goodput in the same cell (log colour scale)'],
          panels: panels(mutp, (r) => r.speedupVsHttp),
          scale: { min: speedupMin, max: speedupMax, label: '× Parallel HTTP', log: true },
          format: (v) => `${v < 10 ? v.toFixed(2) : v.toFixed(1)}×`,
          tickFormat: (v) => `${+v.toPrecision(3)}×`,
        },
      });
    }
  }
  return files;
}

/** A map as a Markdown table: "efficiency · speedup×" per cell ("!" marks failed or inexact seeds). */
export function markdownTable(doc: SweepDocument, slice: SliceMeta, capKind: CapKind, variant: string): string[] {
  const matrix = sweepMatrix(doc, slice.id, capKind, variant);
  const cell = (r: SweepRow | null) => {
    if (!r) return '-';
    const speedup = r.mode === 'http' || r.speedupVsHttp == null ? '' : ` · ${r.speedupVsHttp.toFixed(2)}×`;
    return `${r.efficiency.toFixed(2)}${speedup}${failedOrInexact(r) ? ' !' : ''}`;
  };
  return [
    `| ${slice.y.label} \\ ${slice.x.label} | ${slice.x.values.join(' | ')} |`,
    `| --- | ${slice.x.values.map(() => '---').join(' | ')} |`,
    ...matrix.map((cells, i) => `| ${slice.y.values[i]} | ${cells.map(cell).join(' | ')} |`),
  ];
}

/** The whole page; images are linked relative to docs/. */
export function sweepMarkdown(doc: SweepDocument): string {
  const out: string[] = [
    "# Simulator sweeps beyond the paper's grid",
    '',
    `Generated by \`sim/src/sweep-doc.ts\` from \`npm run bench:sim -- --sweep --json --config ${doc.config}\` ` +
      `(${doc.seeds} seeds per cell, medians; ${doc.simulations} simulations in ${doc.elapsedSeconds} s). ` +
      'Do not edit by hand: regenerate everything (these tables, the heatmaps in `docs/sim-sweep/` and the ' +
      "README's summary) with",
    '',
    '```sh',
    ...REGENERATE,
    '```',
    '',
    `Each slice is a map through the base point (N = 6, mixed caps, 2 MiB, RTT 40 ms, no loss), for both cap mixes ` +
      '(all sources at 896 KB/s, or half at 896 and half at 1792 KB/s; KB = 1024 B). Object sizes are ' +
      "SoftStage's chunk sizes, in MiB. " +
      `${configLine(doc)}. Modes: ${doc.variants.join(', ')}.`,
    '',
    'Efficiency = (RTT + bytes / sum of caps) / download time (1 is ideal). Cells in the tables: efficiency · ' +
      'goodput as a multiple of Parallel HTTP in the same cell. "!" marks a cell in which a seed failed or was not ' +
      'byte-exact.',
    '',
  ];
  for (const slice of doc.slices) {
    out.push(`## ${capitalise(slice.title)} (${slice.fixed})`, '');
    if (slice.notes.length) out.push(...slice.notes.map((n) => `- ${n}`), '');
    for (const capKind of slice.capKinds) {
      out.push(`### ${capitalise(slice.title)}, ${capKindName(capKind)}`, '');
      out.push(
        `![Efficiency, ${slice.title}, ${capKindName(capKind)}](${IMAGE_DIR}/${imageFile(slice.id, capKind, 'efficiency')})`,
        '',
        `![Goodput against Parallel HTTP, ${slice.title}, ${capKindName(capKind)}](${IMAGE_DIR}/${imageFile(slice.id, capKind, 'speedup')})`,
        '',
      );
      for (const variant of doc.variants)
        out.push(`**${variant}**`, '', ...markdownTable(doc, slice, capKind, variant), '');
    }
  }
  const bad = doc.rows.filter((r) => failedOrInexact(r)).length;
  out.push(
    bad === 0
      ? 'Every simulated download in the sweep completed byte-exact.'
      : `${bad} cells had a failed or inexact download (marked "!").`,
  );
  return wrapProse(out).join('\n') + '\n';
}

/** Breaks a paragraph into lines of at most `width` characters (the README's prose style). */
export function wrap(paragraph: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of paragraph.split(/\s+/).filter(Boolean)) {
    // A line must not start with what Markdown reads as a list marker or a heading.
    const marker = /^([-+*#>]|\d+[.)])$/.test(word);
    if (line && line.length + 1 + word.length > width && !marker) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/** Wraps prose lines and list items; headings, tables, images and code blocks stay as they are. */
export function wrapProse(lines: string[]): string[] {
  const out: string[] = [];
  let inCode = false;
  for (const line of lines) {
    if (line.startsWith('```')) inCode = !inCode;
    if (inCode || line.startsWith('```') || /^(#|\||!\[|\*\*|<!--)/.test(line) || line.length <= 100) out.push(line);
    else if (line.startsWith('- ')) out.push(...wrap(line, 98).map((l, i) => (i ? `  ${l}` : l)));
    else out.push(...wrap(line));
  }
  return out;
}

function capitalise(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The rows that make up a slice's map for one mode, both cap mixes. */
function sliceRows(doc: SweepDocument, sliceId: string, variant: string): SweepRow[] {
  return doc.rows.filter((r) => r.slice === sliceId && variantName(r) === variant && r.failed < r.seeds);
}

function cellName(slice: SliceMeta, r: SweepRow): string {
  const axis = (label: string, value: string) => {
    const unit = /\(([^)]+)\)$/.exec(label)?.[1];
    return unit ? `${value} ${unit}` : value;
  };
  const y = slice.y.label === 'sources N' ? `N = ${r.y}` : axis(slice.y.label, r.y);
  return `${r.capKind}, ${y}, ${axis(slice.x.label, r.x)}`;
}

/** The README's section: the base point, each map's range and worst cell, burst against i.i.d. loss. */
export function readmeSummary(doc: SweepDocument): string {
  const base = (variant: string) =>
    doc.rows.find(
      (r) =>
        variantName(r) === variant &&
        r.sources === 6 &&
        r.capKind === 'mixed' &&
        r.objectBytes === 2 << 20 &&
        r.rttMs === 40 &&
        r.loss === 0 &&
        r.lossModel === 'iid',
    );
  const burstAt = (variant: string, model: SweepRow['lossModel']) =>
    doc.rows.find(
      (r) =>
        r.slice === 'n-loss' &&
        variantName(r) === variant &&
        r.capKind === 'mixed' &&
        r.sources === 6 &&
        r.lossModel === model,
    );
  const hasBurst = doc.rows.some((r) => r.slice === 'n-loss' && r.lossModel === 'burst-link');
  const header = [
    'mode',
    'base point',
    ...doc.slices.map((s) => `${s.title}: min – max (worst cell)`),
    ...(hasBurst ? ['N = 6 mixed, 2 % in bursts of 4 / i.i.d. (link model)'] : []),
  ];
  const table = doc.variants.map((variant) => {
    const b = base(variant);
    const ranges = doc.slices.map((slice) => {
      const rows = sliceRows(doc, slice.id, variant);
      if (!rows.length) return '-';
      const worst = rows.reduce((a, r) => (r.efficiency < a.efficiency ? r : a));
      const best = Math.max(...rows.map((r) => r.efficiency));
      return `${worst.efficiency.toFixed(2)} – ${best.toFixed(2)} (${cellName(slice, worst)})`;
    });
    const burst = burstAt(variant, 'burst-link');
    const iid = burstAt(variant, 'iid-link');
    return [
      variant,
      b ? b.efficiency.toFixed(2) : '-',
      ...ranges,
      ...(hasBurst ? [burst && iid ? `${burst.efficiency.toFixed(2)} / ${iid.efficiency.toFixed(2)}` : '-'] : []),
    ];
  });
  const image = doc.slices.find((s) => s.id === 'n-loss') ?? doc.slices[0];
  const lines = [
    "### Sweeps beyond the paper's grid",
    '',
    `\`npm run bench:sim -- --sweep --json\` maps ${doc.slices.map((s) => s.title).join(', ')} through the base point ` +
      '(N = 6 mixed caps, 2 MiB, RTT 40 ms, no loss) for both cap mixes, up to N = 8, 10 MiB, 100 ms and 5 % loss, ' +
      `plus 2 % loss in Gilbert-Elliott bursts of 4 packets (${doc.seeds} seeds per cell, medians, --config ${doc.config}). ` +
      'Heatmaps of efficiency and of the gain over Parallel HTTP, and every number, are in ' +
      '[docs/sim-sweep.md](docs/sim-sweep.md); this section is generated by `sim/src/sweep-doc.ts` from the JSON.',
    '',
    'Efficiency per mode (1 is ideal):',
    '',
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...table.map((cells) => `| ${cells.join(' | ')} |`),
    '',
    ...(image
      ? [
          `![Efficiency, ${image.title}, ${capKindName('mixed')}](docs/${IMAGE_DIR}/${imageFile(image.id, 'mixed', 'efficiency')})`,
          '',
        ]
      : []),
  ];
  return wrapProse(lines).join('\n');
}

/** `text` with everything between the markers replaced by `section`; throws when they are missing. */
export function replaceBetweenMarkers(text: string, section: string): string {
  const begin = text.indexOf(README_BEGIN);
  const end = text.indexOf(README_END);
  if (begin < 0 || end < begin) throw new Error(`markers ${README_BEGIN} ... ${README_END} not found in order`);
  return `${text.slice(0, begin + README_BEGIN.length)}\n\n${section.trim()}\n\n${text.slice(end)}`;
}
