/**
 * `npm run bench:fairness -- [--profile bottleneck] [--seconds 30] [--json]`: MUTP over QUIC
 * (its own rate control, quic/native/src/rate_control.rs) on one emulated bottleneck, alone and
 * beside one bulk TCP flow (CUBIC by default) through the same linkem path and queue.
 *
 * Phases, each `--seconds` long, on the profile's one path (20 Mbit/s, 40 ms, 192 KB queue):
 *   tcp-alone   the TCP flow by itself: what one loss-based flow gets (the run's baseline);
 *   mutp-alone  back-to-back MUTP downloads from the proxy behind the same path;
 *   shared      both at once, started together.
 * On a lossy profile (`bottleneck-loss2`) only the two alone phases run: the figure there is how
 * much of (1 - loss) x bottleneck MUTP keeps, against TCP on the same path.
 *
 * Goodput is counted where each flow delivers: TCP payload bytes read by the receiver, MUTP bytes
 * decoded (the download's progress, degrees of freedom times symbol size). Shares are of the
 * bottleneck in IP bytes (`linkBytesPerSecond`), so headers count against both flows; `vsTcpAlone`
 * divides by what TCP alone achieved in the same run.
 */
import { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { createInterface } from 'node:readline';
import { Command, Option } from 'commander';
import { MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { BOTTLENECK_BYTES_PER_S } from '@mutp/sim/profiles';
import { loadProfile, readLinkStats, sysctl, TestbedDescription } from '@mutp/testbed';
import { spawnService, startCluster } from './cluster';
import { enterTestbed, startPlacedOrigin } from './testbed-run';

const program = new Command()
  .name('bench:fairness')
  .description('MUTP over QUIC on one shared bottleneck: alone, and beside one bulk TCP flow.')
  .option('--json', 'print the result as one JSON document on the last line of stdout')
  .option('--profile <name>', 'bottleneck (no loss: all three phases) or bottleneck-loss2 (alone phases)', 'bottleneck')
  .option('--seconds <n>', 'length of each phase', (v) => Number(v), 30)
  .option('--settle-seconds <n>', 'shares are also given without the first n seconds of a phase', (v) => Number(v), 10)
  .option('--seed <n>', "seed of the profile's losses", (v) => Number(v), 1)
  .option('--object-mib <n>', 'size of each MUTP download, MiB', (v) => Number(v), 8)
  .addOption(new Option('--mode <mode>', 'MUTP mode').choices(['rlnc', 'fountain', 'uncoded']).default('rlnc'))
  .addOption(
    new Option('--tcp-cc <name>', "the TCP sender's congestion control")
      .choices(['cubic', 'reno', 'bbr'])
      .default('cubic'),
  )
  .option('--phases <list>', 'phases to run, comma-separated (default: all the profile allows)')
  .parse();
const opts = program.opts<{
  json?: boolean;
  profile: string;
  seconds: number;
  settleSeconds: number;
  seed: number;
  objectMib: number;
  mode: 'rlnc' | 'fountain' | 'uncoded';
  tcpCc: string;
  phases?: string;
}>();
if (!(opts.seconds >= 5 && opts.seconds <= 600)) throw new Error(`--seconds: 5 to 600; got ${opts.seconds}`);
if (!(opts.settleSeconds >= 0 && opts.settleSeconds < opts.seconds))
  throw new Error(`--settle-seconds: 0 to below --seconds; got ${opts.settleSeconds}`);
if (!(opts.objectMib >= 1 && opts.objectMib <= 256)) throw new Error(`--object-mib: 1 to 256; got ${opts.objectMib}`);

const TCP_PORT = 9100;
const PHASES = ['tcp-alone', 'mutp-alone', 'shared'] as const;
type Phase = (typeof PHASES)[number];

/** Bytes per one-second bin, from a common start. */
class Meter {
  readonly bins: number[] = [];
  constructor(private readonly t0: number) {}
  add(bytes: number): void {
    const bin = Math.floor((performance.now() - this.t0) / 1000);
    while (this.bins.length <= bin) this.bins.push(0);
    this.bins[bin] += bytes;
  }
  /** Mean bytes per second over bins [from, to). */
  rate(from: number, to: number): number {
    let sum = 0;
    for (let i = from; i < to; i++) sum += this.bins[i] ?? 0;
    return sum / Math.max(1, to - from);
  }
}

const ALLOWED_CC = '/proc/sys/net/ipv4/tcp_allowed_congestion_control';

/**
 * A namespace may only pick a congestion control from the machine's allowed list (a global
 * setting; containers often allow reno and bbr only). Adds `--tcp-cc` to it when the kernel has
 * the module: allowing one more algorithm changes no socket's default.
 */
function allowCongestionControl(name: string): void {
  const allowed = readFileSync(ALLOWED_CC, 'utf8').trim().split(/\s+/);
  if (allowed.includes(name)) return;
  const available = readFileSync('/proc/sys/net/ipv4/tcp_available_congestion_control', 'utf8').trim().split(/\s+/);
  if (!available.includes(name))
    throw new Error(`--tcp-cc ${name}: this kernel has ${available.join(', ')} (modprobe tcp_${name}?)`);
  try {
    writeFileSync(ALLOWED_CC, [...allowed, name].join(' '));
  } catch (e) {
    throw new Error(
      `--tcp-cc ${name}: not in ${ALLOWED_CC} (${allowed.join(' ')}) and it cannot be added: ${String(e)}`,
    );
  }
  process.stderr.write(`bench:fairness: added ${name} to ${ALLOWED_CC}\n`);
}

/** The bulk TCP sender in the proxy's namespace (its congestion control set there). */
async function startTcpSender(host: { netns: string; address: string }): Promise<ChildProcess> {
  await sysctl(host.netns, { 'net.ipv4.tcp_congestion_control': opts.tcpCc });
  const child = spawnService(
    'e2e/src/bulk-tcp-main.ts',
    ['--host', host.address, '--port', String(TCP_PORT)],
    {},
    host.netns,
  );
  const errors: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => errors.push(l));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`bulk TCP sender not up in 30 s: ${errors.join(' | ')}`)), 30_000);
    child.once('exit', (c) => reject(new Error(`bulk TCP sender exited with ${c}: ${errors.join(' | ')}`)));
    createInterface({ input: child.stdout! }).once('line', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  child.removeAllListeners('exit');
  return child;
}

/** Reads the bulk flow for `seconds`, counting payload bytes into `meter`. */
function runTcp(address: string, seconds: number, meter: Meter): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: address, port: TCP_PORT });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve();
    }, seconds * 1000);
    socket.on('data', (chunk: Buffer) => meter.add(chunk.length));
    socket.once('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`bulk TCP flow failed: ${e.message}`));
    });
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Back-to-back MUTP downloads of `url` for `seconds`; decoded bytes into `meter`. */
async function runMutp(
  client: MutpClient,
  url: string,
  seconds: number,
  meter: Meter,
): Promise<{ downloads: number; failed: number }> {
  const deadline = performance.now() + seconds * 1000;
  let downloads = 0;
  let failed = 0;
  while (performance.now() < deadline) {
    let counted = 0;
    try {
      await client.get(url, {
        mode: opts.mode,
        proxies: 1,
        signal: AbortSignal.timeout(Math.max(1, Math.ceil(deadline - performance.now()))),
        onProgress: (p) => {
          const decoded = Math.floor((p.dof / Math.max(1, p.totalDof)) * p.bytes);
          meter.add(decoded - counted);
          counted = decoded;
        },
      });
      downloads++;
    } catch (e) {
      // The phase's end aborts the download in flight; anything before it is a failure.
      if (performance.now() < deadline - 50) {
        failed++;
        process.stderr.write(`bench:fairness: download failed: ${String(e)}\n`);
        // A failing path is not retried in a busy loop (it would take the CPU from the TCP flow).
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }
  return { downloads, failed };
}

const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

interface FlowFigures {
  goodputBps: number;
  share: number;
  settledShare: number;
  perSecondKBps: number[];
}

function figures(meter: Meter, linkBps: number): FlowFigures {
  const n = opts.seconds;
  return {
    goodputBps: Math.round(meter.rate(0, n)),
    share: round(meter.rate(0, n) / linkBps),
    settledShare: round(meter.rate(opts.settleSeconds, n) / linkBps),
    perSecondKBps: meter.bins.slice(0, n).map((b) => Math.round(b / 1024)),
  };
}

function queueDrops(tb: TestbedDescription): { queue: number; loss: number } {
  const down = readLinkStats(tb).p0?.down;
  return { queue: down?.dropped.queue ?? 0, loss: down?.dropped.loss ?? 0 };
}

async function main(): Promise<void> {
  const profile = loadProfile(opts.profile);
  if (!profile.name.startsWith('bottleneck')) throw new Error(`--profile: a bottleneck profile; got ${profile.name}`);
  const lossy = profile.name !== 'bottleneck';
  const phases: Phase[] = opts.phases
    ? PHASES.filter((p) => opts.phases!.split(',').includes(p))
    : PHASES.filter((p) => !(lossy && p === 'shared'));
  if (phases.length === 0) throw new Error(`--phases: some of ${PHASES.join(', ')}; got ${opts.phases}`);
  // The machine-wide list is written from the machine's own namespace (before entering the testbed).
  if (phases.some((p) => p !== 'mutp-alone')) allowCongestionControl(opts.tcpCc);
  const testbed = await enterTestbed(__filename, opts.profile, profile.defaultCapsKBps, opts.seed);
  if (!testbed) return;
  const linkBps = BOTTLENECK_BYTES_PER_S;
  const codecs = await loadNodeCodecs();
  const origin = await startPlacedOrigin(testbed.origin);
  const cluster = await startCluster({
    proxies: [{ name: 'b0', uploadKBps: 0 }],
    allowPrivateOrigins: true,
    readyTimeoutMs: 60_000,
    placement: { origo: testbed.origo, proxies: testbed.proxies },
    quic: true,
  });
  const sender = await startTcpSender(testbed.proxies[0]);
  const client = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs,
    insecureOrigo: true,
    transport: 'quic',
  });
  const result: Record<string, unknown> = {
    bench: 'fairness',
    profile: profile.name,
    mode: opts.mode,
    tcpCongestionControl: opts.tcpCc,
    seconds: opts.seconds,
    settleSeconds: opts.settleSeconds,
    linkBytesPerSecond: linkBps,
  };
  try {
    const url = `${origin.url}/object/${opts.objectMib << 20}/1`;
    // The proxy's cache and the QUIC session first: the phases measure the serving path.
    await client.get(url, { mode: opts.mode, proxies: 1, signal: AbortSignal.timeout(120_000) });
    let tcpAlone: number | undefined;
    for (const phase of phases) {
      const drops0 = queueDrops(testbed);
      const t0 = performance.now();
      const tcp = new Meter(t0);
      const mutp = new Meter(t0);
      const runs = await Promise.all([
        phase !== 'mutp-alone' ? runTcp(testbed.proxies[0].address, opts.seconds, tcp) : undefined,
        phase !== 'tcp-alone' ? runMutp(client, url, opts.seconds, mutp) : undefined,
      ]);
      const drops1 = queueDrops(testbed);
      const row: Record<string, unknown> = {
        linkDrops: { queue: drops1.queue - drops0.queue, loss: drops1.loss - drops0.loss },
      };
      if (phase !== 'mutp-alone') row.tcp = figures(tcp, linkBps);
      if (phase !== 'tcp-alone') row.mutp = { ...figures(mutp, linkBps), ...runs[1] };
      if (phase === 'tcp-alone') tcpAlone = tcp.rate(0, opts.seconds);
      if (tcpAlone) {
        if (row.tcp) (row.tcp as Record<string, unknown>).vsTcpAlone = round(tcp.rate(0, opts.seconds) / tcpAlone);
        if (row.mutp) (row.mutp as Record<string, unknown>).vsTcpAlone = round(mutp.rate(0, opts.seconds) / tcpAlone);
      }
      result[phase] = row;
      const line = (name: string, f?: FlowFigures) =>
        f ? ` ${name} ${(f.goodputBps / 1e6).toFixed(2)} MB/s (share ${f.share}, settled ${f.settledShare})` : '';
      process.stderr.write(
        `bench:fairness ${phase}:${line('tcp', row.tcp as FlowFigures)}${line('mutp', row.mutp as FlowFigures)}, drops ${JSON.stringify(row.linkDrops)}\n`,
      );
    }
    if (lossy) {
      const loss = (profile.name.match(/loss(\d+)/)?.[1] ?? '0') as string;
      const p = Number(loss) / 100;
      const alone = result['mutp-alone'] as { mutp: FlowFigures } | undefined;
      if (alone) result.mutpOfLossFreeShare = round(alone.mutp.goodputBps / ((1 - p) * linkBps));
    }
  } finally {
    client.close();
    sender.kill('SIGTERM');
    await cluster.stop();
    await origin.close();
    releaseNodeRtc();
  }
  printSummary(result);
  if (opts.json) console.log(JSON.stringify(result));
}

function printSummary(r: Record<string, unknown>): void {
  console.log(`phase       flow  goodput MB/s  share  settled  x tcp alone`);
  for (const phase of PHASES) {
    const row = r[phase] as Record<string, FlowFigures & { vsTcpAlone?: number }> | undefined;
    if (!row) continue;
    for (const flow of ['tcp', 'mutp'] as const) {
      const f = row[flow];
      if (!f) continue;
      console.log(
        `${phase.padEnd(11)} ${flow.padEnd(5)} ${(f.goodputBps / 1e6).toFixed(2).padStart(12)}  ${String(f.share).padEnd(5)}  ${String(f.settledShare).padEnd(7)}  ${f.vsTcpAlone ?? '-'}`,
      );
    }
  }
  if (r.mutpOfLossFreeShare !== undefined)
    console.log(`MUTP alone / ((1 - loss) x bottleneck): ${r.mutpOfLossFreeShare}`);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
