/**
 * `npm run bench:cli-pipeline -- [--mib 64 --chunk-size 8MiB --proxies 4 --mode rlnc
 * --first-byte-ms 150 --origin-mbps 40 --prefetch 0,2 --repeats 3]`: what staging ranges ahead
 * (`mutp get --prefetch-ranges`) gains a split download, on this machine, in one run. `mutp get`
 * (its own process, from source) fetches a synthetic object of `--mib` MiB through origo and
 * local proxies from a distant origin (distant-origin.ts: `--first-byte-ms` before each answer,
 * each answer paced to `--origin-mbps` MB/s), once per `--prefetch` value per repeat,
 * interleaved, each under a URL no proxy has cached. Per run: wall time of the download, goodput
 * and normalized goodput, the peak RSS of the mutp process (VmHWM; run from source, so the
 * loader's own start-up peak, about 110 MiB, is a floor), whether the bytes are exact (SHA-256 against the origin's), what the look-ahead hinted and how
 * the proxies answered, and the ranges the proxies fetched from the origin more than once each.
 * The last line of stdout is one JSON document with every figure.

 *
 * Memory (issue 32): with `--compiled` it runs the compiled bin (after `npm run build`) as its
 * launcher does (the #! line's environment and node flags, read from client/bin/mutp.js), with
 * `--node-flags` after them and `--env` added, so a flag or an allocator setting can be tried
 * before it goes into the launcher. Each run also reports its CPU seconds, where the RSS lay at its
 * highest (`atPeak`, from /proc/PID/smaps: glibc's per-thread arenas, the brk heap, other
 * anonymous memory, mapped files) and what node said then (`nodeAtPeak`, memory-probe.cjs: V8
 * heap, array buffers, and node-rtc's receive counters, at the peak and at exit).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Command } from 'commander';
import { quantile } from './box-plot';
import { Cluster, spawnService, startCluster } from './cluster';
import { DistantOrigin, startDistantOrigin } from './distant-origin';
import { largeObjectSlice, LARGE_BLOCK_BYTES, Origin, startOrigin } from './origin';
import { cpuSeconds, peakRssMiB, RssBreakdown, rssBreakdown } from './proc-memory';

const ROOT = join(__dirname, '..', '..');

const opts = new Command()
  .name('bench-cli-pipeline')
  .description('Split downloads by mutp get with and without ranges staged ahead, from a distant origin.')
  .option('--mib <n>', 'object size, MiB', (v) => Number(v), 64)
  .option('--chunk-size <size>', "mutp get's --chunk-size", '8MiB')
  .option('--proxies <n>', 'proxies', (v) => Number(v), 4)
  .option('--mode <mode>', 'download mode', 'rlnc')
  .option('--first-byte-ms <ms>', "the origin's time to first byte", (v) => Number(v), 150)
  .option('--origin-mbps <MB/s>', 'each origin answer paced to this (0: unpaced)', (v) => Number(v), 40)
  .option('--upload-kbps <KB/s>', "each proxy's upload limit (0: none)", (v) => Number(v), 0)
  .option('--prefetch <list>', '--prefetch-ranges values compared', '0,2')
  .option('--repeats <n>', 'runs of each value', (v) => Number(v), 3)
  .option('--compiled', 'run the compiled bin (client/bin/mutp.js, after npm run build) instead of the sources')
  .option(
    '--node-flags <flags>',
    "with --compiled: node/V8 flags after the bin's own, e.g. '--max-semi-space-size=8'",
    '',
  )
  .option('--env <list>', "extra environment of the mutp process, e.g. 'MALLOC_ARENA_MAX=2' (comma-separated)", '')
  .parse()
  .opts<{
    mib: number;
    chunkSize: string;
    proxies: number;
    mode: string;
    firstByteMs: number;
    originMbps: number;
    uploadKbps: number;
    prefetch: string;
    repeats: number;
    compiled?: boolean;
    nodeFlags: string;
    env: string;
  }>();

/** What the mutp process is run with besides its arguments. */
const mutpEnv: NodeJS.ProcessEnv = Object.fromEntries(
  opts.env
    .split(',')
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);
const probeFile = join(mkdtempSync(join(tmpdir(), 'mutp-probe-')), 'memory.json');
mutpEnv.MUTP_MEMORY_PROBE = probeFile;
mutpEnv.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --require ${join(__dirname, 'memory-probe.cjs')}`.trim();

interface Run {
  prefetch: number;
  wallMs: number;
  goodputMBps: number;
  normalizedGoodput: number;
  peakRssMiB: number;
  /** CPU seconds of the mutp process (user + system, last sampled before it exited). */
  cpuSeconds: number;
  /** Where the resident set lay when it was highest (/proc/PID/smaps, sampled every 100 ms). */
  atPeak?: RssBreakdown;
  /** What node said when its RSS was highest (memory-probe.cjs). */
  nodeAtPeak?: Record<string, unknown>;
  byteExact: boolean;
  hints: { hinted: number; staged: number; failed: number };
  /** Ranges a proxy asked the origin for more than once per proxy (0 expected). */
  rangesFetchedTwice: number;
}

/** Runs `mutp get`, resolving with its exit code, stdout and stderr, its wall time and peak RSS. */
function mutp(args: string[]): Promise<{
  code: number | null;
  stdout: string;
  stderr: string;
  wallMs: number;
  peakRssMiB: number;
  cpuSeconds: number;
  atPeak?: RssBreakdown;
  nodeAtPeak?: Record<string, unknown>;
}> {
  const started = performance.now();
  rmSync(probeFile, { force: true });
  const child = opts.compiled
    ? spawn(process.execPath, [...launcher.nodeFlags, ...extraFlags, BIN, ...args], {
        cwd: ROOT,
        env: { ...process.env, ...launcher.env, ...mutpEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawnService('client/src/cli.ts', args, mutpEnv);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  let peak = 0;
  let atPeak: RssBreakdown | undefined;
  let cpu = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, peakRssMiB(child.pid!));
    const now = rssBreakdown(child.pid!);
    if (now && now.totalMiB > (atPeak?.totalMiB ?? 0)) atPeak = now;
    cpu = cpuSeconds(child.pid!) ?? cpu;
  }, 100);
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      clearInterval(sampler);
      const nodeAtPeak = existsSync(probeFile)
        ? (JSON.parse(readFileSync(probeFile, 'utf8')) as Record<string, unknown>)
        : undefined;
      resolve({
        code,
        stdout,
        stderr,
        wallMs: performance.now() - started,
        peakRssMiB: peak,
        cpuSeconds: cpu,
        atPeak,
        nodeAtPeak,
      });
    }),
  );
}

const BIN = join(ROOT, 'client', 'bin', 'mutp.js');
const extraFlags = opts.nodeFlags.split(' ').filter(Boolean);

/**
 * The bin's #! line (`#!/usr/bin/env -S VAR=value node --flag ...`), taken apart so the bench
 * runs exactly what the launcher runs, with `--node-flags` after the launcher's own (V8 takes
 * the last value of a flag).
 */
function readLauncher(): { env: NodeJS.ProcessEnv; nodeFlags: string[] } {
  const words = readFileSync(BIN, 'utf8')
    .split('\n')[0]
    .replace(/^#!\/usr\/bin\/env -S /, '')
    .split(' ');
  const node = words.indexOf('node');
  if (node < 0) throw new Error(`${BIN}: no node in its #! line`);
  return {
    env: Object.fromEntries(words.slice(0, node).map((kv) => kv.split('=') as [string, string])),
    nodeFlags: words.slice(node + 1),
  };
}
const launcher = readLauncher();

function digestOf(total: number, seed: number): string {
  const hash = createHash('sha256');
  const step = LARGE_BLOCK_BYTES * 256;
  for (let at = 0; at < total; at += step) hash.update(largeObjectSlice(total, seed, at, Math.min(total, at + step)));
  return hash.digest('hex');
}

async function main(): Promise<void> {
  const total = opts.mib * 1024 * 1024;
  const values = opts.prefetch.split(',').map(Number);
  let origin: Origin | undefined;
  let distant: DistantOrigin | undefined;
  let cluster: Cluster | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'mutp-pipeline-'));
  const runs: Run[] = [];
  try {
    origin = await startOrigin();
    distant = await startDistantOrigin(origin.url, {
      firstByteMs: opts.firstByteMs,
      bytesPerSecond: opts.originMbps * 1e6,
    });
    cluster = await startCluster({
      proxies: Array.from({ length: opts.proxies }, (_, i) => ({ name: `pipe-p${i}`, uploadKBps: opts.uploadKbps })),
      allowPrivateOrigins: true,
    });
    let seed = 100;
    for (let repeat = 0; repeat < opts.repeats; repeat++) {
      for (const prefetch of values) {
        seed++;
        const path = `/large/${total}/${seed}`;
        const run = await mutp([
          'get',
          `${distant.url}${path}`,
          '--origo',
          cluster.clientUrl,
          '-o',
          join(dir, `${seed}.bin`),
          '--mode',
          opts.mode,
          '--proxies',
          String(opts.proxies),
          '--chunk-size',
          opts.chunkSize,
          '--prefetch-ranges',
          String(prefetch),
          '--no-progress',
          '--json',
        ]);
        if (run.code !== 0) throw new Error(`mutp get (prefetch ${prefetch}) exited ${run.code}: ${run.stderr}`);
        const summary = JSON.parse(run.stdout.trim().split('\n').pop()!) as {
          durationMs: number;
          goodputBps: number;
          normalizedGoodput: number;
          sha256: string;
          prefetch: Run['hints'];
        };
        const perRange = new Map<string, number>();
        for (const r of origin.log)
          if (r.path === path) perRange.set(r.range ?? '', (perRange.get(r.range ?? '') ?? 0) + 1);
        const result: Run = {
          prefetch,
          wallMs: Math.round(run.wallMs),
          goodputMBps: summary.goodputBps / 1e6,
          normalizedGoodput: summary.normalizedGoodput,
          peakRssMiB: Math.round(run.peakRssMiB),
          cpuSeconds: run.cpuSeconds,
          atPeak: run.atPeak,
          nodeAtPeak: run.nodeAtPeak,
          byteExact: summary.sha256 === digestOf(total, seed),
          hints: summary.prefetch,
          rangesFetchedTwice: [...perRange.values()].filter((n) => n > opts.proxies).length,
        };
        console.error(`[bench-cli-pipeline] ${JSON.stringify(result)}`);
        runs.push(result);
        rmSync(join(dir, `${seed}.bin`), { force: true });
      }
    }
  } finally {
    await cluster?.stop();
    await distant?.close();
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(dirname(probeFile), { recursive: true, force: true });
  }
  const median = (xs: number[]) =>
    quantile(
      [...xs].sort((a, b) => a - b),
      0.5,
    );
  const byValue = values.map((prefetch) => {
    const mine = runs.filter((r) => r.prefetch === prefetch);
    return {
      prefetch,
      medianGoodputMBps: median(mine.map((r) => r.goodputMBps)),
      medianWallMs: median(mine.map((r) => r.wallMs)),
      medianPeakRssMiB: median(mine.map((r) => r.peakRssMiB)),
      maxPeakRssMiB: Math.max(...mine.map((r) => r.peakRssMiB)),
      medianCpuSeconds: median(mine.map((r) => r.cpuSeconds)),
      allByteExact: mine.every((r) => r.byteExact),
      rangesFetchedTwice: mine.reduce((sum, r) => sum + r.rangesFetchedTwice, 0),
    };
  });
  const baseline = byValue[0];
  console.log(
    JSON.stringify({
      bench: 'cli-pipeline',
      setup: { ...opts, bytes: total },
      byValue: byValue.map((v) => ({ ...v, goodputVsFirst: v.medianGoodputMBps / baseline.medianGoodputMBps })),
      runs,
    }),
  );
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
