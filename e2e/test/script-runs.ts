/**
 * Runs of the e2e scripts (benchmarks, testbed runners) for the whole-system tests: each to its
 * end in a process of its own, its result the JSON document on the last line of its stdout.
 * Runs that mostly wait (on emulated links, schedules) start early, side by side, and the tests
 * that check them await them later (CI time).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');

/**
 * Runs one of the e2e scripts (`tsx`, from the repository root) to its end and parses the JSON
 * document on its last stdout line; a failure carries the end of its stderr.
 */
export async function runJson<T>(script: string, args: string[], what: string, timeoutMs = 300_000): Promise<T> {
  const argv = ['--import', 'tsx', join(ROOT, script), ...args];
  const { stdout } = await run(process.execPath, argv, { cwd: ROOT, timeout: timeoutMs, maxBuffer: 8 << 20 }).catch(
    (e: unknown) => {
      const err = e as { stderr?: string; message: string };
      throw new Error(`${what} failed: ${err.message}\n${(err.stderr ?? '').slice(-4000)}`);
    },
  );
  return JSON.parse(stdout.trim().split('\n').pop() ?? '') as T;
}

/**
 * Starts `f` now and hands back a function that awaits it: a run started in beforeAll and checked
 * by its test later. Its failure is kept for that test (never an unhandled rejection meanwhile).
 */
export function startEarly<T>(f: () => Promise<T>): () => Promise<T> {
  const settled = f().then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  return async () => {
    const r = await settled;
    if ('error' in r) throw r.error;
    return r.value;
  };
}
