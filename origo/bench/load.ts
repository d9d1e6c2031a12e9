/**
 * `npm run bench:origo -- [--json] [--instances 1,2] [--clients N] [--proxies N] ...`: a load test
 * of origo over real WebSockets on loopback. Each row starts its own origo processes (1 instance,
 * or several sharing a private redis-server through `--redis`), registers simulated proxies that
 * heartbeat and answer every offer at once, ramps simulated clients up in bounded batches, drives
 * request-proxies + offer exchanges at a bounded rate, and measures over a steady window: relay
 * latency (client → proxy one way, and the offer/answer round trip; same- and cross-instance
 * apart), heartbeats/s, CPU and memory of each instance and of the generator itself. Every failed
 * handshake, refused session, error and missing answer is counted in its row.
 *
 * The last stdout line with --json is one JSON document: { rows, ratios, ... }. Exit code 0 when
 * every row reached its targets without a failure, 3 when the run completed but some did not,
 * 1 when the run itself failed, 2 on bad flags.
 */
import { spawnSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { Command, InvalidArgumentError } from 'commander';
import { integer } from '@mutp/cli-options';
import { buildCli } from '../src/cli';
import { MAX_ADDRESSES } from './addresses';
import { fileLimit, planProcesses, raiseFileLimit } from './fd-limit';
import { Row } from './row';
import { abortStarted, runRow, Started } from './run';
import { LoadSettings } from './settings';

function fraction(value: string): number {
  const n = Number(value);
  if (!(n > 0 && n <= 1)) throw new InvalidArgumentError(`expected a number in (0, 1], got '${value}'`);
  return n;
}

function instanceList(value: string): number[] {
  const list = value.split(',').map((v) => integer(1, 4)(v.trim()));
  if (list.length === 0) throw new InvalidArgumentError('expected instance counts, e.g. 1,2');
  return list;
}

// The generator holds one socket per simulated peer and each instance its share of them: the run
// raises its open-file limit to fit (fd-limit.ts; the maxima are the two-instance target).
const program = new Command()
  .name('bench:origo')
  .description('Load test of origo over real WebSockets on loopback (1 instance, or several sharing Redis).')
  .option('--json', 'print one JSON document as the last line of stdout')
  .option(
    '--instances <list>',
    'origo instances per row, comma-separated (more than 1: shared redis-server)',
    instanceList,
    [1, 2],
  )
  .option('--clients <n>', 'client sessions per row (all instances together)', integer(1, 100_000), 5000)
  .option('--proxies <n>', 'registered proxies per row (all instances together)', integer(1, 10_000), 500)
  .option('--active-fraction <f>', 'fraction of the clients that make offers (the rest hold a session)', fraction, 0.1)
  .option('--offer-rate <n>', 'offers per second, all active clients together', integer(1, 20_000), 200)
  .option(
    '--request-count <n>',
    'proxies asked for per request-proxies (the offer goes to one of them)',
    integer(1, 32),
    4,
  )
  .option(
    '--heartbeat-ms <ms>',
    "origo's --heartbeat-interval-ms: each proxy heartbeats this often",
    integer(100, 60_000),
    1000,
  )
  .option('--warmup-ms <ms>', 'offers before the measured window', integer(0, 60_000), 2000)
  .option('--steady-ms <ms>', 'the measured window', integer(500, 120_000), 15_000)
  .option(
    '--generator-processes <n>',
    'generator worker processes (0: one per 12,000 peers, more if the open-file limit is lower)',
    integer(0, 32),
    0,
  )
  .option('--handshake-concurrency <n>', 'handshakes in flight at once during the ramp', integer(1, 256), 64)
  .option('--clients-per-address <n>', 'clients sharing one loopback source address', integer(1, 32), 8)
  .option(
    '--answer-timeout-ms <ms>',
    'a proxy list or an answer later than this is missing',
    integer(100, 60_000),
    5000,
  )
  .option(
    '--connect-timeout-ms <ms>',
    'a handshake (socket + greeting) longer than this failed',
    integer(100, 60_000),
    10_000,
  )
  .option(
    '--sdp-bytes <n>',
    'size of the offer and answer SDPs (a data-channel-only offer is ~600 B)',
    integer(64, 30_000),
    600,
  )
  .option(
    '--origo-args <flags>',
    'more flags for every origo instance, space-separated (e.g. "--cluster-refresh-ms 2000")',
    (v: string) => v.split(/\s+/).filter((a) => a.length > 0),
    [] as string[],
  )
  .option(
    '--origo-node-args <flags>',
    'flags for node running each origo instance, space-separated (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof")',
    (v: string) => v.split(/\s+/).filter((a) => a.length > 0),
    [] as string[],
  )
  .parse();

const opts = program.opts<
  LoadSettings & { json?: boolean; instances: number[]; heartbeatMs: number; generatorProcesses: number }
>();
const settings: LoadSettings = {
  clients: opts.clients,
  proxies: opts.proxies,
  activeFraction: opts.activeFraction,
  offerRate: opts.offerRate,
  requestCount: opts.requestCount,
  heartbeatIntervalMs: opts.heartbeatMs,
  warmupMs: opts.warmupMs,
  steadyMs: opts.steadyMs,
  handshakeConcurrency: opts.handshakeConcurrency,
  clientsPerAddress: opts.clientsPerAddress,
  answerTimeoutMs: opts.answerTimeoutMs,
  connectTimeoutMs: opts.connectTimeoutMs,
  sdpBytes: opts.sdpBytes,
  origoArgs: opts.origoArgs,
  origoNodeArgs: opts.origoNodeArgs,
};

/** Why a row of `instances` cannot run here, if it cannot. */
function missingPrerequisite(instances: number): string | undefined {
  if (instances === 1) return undefined;
  if (!buildCli().options.some((o) => o.long === '--redis')) {
    return 'this origo has no --redis flag: several instances cannot share state (run with --instances 1)';
  }
  const redis = process.env.MUTP_REDIS_SERVER ?? 'redis-server';
  if (spawnSync(redis, ['--version'], { stdio: 'ignore' }).status !== 0) {
    return `${redis} is not installed (scripts/setup.sh installs it; or run with --instances 1)`;
  }
  return undefined;
}

const round = (x: number | null, d = 3) => (x === null ? null : Math.round(x * 10 ** d) / 10 ** d);

/** Each later row against the first one-instance row of the same run. */
function ratios(rows: Row[]) {
  const base = rows.find((r) => r.instances === 1);
  if (base === undefined) return [];
  const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? null : round(a / b));
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  return rows
    .filter((r) => r !== base)
    .map((r) => ({
      instances: r.instances,
      against: base.instances,
      relayP50: ratio(r.relayP50Ms, base.relayP50Ms),
      relayP99: ratio(r.relayP99Ms, base.relayP99Ms),
      relayCrossP50: ratio(r.relayCrossP50Ms, base.relayP50Ms),
      relayCrossP99: ratio(r.relayCrossP99Ms, base.relayP99Ms),
      roundTripP99: ratio(r.roundTripP99Ms, base.roundTripP99Ms),
      roundTripCrossP99: ratio(r.roundTripCrossP99Ms, base.roundTripP99Ms),
      cpuPercentTotal: ratio(sum(r.cpuPercentPerInstance), sum(base.cpuPercentPerInstance)),
      cpuPercentMaxInstance: ratio(Math.max(...r.cpuPercentPerInstance), Math.max(...base.cpuPercentPerInstance)),
      rssBytesTotal: ratio(sum(r.rssBytesPerInstance), sum(base.rssBytesPerInstance)),
    }));
}

async function main(): Promise<number> {
  for (const n of opts.instances) {
    const why = missingPrerequisite(n);
    if (why !== undefined) {
      console.error(`bench:origo: cannot run a ${n}-instance row: ${why}`);
      return 2;
    }
  }
  if (Math.ceil(settings.clients / settings.clientsPerAddress) > MAX_ADDRESSES) {
    console.error('bench:origo: too many client addresses: raise --clients-per-address');
    return 2;
  }
  // Each row's processes (origo instances, generator workers) must fit under the open-file limit,
  // raised first as far as this process may (fd-limit.ts): children inherit it.
  const plan = (n: number, limit: number) =>
    planProcesses(settings.clients, settings.proxies, n, limit, opts.generatorProcesses);
  raiseFileLimit(Math.max(...opts.instances.map((n) => plan(n, Infinity).filesNeeded)));
  const limit = fileLimit().soft;
  const plans = new Map(opts.instances.map((n) => [n, plan(n, limit)]));
  for (const [n, p] of plans) {
    if (p.problem === undefined) continue;
    console.error(
      `bench:origo: a ${n}-instance row does not fit: ${p.problem}, and this process cannot raise it` +
        ` (raising the hard limit needs CAP_SYS_RESOURCE, e.g. a systemd unit with LimitNOFILE=): lower --clients/--proxies`,
    );
    return 2;
  }
  const started: Started = { instances: [] };
  // Interrupted: stop every process this run started (bounded), then exit.
  const interrupted = () => abortStarted(started);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`bench:origo: ${signal}: stopping the processes it started`);
      void interrupted().finally(() => process.exit(130));
    });
  }
  const begin = performance.now();
  const load = loadavg().map((x) => Math.round(x * 100) / 100);
  console.log(
    `bench:origo: ${settings.clients} clients, ${settings.proxies} proxies, rows of ${opts.instances.join(', ')} instance(s);` +
      ` ${settings.offerRate} offers/s from ${Math.round(settings.activeFraction * 100)} % of the clients,` +
      ` heartbeat ${settings.heartbeatIntervalMs} ms; ${cpus().length} cores, load average ${load.join(' ')}`,
  );
  const rows: Row[] = [];
  for (const instances of opts.instances) {
    console.log(`row: ${instances} instance(s)`);
    rows.push(await runRow(settings, instances, plans.get(instances)!.workers, started, (line) => console.log(line)));
  }
  const durationMs = Math.round(performance.now() - begin);
  const ok = rows.every((r) => r.targetsReached && r.failures.total === 0);
  const result = {
    bench: 'origo',
    settings,
    machine: { cores: cpus().length, loadAverageBefore: load, node: process.version },
    relayMeasure:
      'client → proxy one way: sent at (client) to received at (proxy) on CLOCK_MONOTONIC, which every generator process shares',
    rows,
    ratios: ratios(rows),
    ok,
    durationMs,
  };
  console.log(
    `bench:origo: ${ok ? 'all targets reached, no failures' : 'TARGETS NOT REACHED or failures: see the rows'} (${(durationMs / 1000).toFixed(1)} s)`,
  );
  if (opts.json) console.log(JSON.stringify(result));
  return ok ? 0 : 3;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
