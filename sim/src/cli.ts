/**
 * `npm run sim -- [options]`: one simulated download with the real MUTP core, or several seeds of
 * it. Prints a summary; with --json the result(s) as JSON on the last line of stdout.
 */
import { Command, Option } from 'commander';
import { DEFAULT_SCHEDULER, SchedulerName } from '@mutp/shared';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { configWindow, SIM_CONFIG_NAMES, SIM_CONFIGS, SimConfigName } from './configs';
import { aggregate, median } from './grid';
import { simulate } from './index';
import { PAPER_DEFAULTS, Scenario, SimMode, SimResult } from './scenario';

const numberList = (v: string) => v.split(',').map((x) => parseNumber(x));
function parseNumber(v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`expected a non-negative number, got '${v}'`);
  return n;
}

const program = new Command()
  .name('sim')
  .description('Simulate one multi-source download (deterministic, seeded) with the real protocol core.')
  .addOption(
    new Option('--mode <mode>', 'download mode').choices(['http', 'uncoded', 'rlnc', 'fountain']).default('rlnc'),
  )
  .addOption(
    new Option('--scheduler <name>', 'sender scheduler (default: the mode default)').choices([
      'random',
      'rarest',
      'partitioned',
    ]),
  )
  .option(
    '--caps <list>',
    'upload cap of each source in KB/s (1 KB = 1024 B), comma-separated',
    numberList,
    [896, 896, 1792, 1792],
  )
  .option('--bytes <n>', 'object size in bytes', parseNumber, 2 << 20)
  .option('--rtt <ms>', 'round-trip propagation delay', parseNumber, PAPER_DEFAULTS.rttMs)
  .option('--jitter <ms>', 'extra one-way delay, uniform in [0, jitter)', parseNumber, PAPER_DEFAULTS.jitterMs)
  .option('--loss <p>', 'datagram loss probability, source to client', parseNumber, 0)
  .option('--reverse-loss <p>', 'datagram loss probability, client to source (default: --loss)', parseNumber)
  .option('--duplicate <p>', 'probability a datagram is delivered twice', parseNumber, 0)
  .addOption(
    new Option('--config <name>', "protocol configuration: the paper's as published, or today's default")
      .choices(SIM_CONFIG_NAMES)
      .default('default'),
  )
  .option(
    '--window <packets>',
    "strict moving window w (default: the configuration's: paper 240; default five bandwidth-delay products of --caps and --rtt, 480 to 4096)",
    parseNumber,
  )
  .option('--generation <g>', "generation size g (rlnc) (default: the configuration's, 24 in both)", parseNumber)
  .option('--symbol <bytes>', 'payload bytes per packet', parseNumber, PAPER_DEFAULTS.symbolSize)
  .option('--fail <source@ms...>', 'kill a source at a time, e.g. 2@300', (v: string, prev: string[] = []) => [
    ...prev,
    v,
  ])
  .option('--seed <n>', 'first seed', parseNumber, 1)
  .option('--seeds <n>', 'number of seeds to run', parseNumber, 1)
  .option('--ts-codec', 'rlnc with the pure-TypeScript reference codec instead of WebAssembly (slow)')
  .option('--json', 'print the result as JSON on the last line of stdout')
  .parse();

const o = program.opts();
const mode = o.mode as SimMode;
const config = SIM_CONFIGS[o.config as SimConfigName];
if (o.scheduler && mode === 'http') program.error('--scheduler does not apply to --mode http');
const failures = ((o.fail as string[] | undefined) ?? []).map((f) => {
  const [source, at] = f.split('@').map(Number);
  if (!Number.isInteger(source) || !(at >= 0)) program.error(`--fail expects source@ms, got '${f}'`);
  return { source, atMs: at };
});

function fail(message: string): never {
  program.error(message);
  throw new Error(message); // program.error exits; this satisfies the type checker
}

async function main(): Promise<void> {
  const wasm = await loadNodeCodecs();
  const codecs = o.tsCodec ? { fountain: wasm.fountain } : wasm;
  const results = Array.from({ length: o.seeds as number }, (_, i): SimResult => {
    const scenario: Scenario = {
      mode,
      scheduler: o.scheduler as SchedulerName | undefined,
      capsKBps: o.caps,
      objectBytes: o.bytes,
      rttMs: o.rtt,
      jitterMs: o.jitter,
      loss: o.loss,
      reverseLoss: o.reverseLoss,
      duplicate: o.duplicate,
      window: (o.window as number | undefined) ?? configWindow(config.window, o.caps, o.rtt, o.symbol),
      generationSize: (o.generation as number | undefined) ?? config.generationSize,
      startAtCap: config.startAtCap,
      weightLevels: config.weightLevels,
      capacityHints: config.capacityHints,
      senderConfig: config.senderConfig,
      receiverConfig: config.receiverConfig,
      symbolSize: o.symbol,
      seed: o.seed + i,
      failures,
    };
    try {
      return simulate(scenario, { codecs });
    } catch (e) {
      return fail(`invalid scenario: ${e instanceof Error ? e.message : String(e)}`);
    }
  });

  for (const r of results) {
    const scheduler = mode === 'http' ? '' : ` (${r.scenario.scheduler ?? DEFAULT_SCHEDULER[mode]})`;
    console.log(
      `seed ${r.scenario.seed} ${mode}${scheduler}: ${r.status}${r.error ? ` (${r.error})` : ''} in ${r.downloadMs.toFixed(1)} ms, ` +
        `goodput ${(r.goodputBps / 1e6).toFixed(2)} MB/s, efficiency ${r.efficiency.toFixed(3)}, ` +
        `normalized goodput ${r.normalizedGoodput.toFixed(3)}, sent/useful ${r.sentPerUseful.toFixed(3)}, byte-exact ${r.byteExact}`,
    );
    console.log(
      `  per source: ${r.sources.map((s, i) => `#${i} ${s.capKBps} KB/s sent ${s.sent} useful ${s.useful} (${(s.share * 100).toFixed(0)}%)`).join('; ')}`,
    );
  }
  if (results.length > 1) {
    const row = aggregate({ mode, scheduler: o.scheduler }, results);
    console.log(
      `median over ${results.length} seeds: ${median(results.map((r) => r.downloadMs)).toFixed(1)} ms, efficiency ${row.efficiency}, normalized goodput ${row.normalizedGoodput}`,
    );
  }
  if (o.json) console.log(JSON.stringify(results.length === 1 ? results[0] : results));
  process.exitCode = results.every((r) => r.status === 'complete') ? 0 : 1;
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(2);
});
