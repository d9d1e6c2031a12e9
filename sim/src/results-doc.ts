/**
 * Turns bench:sim's JSON rows into the Markdown tables of docs/sim-results.md:
 *   npm run --silent bench:sim -- --json | tail -n 1 > /tmp/rows.json
 *   npx tsx sim/src/results-doc.ts /tmp/rows.json > docs/sim-results.md
 * and with `--config paper`, into docs/sim-results-paper.md.
 */
import { readFileSync } from 'node:fs';
import { GridRow } from './grid';

const rows: GridRow[] = JSON.parse(readFileSync(process.argv[2] ?? '/dev/stdin', 'utf8'));

const variantName = (r: GridRow) =>
  r.mode === 'http'
    ? 'Parallel HTTP'
    : `${r.mode} / ${r.scheduler}${r.scheduler === 'random' || r.scheduler === 'rarest' ? ' (paper)' : ''}`;
const capsName = (caps: number[]) =>
  new Set(caps).size === 1 ? `all ${caps[0]} KB/s` : 'mixed caps (half 896, half 1792 KB/s)';
const cell = (r: GridRow) =>
  `${(r.speedupVsHttp ?? 0).toFixed(2)}× · ${r.efficiency.toFixed(2)} · ${r.normalizedGoodput.toFixed(2)}`;

const paperConfig = rows.every((r) => !r.startAtCap);
/** The fixed window of bench-grid's window-study rows. */
const STUDY_WINDOW = 960;
const out: string[] = [
  `# Simulator results: the paper's grid, ${paperConfig ? "the paper's configuration" : 'the default configuration'}`,
  '',
  `Output of \`npm run bench:sim -- --json --config ${paperConfig ? 'paper' : 'default'}\` (20 seeds per cell, medians), turned into tables by`,
  '`sim/src/results-doc.ts`. RTT 40 ms, jitter 2 ms, g = 24, symbols of 1120 bytes, WebAssembly codecs.',
  paperConfig
    ? "w = 240, weights in 32 levels, and sources as the paper's: no knowledge of their path at the start (they grow from 16 packets in flight)."
    : 'The window is five bandwidth-delay products of the path (as the client sizes it once it has measured the proxies), the client weights sources in 255 levels from their known capacities (carried in the REQUEST), and sources start sending at their known upload cap (sim/src/configs.ts).',
  'Cells: goodput as a multiple of Parallel HTTP in the same scenario · efficiency · normalized goodput.',
  '',
];
// The default configuration sizes the window per scenario from its path (the study rows at a
// fixed 960 aside): one table per path-sized grid, its windows listed under it.
const windowName = (r: GridRow) => (paperConfig || r.window === STUDY_WINDOW ? `w=${r.window}` : 'w = 5 BDPs');
// One table per (object, caps kind, loss, window); N = 1 rows belong to every caps kind.
const tables = new Map<string, GridRow[]>();
for (const r of rows) {
  const kinds = r.sources === 1 ? ['all 896 KB/s', 'mixed caps (half 896, half 1792 KB/s)'] : [capsName(r.capsKBps)];
  for (const kind of kinds) {
    const key = `${r.objectBytes >> 20} MiB, ${kind}, loss ${r.loss * 100}%, ${windowName(r)}`;
    if (!tables.has(key)) tables.set(key, []);
    tables.get(key)!.push(r);
  }
}
for (const [title, group] of tables) {
  const sources = [...new Set(group.map((r) => r.sources))].sort((a, b) => a - b);
  const variants = [...new Set(group.map(variantName))];
  out.push(`**${title}**`, '');
  out.push(`| variant | ${sources.map((n) => `N=${n}`).join(' | ')} |`);
  out.push(`| --- | ${sources.map(() => '---').join(' | ')} |`);
  for (const v of variants) {
    const cells = sources.map((n) => {
      const r = group.find((x) => x.sources === n && variantName(x) === v);
      return r ? cell(r) : '';
    });
    out.push(`| ${v} | ${cells.join(' | ')} |`);
  }
  out.push('');
  if (windowName(group[0]) === 'w = 5 BDPs') {
    const windows = sources.map((n) => `N=${n}: ${group.find((x) => x.sources === n && x.mode !== 'http')?.window}`);
    out.push(`Windows (packets): ${windows.join(', ')}.`, '');
  }
}
const exact = rows.every((r) => r.byteExact && r.failed === 0);
out.push(`Every simulated download in the grid completed byte-exact: ${exact ? 'yes' : 'NO'}.`);
console.log(out.join('\n'));
