/** Runs simulations on worker threads (one per core), keeping results in submission order. */
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { Scenario, SimResult } from './scenario';

export async function runAll(scenarios: Scenario[], onProgress?: (done: number) => void): Promise<SimResult[]> {
  const workerCount = Math.max(1, Math.min(os.availableParallelism?.() ?? os.cpus().length, scenarios.length));
  const results: SimResult[] = new Array(scenarios.length);
  let next = 0;
  let done = 0;
  const workers = Array.from(
    { length: workerCount },
    // The worker is TypeScript: register tsx's CommonJS hook in it first.
    () =>
      new Worker(`require('tsx/cjs'); require(${JSON.stringify(path.join(__dirname, 'worker.ts'))});`, { eval: true }),
  );
  try {
    await Promise.all(
      workers.map(
        (worker) =>
          new Promise<void>((resolve, reject) => {
            const feed = () => {
              if (next >= scenarios.length) return resolve();
              const index = next++;
              worker.once('message', (result: SimResult) => {
                results[index] = result;
                onProgress?.(++done);
                feed();
              });
              worker.postMessage(scenarios[index]);
            };
            worker.once('error', reject);
            feed();
          }),
      ),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return results;
}
