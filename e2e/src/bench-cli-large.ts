/**
 * `npm run bench:cli-large [-- --gib 2 --proxies 4 --mode rlnc --chunk-size 16MiB --kill-at 0.5]`:
 * the compiled `mutp get` (client/bin/mutp.js, after `npm run build`) downloads a synthetic
 * object of several GiB through origo and local proxies, is SIGKILLed when half of it is
 * verified, then resumes with `-c`. Reports each run's peak RSS (VmHWM of the mutp process),
 * whether the file is byte-exact (SHA-256 against the origin's bytes), where the resume started,
 * the bytes the proxies were asked for again below it (must be 0) and what the range in flight
 * at the kill cost. Baseline in the same run: a plain HTTP download of the same object from the
 * origin by curl-like streaming in this process (the origin's own speed), as a ratio.
 * The last line of stdout is one JSON document.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Cluster, startCluster } from './cluster';
import { largeObjectSlice, LARGE_BLOCK_BYTES, Origin, originQuiet, startOrigin } from './origin';
import { peakRssMiB } from './proc-memory';

const ROOT = join(__dirname, '..', '..');
const MUTP = join(ROOT, 'client', 'bin', 'mutp.js');

interface RunOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  peakRssMiB: number;
  stdout: string;
  stderr: string;
  /** The control file's resume point when the run was killed. */
  killedAt?: number;
}

/** Runs mutp; with `killAt`, SIGKILLs it once the control file says that many bytes are verified. */
function runMutp(args: string[], out: string, killAt?: number): Promise<RunOutcome> {
  // The launcher itself, so its #! line (node's flags, the allocator's setting) applies as for a user.
  const child = spawn(MUTP, args, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  let peak = 0;
  let killedAt: number | undefined;
  const sampler = setInterval(() => {
    peak = Math.max(peak, peakRssMiB(child.pid!));
    if (killAt === undefined || killedAt !== undefined) return;
    try {
      const next = (JSON.parse(readFileSync(`${out}.mutp`, 'utf8')) as { nextOffset: number }).nextOffset;
      if (next >= killAt) {
        peak = Math.max(peak, peakRssMiB(child.pid!));
        killedAt = next;
        child.kill('SIGKILL');
      }
    } catch {
      // not written yet, or being renamed
    }
  }, 20);
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => {
      clearInterval(sampler);
      resolve({ code, signal, peakRssMiB: peak, stdout, stderr, ...(killedAt !== undefined ? { killedAt } : {}) });
    }),
  );
}

/** SHA-256 of /large/<total>/<seed> as the origin makes it, block by block. */
function expectedDigest(total: number, seed: number): string {
  const hash = createHash('sha256');
  const step = LARGE_BLOCK_BYTES * 256;
  for (let at = 0; at < total; at += step) hash.update(largeObjectSlice(total, seed, at, Math.min(total, at + step)));
  return hash.digest('hex');
}

/** The origin's own speed: the object streamed straight from it (the baseline of the ratio). */
async function directGoodput(url: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(url);
  let bytes = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) bytes += chunk.length;
  return (bytes / (performance.now() - started)) * 1000;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      gib: { type: 'string', default: '2' },
      proxies: { type: 'string', default: '4' },
      mode: { type: 'string', default: 'rlnc' },
      'chunk-size': { type: 'string' },
      'kill-at': { type: 'string', default: '0.5' },
    },
  });
  const total = Math.round(Number(values.gib) * 1024 ** 3);
  const proxies = Number(values.proxies);
  const seed = 11;
  const path = `/large/${total}/${seed}`;
  console.error('[bench:cli-large] npm run build (the compiled bins are what users run)');
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });

  const dir = mkdtempSync(join(tmpdir(), 'mutp-large-'));
  const out = join(dir, 'large.bin');
  let origin: Origin | undefined;
  let cluster: Cluster | undefined;
  try {
    origin = await startOrigin();
    cluster = await startCluster({
      proxies: Array.from({ length: proxies }, (_, i) => ({ name: `large-p${i}`, uploadKBps: 0 })),
      allowPrivateOrigins: true,
    });
    const args = [
      'get',
      `${origin.url}${path}`,
      '--origo',
      cluster.clientUrl,
      '-o',
      out,
      '--mode',
      String(values.mode),
      '--proxies',
      String(proxies),
      ...(values['chunk-size'] ? ['--chunk-size', values['chunk-size']] : []),
      '--no-progress',
      '--timeout',
      '300000',
    ];
    console.error(`[bench:cli-large] ${total} bytes through ${proxies} proxies, SIGKILL at ${values['kill-at']}`);
    const first = await runMutp(args, out, Math.floor(total * Number(values['kill-at'])));
    if (first.killedAt === undefined)
      throw new Error(`the first run was not killed (exit ${first.code}): ${first.stderr}`);
    // What the killed run's proxies were still fetching arrives first; after that it is the resume's.
    await originQuiet(origin, path);
    const logged = origin.log.length;
    // The range in flight at the kill: asked of the origin, never committed (fetched again on resume).
    const inFlight = new Set<string>();
    for (const r of origin.log.slice(0, logged)) {
      const m = /^bytes=(\d+)-(\d+)$/.exec(r.path === path ? (r.range ?? '') : '');
      if (m && Number(m[1]) >= first.killedAt) inFlight.add(`${m[1]}-${m[2]}`);
    }
    const inFlightBytes = [...inFlight].reduce((sum, r) => {
      const [a, b] = r.split('-').map(Number);
      return sum + b - a + 1;
    }, 0);
    const second = await runMutp([...args, '-c', '--json'], out);
    if (second.code !== 0) throw new Error(`the resumed run failed (exit ${second.code}): ${second.stderr}`);
    const summary = JSON.parse(second.stdout.trim().split('\n').pop()!) as {
      resumedFrom: number;
      fetchedBytes: number;
      durationMs: number;
      goodputBps: number;
      sha256: string;
    };
    // What the proxies asked the origin for after the kill, below the resume point: fetched twice.
    let refetchedBelowResume = 0;
    for (const r of origin.log.slice(logged)) {
      const m = /^bytes=(\d+)-(\d+)$/.exec(r.path === path ? (r.range ?? '') : '');
      if (m) refetchedBelowResume += Math.max(0, Math.min(Number(m[2]) + 1, summary.resumedFrom) - Number(m[1]));
    }
    const expected = expectedDigest(total, seed);
    const direct = await directGoodput(`${origin.url}${path}`);
    const result = {
      bench: 'cli-large',
      bytes: total,
      proxies,
      mode: values.mode,
      chunkSize: values['chunk-size'] ?? 'default (8MiB)',
      killedAtBytes: first.killedAt,
      resumedFrom: summary.resumedFrom,
      inFlightRangeBytes: inFlightBytes,
      refetchedBelowResumeBytes: refetchedBelowResume,
      byteExact: summary.sha256 === expected && existsSync(out) && !existsSync(`${out}.part`),
      peakRssMiB: { killedRun: Math.round(first.peakRssMiB), resumedRun: Math.round(second.peakRssMiB) },
      resumedRun: { fetchedBytes: summary.fetchedBytes, durationMs: Math.round(summary.durationMs) },
      goodputMBps: summary.goodputBps / 1e6,
      originDirectMBps: direct / 1e6,
      vsOriginDirect: summary.goodputBps / direct,
    };
    console.log(JSON.stringify(result));
  } finally {
    await cluster?.stop();
    await origin?.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
