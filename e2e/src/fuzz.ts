/**
 * `npm run fuzz -- [--iterations N] [--seed S] [--json] [--parsers a,b] [--workers W] [--timeout-ms T]`:
 * feeds every parser that takes untrusted input (signalling frames, datagrams, Range headers,
 * manifests, the proxy's address guard, the WebAssembly decoders) N inputs in total, structured
 * near-valid ones and raw bytes, from a fresh seed that is printed so a failure replays with
 * `--seed`. Exit code 1 when anything crashed.
 */
import { Command, InvalidArgumentError } from 'commander';
import { DEFAULT_ITERATIONS, DEFAULT_TIMEOUT_MS, FuzzReport, jsonSummary, runFuzz } from './fuzz/runner';
import { TARGETS, TARGET_NAMES } from './fuzz/targets';

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function seedValue(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
    throw new InvalidArgumentError('must be an integer 0..4294967295');
  return n;
}

function parserList(value: string): string[] {
  const names = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !TARGET_NAMES.includes(n));
  if (unknown.length > 0 || names.length === 0) {
    throw new InvalidArgumentError(`known parsers: ${TARGET_NAMES.join(', ')}`);
  }
  return names;
}

const program = new Command()
  .name('npm run fuzz --')
  .description(
    'Fuzzes every parser of untrusted input with fresh random seeds. A crash is an exception other than the ' +
      "parser's documented error, a broken invariant (e.g. a private address allowed, a later decode corrupted, " +
      'memory not returned) or an input over the time bound.\n\nParsers:\n' +
      TARGETS.map((t) => `  ${t.name.padEnd(11)} ${t.about}`).join('\n'),
  )
  .option('--iterations <n>', 'inputs in total, spread evenly over the parsers', positiveInteger, DEFAULT_ITERATIONS)
  .option('--seed <s>', 'run seed (replays a run); default: a fresh random one', seedValue)
  .option('--parsers <list>', `comma-separated subset of: ${TARGET_NAMES.join(', ')}`, parserList)
  .option('--workers <n>', 'worker threads (default: the number of CPUs)', positiveInteger)
  .option(
    '--timeout-ms <ms>',
    'per-input time bound; slower inputs count as crashes',
    positiveInteger,
    DEFAULT_TIMEOUT_MS,
  )
  .option('--json', 'print the summary as one JSON object on the last line of stdout')
  .showHelpAfterError()
  // Exit code 1 means crashes; bad usage is 2, as for `mutp`.
  .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2))
  .parse();

const opts = program.opts<{
  iterations: number;
  seed?: number;
  parsers?: string[];
  workers?: number;
  timeoutMs: number;
  json?: boolean;
}>();

function summary(report: FuzzReport): string {
  const lines = [`${'parser'.padEnd(11)} ${'inputs'.padStart(9)} ${'crashes'.padStart(8)} ${'inputs/s'.padStart(9)}`];
  for (const p of report.parsers) {
    const rate = p.ms > 0 ? Math.round((p.inputs / p.ms) * 1000) : 0;
    lines.push(
      `${p.name.padEnd(11)} ${String(p.inputs).padStart(9)} ${String(p.crashes).padStart(8)} ${String(rate).padStart(9)}`,
    );
    if (p.firstCrash) {
      lines.push(`  first crash: input #${p.firstCrash.index}: ${p.firstCrash.error}`);
      lines.push(
        `  input (hex): ${p.firstCrash.hex.length > 400 ? `${p.firstCrash.hex.slice(0, 400)}...` : p.firstCrash.hex}`,
      );
    }
  }
  lines.push(
    `${report.inputs} inputs, ${report.crashes} crashes in ${(report.ms / 1000).toFixed(1)} s (seed ${report.seed}; ` +
      `replay: npm run fuzz -- --seed ${report.seed} --iterations ${report.inputs}${opts.parsers ? ` --parsers ${opts.parsers.join(',')}` : ''})`,
  );
  return lines.join('\n');
}

async function main(): Promise<void> {
  const seed = opts.seed ?? undefined;
  const report = await runFuzz({
    iterations: opts.iterations,
    seed,
    parsers: opts.parsers,
    workers: opts.workers,
    timeoutMs: opts.timeoutMs,
  });
  console.log(summary(report));
  if (opts.json) console.log(jsonSummary(report));
  process.exitCode = report.crashes > 0 ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exitCode = 2;
});
