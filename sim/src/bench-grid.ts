/**
 * `npm run bench:sim -- [--json] [--seeds N] [--demo]`: the MUTP paper's Fig. 2 grid in the
 * simulator, every mode against Parallel HTTP in the same run. Prints a table, then (with --json)
 * the rows as one JSON array on the last line of stdout.
 * `npm run bench:sim -- --sweep [slices] [--json]`: the maps beyond the paper's grid (sweep.ts);
 * with --json, one JSON document (SweepDocument) on the last line, for sweep-doc.ts.
 */
import { Command, Option } from 'commander';
import { SIM_CONFIG_NAMES, SIM_CONFIGS, SimConfigName } from './configs';
import { aggregate, buildGrid, compareWithHttp, GridOptions, GridRow, PAPER_GRID, VARIANTS } from './grid';
import { runAll } from './run-pool';
import { KB, PAPER_DEFAULTS } from './scenario';
import { runSweep, SWEEP_SLICE_IDS } from './sweep';
import { formatSweepTables } from './sweep-table';
import { formatTable } from './table';

const program = new Command()
  .name('bench:sim')
  .description("Simulates the MUTP paper's experiment grid (Fig. 2) with the real protocol core.")
  .option('--json', 'print the rows as a JSON array on the last line of stdout')
  .option('--seeds <n>', 'seeds per scenario', (v) => parsePositive(v), PAPER_GRID.seeds)
  .option('--demo', 'a small grid for the demo: mixed caps, 2 MiB, no loss, N = 1, 2, 4, 6')
  .option('--no-window-study', 'skip the extra rows at a fixed window of 960 packets (N = 4, 6, mixed caps, 2 MiB)')
  .option(
    '--sweep [slices]',
    `the maps beyond the paper's grid instead (comma-separated slices, default all: ${SWEEP_SLICE_IDS.join(', ')})`,
  )
  .addOption(
    new Option('--config <name>', "protocol configuration: the paper's as published, or today's default")
      .choices(SIM_CONFIG_NAMES)
      .default('default'),
  )
  .parse();

function parsePositive(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new Error(`expected a positive integer, got ${v}`);
  return n;
}

async function main(): Promise<void> {
  const o = program.opts<{
    json?: boolean;
    seeds: number;
    demo?: boolean;
    windowStudy: boolean;
    config: SimConfigName;
    sweep?: string | true;
  }>();
  if (o.sweep) return sweep(o.sweep === true ? SWEEP_SLICE_IDS : o.sweep.split(','), o);
  const grids: GridOptions[] = o.demo
    ? [
        {
          ...PAPER_GRID,
          sources: [1, 2, 4, 6],
          capKinds: ['mixed'],
          objects: [2 << 20],
          losses: [0],
          seeds: o.seeds === PAPER_GRID.seeds ? 5 : o.seeds,
          windows: [SIM_CONFIGS[o.config].window],
          config: o.config,
        },
      ]
    : [{ ...PAPER_GRID, windows: [SIM_CONFIGS[o.config].window], seeds: o.seeds, config: o.config }];
  if (o.windowStudy && !o.demo) {
    grids.push({
      sources: [4, 6],
      capKinds: ['mixed'],
      objects: [2 << 20],
      losses: [0, 0.02],
      windows: [960],
      seeds: o.seeds,
      variants: VARIANTS,
      config: o.config,
    });
  }
  const groups = grids.flatMap(buildGrid);
  const scenarios = groups.flatMap((g) => g.scenarios);
  const started = Date.now();
  let lastReport = 0;
  const results = await runAll(scenarios, (done) => {
    if (Date.now() - lastReport > 5000 || done === scenarios.length) {
      lastReport = Date.now();
      process.stderr.write(
        `bench:sim ${done}/${scenarios.length} simulations, ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
      );
    }
  });
  const rows: GridRow[] = [];
  let offset = 0;
  for (const g of groups) {
    rows.push(aggregate(g.variant, results.slice(offset, offset + g.scenarios.length)));
    offset += g.scenarios.length;
  }
  compareWithHttp(rows);
  console.log(formatTable(rows));
  console.log();
  console.log(windowBoundNote());
  if (o.json) console.log(JSON.stringify(rows));
}

async function sweep(slices: string[], o: { json?: boolean; seeds: number; demo?: boolean; config: SimConfigName }) {
  if (o.demo) throw new Error('--sweep and --demo do not go together');
  let lastReport = 0;
  const doc = await runSweep({ seeds: o.seeds, config: o.config, slices }, (done, total) => {
    if (Date.now() - lastReport > 5000 || done === total) {
      lastReport = Date.now();
      process.stderr.write(`bench:sim --sweep ${done}/${total} simulations\n`);
    }
  });
  console.log(formatSweepTables(doc));
  if (o.json) console.log(JSON.stringify(doc));
}

/** The strict window moves at most w packets per round trip (plus the feedback delay). */
function windowBoundNote(): string {
  const d = PAPER_DEFAULTS;
  const windowBps = (d.window * d.symbolSize * 1000) / d.rttMs;
  const mixed6 = (3 * 896 + 3 * 1792) * KB;
  return (
    `Window bound: w=${d.window} packets of ${d.symbolSize} B per ${d.rttMs} ms RTT carries at most ` +
    `${(windowBps / 1e6).toFixed(2)} MB/s, less the feedback delay; 6 mixed sources offer ${(mixed6 / 1e6).toFixed(2)} MB/s.`
  );
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
