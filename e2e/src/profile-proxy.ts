/**
 * `npm run profile:proxy -- [--modes rlnc,fountain,uncoded,http] [--downloads 12]
 * [--proxies mixed|one|<caps>] [--transport webrtc|quic] [--cpu-prof DIR] [--proxy-args ARGS]`:
 * where the proxies' CPU goes while they serve (issue 33, the per-packet budget; bench:cpu has
 * the rows to compare). A loopback cluster (the paper's mixed fleet of four by default, `one`
 * unshaped proxy, or a list of caps in KB/s), an in-process origin, one Node client; each mode
 * first warms the proxies' caches and connections, then downloads 2 MiB objects one after
 * another. Per MiB delivered: the proxies' CPU (every thread's schedstat), split by thread (main =
 * the event loop; RTC worker, juice poll, SCTP timer = libdatachannel; tokio-rt-worker = the QUIC
 * addon; node = V8's GC and compiler threads), their idle CPU over the same wall time, and their
 * main threads' context switches (sleeps and wake-ups, preemptions). With --cpu-prof the proxies
 * run under `node --cpu-prof` and each mode's top self-time functions of their main threads, in
 * the measured window only, are printed at the end. The proxies' pids are printed first (for
 * `perf record -p`). CPU time, not wall time: robust on a shared machine, though other work still
 * costs cache misses and wake-up latency, so compare runs made close together.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { MutpClient, DownloadMode, TransportPreference } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { mixedFleetOfFour, startCluster } from './cluster';
import { startOrigin } from './origin';
import { threadsCpuNs } from './proc-cpu';

const opts = new Command()
  .option('--modes <list>', 'modes, comma-separated', 'rlnc,fountain,uncoded,http')
  .option('--downloads <n>', 'measured downloads per mode', (v) => Number(v), 12)
  .option(
    '--proxies <kind>',
    'mixed (four, capped 896/896/1792/1792 KB/s), one (unshaped), or a list of caps in KB/s (0 = none), e.g. 1792,0',
    'mixed',
  )
  .option('--transport <kind>', 'webrtc or quic', 'webrtc')
  .option('--cpu-prof <dir>', 'run the proxies with node --cpu-prof into this directory')
  .option('--proxy-args <args>', 'more proxy arguments, space-separated (e.g. "--pacing-quantum-ms 4")')
  .option('--node-args <args>', 'more node options for the proxies (e.g. --trace-gc; a wrapper in the OS temp dir)')
  .option('--json', 'print the rows as JSON on the last line')
  .parse()
  .opts<{
    modes: string;
    downloads: number;
    proxies: string;
    transport: TransportPreference;
    cpuProf?: string;
    nodeArgs?: string;
    proxyArgs?: string;
    json?: boolean;
  }>();

const OBJECT_BYTES = 2 << 20;

/** CPU time of every thread of `pid` so far, in ms, by thread name (the event loop's: main). */
function cpuMs(pid: number, into: Map<string, number>): void {
  for (const t of threadsCpuNs(pid)) {
    const name = t.tid === pid ? 'main' : t.name;
    into.set(name, (into.get(name) ?? 0) + t.ns / 1e6);
  }
}

/** Context switches (voluntary and not) of the main threads of `pids` so far. */
function switches(pids: number[]): number {
  let n = 0;
  for (const pid of pids) {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)) n += Number(m[1]);
  }
  return n;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; columnNumber: number };
  children?: number[];
}

/**
 * Self time (ms) by function in the main-thread .cpuprofile files of `pids` in `dir`, counting
 * only samples between `from` and `to` (µs on the monotonic clock, as the profiles' timestamps).
 */
function selfTimes(dir: string, pids: number[], from: bigint, to: bigint): Map<string, number> {
  const self = new Map<string, number>();
  const files = readdirSync(dir).filter(
    (f) => pids.some((pid) => f.includes(`.${pid}.0.`)) && f.endsWith('.cpuprofile'),
  );
  for (const file of files) {
    const p = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
      nodes: ProfileNode[];
      startTime: number;
      samples: number[];
      timeDeltas: number[];
    };
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, ProfileNode>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n);
    let t = p.startTime;
    p.samples.forEach((id, i) => {
      t += p.timeDeltas[i] ?? 0;
      if (t < Number(from) || t > Number(to)) return;
      const { functionName, url } = byId.get(id)!.callFrame;
      if (functionName === '(idle)') return;
      const name = functionName || `(anonymous in ${parent.get(id)?.callFrame.functionName || '?'})`;
      const key = `${name} ${url.replace(/^.*\/(?=[^/]+\/[^/]+$)/, '')}`;
      self.set(key, (self.get(key) ?? 0) + (p.timeDeltas[i + 1] ?? 0) / 1000);
    });
  }
  return self;
}

const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

async function main(): Promise<void> {
  const node = process.execPath;
  const nodeArgs = [...(opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProf}`] : []), opts.nodeArgs ?? ''];
  if (nodeArgs.join('')) {
    // --cpu-prof is not allowed in NODE_OPTIONS: the services start through a wrapper that execs
    // node with it (same pid), which spawnService takes for node.
    const wrapper = join(mkdtempSync(join(tmpdir(), 'profile-proxy-')), 'node.sh');
    writeFileSync(wrapper, `#!/bin/sh\nexec ${node} ${nodeArgs.join(' ')} "$@"\n`, { mode: 0o755 });
    process.execPath = wrapper;
  }
  const origin = await startOrigin();
  const specs =
    opts.proxies === 'mixed'
      ? mixedFleetOfFour('p')
      : opts.proxies === 'one'
        ? [{ name: 'unshaped', uploadKBps: 0 }]
        : opts.proxies.split(',').map((cap, i) => ({ name: `p${i}-${cap}`, uploadKBps: Number(cap) }));
  const extraArgs = opts.proxyArgs?.split(' ').filter((x) => x) ?? [];
  const cluster = await startCluster({
    proxies: specs.map((p) => ({ ...p, extraArgs })),
    allowPrivateOrigins: true,
    quic: opts.transport === 'quic',
  });
  process.execPath = node;
  const codecs = await loadNodeCodecs();
  const client = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs,
    transport: opts.transport,
    records: false,
  });
  const pids = cluster.proxies.map((p) => p.process.pid!);
  console.log(`proxy pids ${pids.join(',')}`);
  const threads = () => {
    const m = new Map<string, number>();
    for (const pid of pids) cpuMs(pid, m);
    return m;
  };
  const totalCpu = () => sum(threads());
  const rows: Record<string, unknown>[] = [];
  const windows: { mode: string; from: bigint; to: bigint; mib: number }[] = [];
  try {
    const modes = opts.modes.split(',') as DownloadMode[];
    for (const [m, mode] of modes.entries()) {
      const url = `${origin.url}/object/${OBJECT_BYTES}/${700 + m}`;
      const get = () => client.get(url, { mode, proxies: specs.length });
      // Warm: the proxies fetch and cache the object, the connections and encoders exist.
      await get();
      await get();
      // Idle CPU over a second (origo link, timers): the floor under the measurement.
      const idle0 = totalCpu();
      const i0 = performance.now();
      await new Promise((r) => setTimeout(r, 1000));
      const idlePerSecond = (totalCpu() - idle0) / ((performance.now() - i0) / 1000);
      const before = threads();
      const cpu0 = sum(before);
      const switches0 = switches(pids);
      const t0 = performance.now();
      // The measured window on the monotonic clock in µs, as the .cpuprofile timestamps.
      const from = process.hrtime.bigint() / 1000n;
      let bytes = 0;
      for (let k = 0; k < opts.downloads; k++) bytes += (await get()).object.length;
      const seconds = (performance.now() - t0) / 1000;
      const after = threads();
      const cpu = sum(after) - cpu0;
      const mib = bytes / (1 << 20);
      windows.push({ mode, from, to: process.hrtime.bigint() / 1000n, mib });
      const byThread = [...after]
        .map(([name, ms]) => [name, Math.round(((ms - (before.get(name) ?? 0)) / mib) * 10) / 10] as const)
        .filter(([, x]) => x >= 0.5)
        .sort((a, b) => b[1] - a[1]);
      const row = {
        mode,
        proxies: specs.length,
        transport: opts.transport,
        downloads: opts.downloads,
        cpuMsPerMiB: Math.round((cpu / mib) * 10) / 10,
        idleMsPerMiB: Math.round(((idlePerSecond * seconds) / mib) * 10) / 10,
        msPerDownload: Math.round((seconds * 1000) / opts.downloads),
        mainSwitchesPerMiB: Math.round((switches(pids) - switches0) / mib),
        byThread: Object.fromEntries(byThread),
      };
      rows.push(row);
      console.log(
        `${mode.padEnd(9)} N=${specs.length} ${opts.transport}: proxies' CPU ${row.cpuMsPerMiB} ms/MiB ` +
          `(idle share ${row.idleMsPerMiB}), ${row.msPerDownload} ms per download, ` +
          `${row.mainSwitchesPerMiB} main-thread context switches per MiB`,
      );
      console.log(`  by thread (ms/MiB): ${byThread.map(([n, x]) => `${n} ${x}`).join(', ')}`);
    }
  } finally {
    client.close();
    // The proxies write their profiles as they exit.
    await cluster.stop();
    await origin.close();
    releaseNodeRtc();
  }
  for (const w of opts.cpuProf ? windows : []) {
    const top = [...selfTimes(opts.cpuProf!, pids, w.from, w.to)].sort((a, b) => b[1] - a[1]).slice(0, 15);
    console.log(`\n${w.mode}: top self time in the proxies' main threads (ms/MiB, under the profiler)`);
    for (const [name, ms] of top) console.log(`${(ms / w.mib).toFixed(2).padStart(8)}  ${name}`);
  }
  if (opts.json) console.log(JSON.stringify(rows));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
