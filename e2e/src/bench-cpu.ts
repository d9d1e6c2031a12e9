/**
 * `npm run bench:cpu -- [--json] [--repeats 3] [--modes uncoded,rlnc,fountain] [--transports webrtc,quic]
 * [--sides client,proxy,emulator] [--runtimes node,chromium]`: what a byte costs in CPU. The Node client downloads from the
 * paper's mixed fleet of four loopback proxies (896, 896, 1792, 1792 KB/s); per mode and transport
 * one warm-up download is excluded, then each of `--repeats` measurements downloads the object
 * `--downloads` times from the proxies' caches and reads the processes' own CPU counters before
 * and after: the client's with process.cpuUsage() (this process: every thread, node-datachannel's
 * and the QUIC addon's included; the in-process origin is idle once the proxies hold the object),
 * each proxy's from /proc (its threads' schedstat, in ns). The emulator row is linkem's paced
 * regime from `bench:linkem` (it needs network namespaces). The Chromium client rows (runtime
 * 'chromium', side 'client': the extension downloading in headless Chromium from the same kind of
 * cluster, skipped when Chromium is not installed) are cpu-chromium.ts's; the JSON document's
 * `chromiumProcesses` splits them by Chromium process, with each cell's idle baseline.
 *
 * Rows: {runtime, side, mode, transport, bytes, cpuMsPerMiB, usPerPacket}, one per measurement;
 * `summary` holds each cell's median and range. Proxies' packets are those the client received
 * (on loopback none are lost). The last stdout line is one JSON document.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { ClientError, DownloadResult, MutpClient, TransportPreference } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { byteCount, integer } from '@mutp/cli-options';
import { Cluster, mixedFleetOfFour, startCluster } from './cluster';
import { startOrigin } from './origin';
import {
  CODED_MODES,
  CpuMode,
  CpuRow,
  MIB,
  round,
  RUNTIMES,
  Runtime,
  Side,
  SIDES,
  Transport,
  TRANSPORTS,
} from './cpu-row';
import { measureChromium } from './cpu-chromium';
import { processCpuNs, threadCpuNsByName } from './proc-cpu';

const listOf =
  <T extends string>(name: string, allowed: readonly T[]) =>
  (value: string): T[] => {
    const items = value.split(',').filter(Boolean);
    const bad = items.filter((x) => !allowed.includes(x as T));
    if (bad.length > 0 || items.length === 0)
      throw new Error(`${name}: one or more of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
    return items as T[];
  };

const program = new Command()
  .name('bench:cpu')
  .description("CPU per MiB and per packet of the Node client and the proxies (and linkem's per packet).")
  .option('--json', 'print one JSON document on the last line of stdout')
  .option('--repeats <n>', 'measurements per cell (after one warm-up download)', integer(1, 50), 3)
  .option('--downloads <n>', 'downloads per measurement', integer(1, 100), 2)
  .option('--object-bytes <bytes>', 'object size (K, M suffixes: binary)', byteCount(1, 256 << 20), 8 << 20)
  .option('--modes <list>', 'modes', listOf('--modes', CODED_MODES), [...CODED_MODES])
  .option('--transports <list>', 'proxy links', listOf('--transports', TRANSPORTS), [...TRANSPORTS])
  .option('--sides <list>', 'what to measure', listOf('--sides', SIDES), [...SIDES])
  .option('--runtimes <list>', 'clients (chromium: client rows only)', listOf('--runtimes', RUNTIMES), [...RUNTIMES])
  .option('--cap-scale <x>', "multiply every proxy's upload cap by x", (v) => Number(v), 1)
  .option('--timeout-ms <ms>', 'one download fails after this long', integer(1000, 600_000), 120_000)
  .parse();

const opts = program.opts<{
  json?: boolean;
  repeats: number;
  downloads: number;
  objectBytes: number;
  modes: CpuMode[];
  transports: Transport[];
  sides: Side[];
  runtimes: Runtime[];
  capScale: number;
  timeoutMs: number;
}>();
if (!(opts.capScale > 0)) throw new Error(`--cap-scale: a positive number, got ${opts.capScale}`);

/** The client's JavaScript thread alone (the rest is native threads: libdatachannel's, quinn's, V8's GC helpers). */
const mainThreadCpuNs = () => Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);

const ownCpuNs = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
};

async function downloadOnce(client: MutpClient, url: string, mode: CpuMode): Promise<DownloadResult> {
  const result = await client.get(url, { mode, proxies: 4, signal: AbortSignal.timeout(opts.timeoutMs) });
  if (result.mode === 'http') throw new Error(`${mode}: expected a MUTP download, got Parallel HTTP`);
  return result;
}

async function measureCell(
  client: MutpClient,
  cluster: Cluster,
  url: string,
  mode: CpuMode,
  transport: Transport,
): Promise<CpuRow[]> {
  await downloadOnce(client, url, mode); // warm-up: connections, encoders, JIT
  const pids = cluster.proxies.map((p) => p.process.pid!);
  const rows: CpuRow[] = [];
  for (let r = 0; r < opts.repeats; r++) {
    const proxy0 = pids.reduce((sum, pid) => sum + processCpuNs(pid), 0);
    const client0 = ownCpuNs();
    const main0 = mainThreadCpuNs();
    const threads0 = threadCpuNsByName('self');
    let bytes = 0;
    let packets = 0;
    for (let d = 0; d < opts.downloads; d++) {
      const result = await downloadOnce(client, url, mode);
      bytes += result.object.length;
      packets += result.sources.reduce((sum, s) => sum + s.received, 0);
    }
    const clientNs = ownCpuNs() - client0;
    const mainNs = mainThreadCpuNs() - main0;
    const threads = [...threadCpuNsByName('self')]
      .map(([name, ns]) => [name, ns - (threads0.get(name) ?? 0)] as const)
      .filter(([, ns]) => ns > 0.02 * clientNs)
      .sort((a, b) => b[1] - a[1])
      .map(([name, ns]) => `${name} ${Math.round((100 * ns) / clientNs)} %`);
    const proxyNs = pids.reduce((sum, pid) => sum + processCpuNs(pid), 0) - proxy0;
    for (const [side, ns] of [
      ['client', clientNs],
      ['proxy', proxyNs],
    ] as const) {
      if (!opts.sides.includes(side)) continue;
      rows.push({
        runtime: 'node',
        side,
        mode,
        transport,
        bytes,
        packets,
        cpuMs: round(ns / 1e6),
        cpuMsPerMiB: round(ns / 1e6 / (bytes / MIB)),
        usPerPacket: round(ns / 1e3 / packets),
        ...(side === 'client' ? { mainThreadShare: round(mainNs / clientNs) } : {}),
      });
    }
    process.stderr.write(
      `bench:cpu ${mode} ${transport} #${r + 1}: client ${round(clientNs / 1e6 / (bytes / MIB))} ms/MiB ` +
        `(${Math.round((100 * mainNs) / clientNs)} % on its JS thread; ${threads.join(', ')}), ` +
        `proxies ${round(proxyNs / 1e6 / (bytes / MIB))} ms/MiB, ${packets} packets\n`,
    );
  }
  return rows;
}

async function measureNode(): Promise<CpuRow[]> {
  const codecs = await loadNodeCodecs();
  const origin = await startOrigin();
  const rows: CpuRow[] = [];
  try {
    for (const transport of opts.transports) {
      const cluster = await startCluster({
        proxies: mixedFleetOfFour('cpu').map((p) => ({ ...p, uploadKBps: Math.round(p.uploadKBps * opts.capScale) })),
        allowPrivateOrigins: true,
        quic: transport === 'quic',
      });
      const client = new MutpClient(createNodeHost(), {
        origoUrl: cluster.clientUrl,
        codecs,
        transport: transport as TransportPreference,
      });
      try {
        for (const mode of opts.modes) {
          const url = `${origin.url}/object/${opts.objectBytes}/${rows.length + 1}`;
          try {
            rows.push(...(await measureCell(client, cluster, url, mode, transport)));
          } catch (e) {
            const why = e instanceof ClientError ? `${e.code}: ${e.message}` : String(e);
            throw new Error(`bench:cpu ${mode} over ${transport}: ${why}`, { cause: e });
          }
        }
      } finally {
        client.close();
        await cluster.stop();
      }
    }
  } finally {
    await origin.close();
    releaseNodeRtc();
  }
  return rows;
}

/** linkem's paced regime (7000 datagrams/s through a 20 ms link), from bench:linkem in its own process. */
function measureEmulator(): CpuRow[] {
  const rows: CpuRow[] = [];
  const script = join(__dirname, '..', '..', 'testbed', 'bench', 'linkem.ts');
  for (let r = 0; r < opts.repeats; r++) {
    const out = execFileSync(process.execPath, ['--import', 'tsx', script], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const last = JSON.parse(out.trim().split('\n').at(-1)!) as {
      skipped?: string;
      paced?: { received: number; linkemCpuSeconds: number };
    };
    if (last.skipped || !last.paced) {
      process.stderr.write(`bench:cpu emulator skipped: ${last.skipped ?? 'no paced run'}\n`);
      return rows;
    }
    const { received, linkemCpuSeconds } = last.paced;
    const bytes = received * 1200;
    rows.push({
      runtime: 'node',
      side: 'emulator',
      mode: 'udp',
      transport: 'tun',
      bytes,
      packets: received,
      cpuMs: round(linkemCpuSeconds * 1000),
      cpuMsPerMiB: round((linkemCpuSeconds * 1000) / (bytes / MIB)),
      usPerPacket: round((linkemCpuSeconds * 1e6) / received),
    });
  }
  return rows;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Median and range per (runtime, side, mode, transport). */
function summarize(rows: CpuRow[]) {
  const cells = new Map<string, CpuRow[]>();
  for (const row of rows) {
    const key = [row.runtime, row.side, row.mode, row.transport].join(' ');
    cells.set(key, [...(cells.get(key) ?? []), row]);
  }
  return [...cells.values()].map((cell) => {
    const { runtime, side, mode, transport } = cell[0];
    const perMiB = cell.map((r) => r.cpuMsPerMiB);
    const perPacket = cell.map((r) => r.usPerPacket);
    return {
      runtime,
      side,
      mode,
      transport,
      cpuMsPerMiB: round(median(perMiB)),
      cpuMsPerMiBRange: [Math.min(...perMiB), Math.max(...perMiB)],
      usPerPacket: round(median(perPacket)),
      usPerPacketRange: [Math.min(...perPacket), Math.max(...perPacket)],
    };
  });
}

async function main(): Promise<void> {
  const rows: CpuRow[] = [];
  const nodeSides = opts.sides.some((s) => s === 'client' || s === 'proxy');
  if (opts.runtimes.includes('node') && nodeSides) rows.push(...(await measureNode()));
  const chromium =
    opts.runtimes.includes('chromium') && opts.sides.includes('client') ? await measureChromium(opts) : undefined;
  rows.push(...(chromium?.rows ?? []));
  if (opts.sides.includes('emulator')) rows.push(...measureEmulator());
  const summary = summarize(rows);
  console.log('runtime   side      mode      transport  ms/MiB (range)          us/packet (range)');
  for (const s of summary)
    console.log(
      `${s.runtime.padEnd(9)} ${s.side.padEnd(9)} ${s.mode.padEnd(9)} ${s.transport.padEnd(10)} ` +
        `${String(s.cpuMsPerMiB).padStart(7)} (${s.cpuMsPerMiBRange.join('-')})`.padEnd(24) +
        `${String(s.usPerPacket).padStart(7)} (${s.usPerPacketRange.join('-')})`,
    );
  const cpu = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
  if (opts.json)
    console.log(
      JSON.stringify({
        bench: 'cpu',
        cpuModel: cpu,
        objectBytes: opts.objectBytes,
        rows,
        summary,
        ...(chromium ? { chromiumProcesses: chromium.processes } : {}),
      }),
    );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
