/**
 * Worker thread of the fuzz runner: checks a range of one parser's inputs. Before each input it
 * publishes the input's index in shared memory, so the runner can tell a hang (no progress for
 * the time bound), stop the thread and report that input.
 */
import { parentPort } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { BATCH_SIZE, drawBatch } from './inputs';
import { loadTargets, targetByName } from './targets';
import { FuzzTarget } from './target';

export interface FuzzJob {
  parser: string;
  seed: number;
  /** Indices [start, end) of the parser's inputs. */
  start: number;
  end: number;
  timeoutMs: number;
  /** Module of the targets (FuzzOptions.targetsModule); the parsers' when undefined. */
  targetsModule?: string;
  /** Int32Array(3): [index being checked, inputs started (progress), crashes so far]. */
  progress: SharedArrayBuffer;
}

export interface CrashReport {
  index: number;
  hex: string;
  error: string;
}

export interface JobResult {
  parser: string;
  inputs: number;
  crashes: number;
  first?: CrashReport;
}

export function describeError(e: unknown): string {
  if (e instanceof Error) return `${e.name}: ${e.message}`.slice(0, 500);
  return `non-Error thrown: ${String(e)}`.slice(0, 500);
}

// Parsers under attack complain on the console (xmldom about broken XML); a million complaints
// would bury the summary.
for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) console[level] = () => {};

const ready = new Map<string, Promise<void>>();

async function run(job: FuzzJob): Promise<JobResult> {
  const target = targetByName(job.parser, loadTargets(job.targetsModule)) as FuzzTarget<unknown>;
  if (!ready.has(target.name)) ready.set(target.name, target.setup?.() ?? Promise.resolve());
  await ready.get(target.name);
  const progress = new Int32Array(job.progress);
  const result: JobResult = { parser: job.parser, inputs: 0, crashes: 0 };
  let batchIndex = -1;
  let batch: unknown[] = [];
  for (let index = job.start; index < job.end; index++) {
    if (Math.floor(index / BATCH_SIZE) !== batchIndex) {
      batchIndex = Math.floor(index / BATCH_SIZE);
      batch = drawBatch(target, job.seed, batchIndex);
    }
    const input = batch[index % BATCH_SIZE];
    Atomics.store(progress, 0, index);
    Atomics.add(progress, 1, 1);
    const started = performance.now();
    let error: string | undefined;
    try {
      target.check(input);
    } catch (e) {
      error = describeError(e);
    }
    const ms = performance.now() - started;
    if (error === undefined && ms > job.timeoutMs)
      error = `took ${Math.round(ms)} ms, over the ${job.timeoutMs} ms bound`;
    result.inputs++;
    if (error !== undefined) {
      result.crashes++;
      Atomics.add(progress, 2, 1);
      if (!result.first) {
        result.first = { index, hex: Buffer.from(target.bytes(input)).toString('hex'), error };
        // Sent now as well, so it is not lost when a later input of the job hangs.
        parentPort!.postMessage({ kind: 'crash', first: result.first } satisfies WorkerMessage);
      }
    }
  }
  return result;
}

export type WorkerMessage =
  { kind: 'done'; result: JobResult } | { kind: 'crash'; first: CrashReport } | { kind: 'failed'; error: string };

parentPort!.on('message', (job: FuzzJob) => {
  run(job).then(
    (result) => parentPort!.postMessage({ kind: 'done', result } satisfies WorkerMessage),
    (e: unknown) => parentPort!.postMessage({ kind: 'failed', error: describeError(e) } satisfies WorkerMessage),
  );
});
