/**
 * Runs every parser's fuzz target on worker threads: N inputs in total, spread evenly over the
 * parsers, checked in jobs of consecutive indices. A worker that makes no progress for the
 * per-input time bound is stopped and its input reported as a hang; the rest of its job goes on
 * in a fresh worker.
 */
import { randomInt } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { drawInput } from './inputs';
import { loadTargets, targetByName } from './targets';
import type { CrashReport, FuzzJob, JobResult, WorkerMessage } from './worker';

export const DEFAULT_ITERATIONS = 1_000_000;
export const DEFAULT_TIMEOUT_MS = 2000;
const JOB_SIZE = 5000;
const POLL_MS = 100;
/** Heap of a worker: an input that needs more is a crash (out of memory), not the end of the run. */
const WORKER_HEAP_MB = 1024;

export interface FuzzOptions {
  /** Inputs in total (spread over the parsers). */
  iterations: number;
  /** Run seed (uint32); a fresh random one when absent. */
  seed?: number;
  /** Subset of the targets' names; all when absent. */
  parsers?: readonly string[];
  /** A module exporting other `TARGETS` (tests of the runner itself); the parsers' by default. */
  targetsModule?: string;
  /** Worker threads; default: the machine's parallelism. */
  workers?: number;
  /** Per-input time bound; an input over it counts as a crash (hang). */
  timeoutMs?: number;
  onJobDone?: (result: JobResult) => void;
}

export interface ParserReport {
  name: string;
  inputs: number;
  crashes: number;
  /** The crashing input with the lowest index: the input as hex, and what went wrong. */
  firstCrash?: CrashReport;
  /** Wall time spent in this parser's jobs (summed over workers). */
  ms: number;
}

export interface FuzzReport {
  inputs: number;
  seed: number;
  crashes: number;
  parsers: ParserReport[];
  ms: number;
}

/** The `--json` line: `{"inputs": n, "seed": s, "crashes": k, "parsers": [...]}`. */
export function jsonSummary(report: FuzzReport): string {
  const parsers = report.parsers.map((p) => ({
    name: p.name,
    inputs: p.inputs,
    crashes: p.crashes,
    ...(p.firstCrash ? { firstCrash: p.firstCrash } : {}),
  }));
  return JSON.stringify({ inputs: report.inputs, seed: report.seed, crashes: report.crashes, parsers });
}

/** Splits `total` over `parts` as evenly as possible. */
export function spread(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

interface PendingJob {
  parser: string;
  start: number;
  end: number;
}

function startWorker(): Worker {
  // The worker is TypeScript: register tsx's CommonJS hook in it first (as sim/src/run-pool.ts).
  return new Worker(`require('tsx/cjs'); require(${JSON.stringify(path.join(__dirname, 'worker.ts'))});`, {
    eval: true,
    resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
  });
}

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const seed = (options.seed ?? randomInt(0, 2 ** 32)) >>> 0;
  const targets = loadTargets(options.targetsModule);
  const parsers = options.parsers ?? targets.map((t) => t.name);
  for (const name of parsers) targetByName(name, targets); // unknown names fail before any work
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const reports = new Map<string, ParserReport>(parsers.map((name) => [name, { name, inputs: 0, crashes: 0, ms: 0 }]));
  const queue: PendingJob[] = [];
  spread(options.iterations, parsers.length).forEach((count, i) => {
    for (let start = 0; start < count; start += JOB_SIZE) {
      queue.push({ parser: parsers[i], start, end: Math.min(count, start + JOB_SIZE) });
    }
  });
  const record = (result: JobResult, ms: number) => {
    const report = reports.get(result.parser)!;
    report.inputs += result.inputs;
    report.crashes += result.crashes;
    report.ms += ms;
    if (result.first && (!report.firstCrash || result.first.index < report.firstCrash.index)) {
      report.firstCrash = result.first;
    }
    options.onJobDone?.(result);
  };

  const started = performance.now();
  const workerCount = Math.max(1, Math.min(options.workers ?? os.availableParallelism(), queue.length || 1));
  const lanes = Array.from({ length: workerCount }, async () => {
    let worker: Worker | undefined;
    try {
      for (let job = queue.shift(); job; job = queue.shift()) {
        worker ??= startWorker();
        const outcome = await runJob(worker, {
          ...job,
          seed,
          timeoutMs,
          targetsModule: options.targetsModule,
          progress: new SharedArrayBuffer(12),
        });
        if (outcome.kind === 'done') {
          record(outcome.result, outcome.ms);
          continue;
        }
        // A hang or the worker out of memory: the input at `index` is a crash; the inputs before
        // it were checked.
        await worker.terminate();
        worker = undefined;
        const { index } = outcome;
        const target = targetByName(job.parser, targets);
        const hex = Buffer.from(target.bytes(drawInput(target, seed, index))).toString('hex');
        record(
          {
            parser: job.parser,
            inputs: index - job.start + 1,
            crashes: outcome.crashesBefore + 1,
            first: outcome.firstBefore ?? { index, hex, error: outcome.reason },
          },
          outcome.ms,
        );
        if (index + 1 < job.end) queue.unshift({ parser: job.parser, start: index + 1, end: job.end });
      }
    } finally {
      await worker?.terminate();
    }
  });
  await Promise.all(lanes);

  const list = parsers.map((name) => reports.get(name)!);
  return {
    inputs: list.reduce((n, r) => n + r.inputs, 0),
    seed,
    crashes: list.reduce((n, r) => n + r.crashes, 0),
    parsers: list,
    ms: performance.now() - started,
  };
}

type JobOutcome =
  | { kind: 'done'; result: JobResult; ms: number }
  | { kind: 'lost'; reason: string; index: number; crashesBefore: number; firstBefore?: CrashReport; ms: number };

/** Runs one job on `worker`, watching its progress counter for a hang. */
function runJob(worker: Worker, job: FuzzJob): Promise<JobOutcome> {
  const progress = new Int32Array(job.progress);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    let firstBefore: CrashReport | undefined;
    let lastCount = -1;
    let lastChange = performance.now();
    const timer = setInterval(() => {
      const count = Atomics.load(progress, 1);
      const now = performance.now();
      if (count !== lastCount) {
        lastCount = count;
        lastChange = now;
      } else if (count > 0 && now - lastChange > job.timeoutMs) {
        lost(`no result after ${job.timeoutMs} ms (hang)`);
      }
    }, POLL_MS);
    const onMessage = (m: WorkerMessage) => {
      if (m.kind === 'crash') {
        firstBefore ??= m.first;
        return;
      }
      cleanup();
      if (m.kind === 'done') resolve({ kind: 'done', result: m.result, ms: performance.now() - started });
      else reject(new Error(`fuzz worker for ${job.parser} failed: ${m.error}`));
    };
    const lost = (reason: string) => {
      cleanup();
      const index = Atomics.load(progress, 0);
      const crashesBefore = Atomics.load(progress, 2);
      resolve({ kind: 'lost', reason, index, crashesBefore, firstBefore, ms: performance.now() - started });
    };
    const onError = (e: Error & { code?: string }) => {
      if (e.code === 'ERR_WORKER_OUT_OF_MEMORY' && Atomics.load(progress, 1) > 0)
        return lost(`out of memory (${WORKER_HEAP_MB} MB heap)`);
      cleanup();
      reject(e);
    };
    const cleanup = () => {
      clearInterval(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.postMessage(job);
  });
}
