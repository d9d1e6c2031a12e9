import { parentPort } from 'node:worker_threads';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { simulate } from './index';
import { makeObject } from './object';
import { Scenario } from './scenario';

// Objects are deterministic per (size, seed); cache them so a worker makes each once.
const objects = new Map<string, Uint8Array>();
// The WebAssembly codecs, as the proxies and clients use them (byte-identical to the TypeScript
// reference, see wasm/test); loaded once per worker.
const codecs = loadNodeCodecs();

parentPort!.on('message', (scenario: Scenario) => {
  void codecs.then((set) => {
    const key = `${scenario.objectBytes}:${scenario.seed}`;
    if (scenario.mode !== 'http' && !objects.has(key))
      objects.set(key, makeObject(scenario.objectBytes, scenario.seed));
    const result = simulate(scenario, { object: objects.get(key), codecs: set });
    parentPort!.postMessage(result);
  });
});
