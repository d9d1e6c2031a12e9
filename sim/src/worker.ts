import { parentPort } from 'node:worker_threads';
import { simulate } from './index';
import { makeObject } from './object';
import { Scenario } from './scenario';

// Objects are deterministic per (size, seed); cache them so a worker makes each once.
const objects = new Map<string, Uint8Array>();

parentPort!.on('message', (scenario: Scenario) => {
  const key = `${scenario.objectBytes}:${scenario.seed}`;
  if (scenario.mode !== 'http' && !objects.has(key)) objects.set(key, makeObject(scenario.objectBytes, scenario.seed));
  const result = simulate(scenario, { object: objects.get(key) });
  parentPort!.postMessage(result);
});
