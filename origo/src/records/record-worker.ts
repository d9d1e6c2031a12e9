/**
 * The records database's thread (see record-db.ts): owns the one SQLite connection and answers
 * the event loop's requests in order. Every SQLite call that can block (a locked database waits
 * up to the busy timeout; a slow disk as long as the write takes) happens here.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { RecordStore } from './records';
import type { RecordDbOptions, RecordDbReply, RecordDbRequest } from './record-db';

const port = parentPort!;
const options = workerData as RecordDbOptions;

function failure(id: number, err: unknown): RecordDbReply {
  return { id, ok: false, error: err instanceof Error ? err.message : String(err) };
}

let store: RecordStore | undefined;
try {
  store = new RecordStore(options.path, options.maxRows, options.maxBytes, options.busyTimeoutMs);
  port.postMessage({ id: 0, ok: true } satisfies RecordDbReply);
} catch (err) {
  port.postMessage(failure(0, err));
}

port.on('message', (request: RecordDbRequest) => {
  if (store === undefined) return port.postMessage(failure(request.id, new Error('records database not open')));
  try {
    switch (request.op) {
      case 'insert':
        store.insertBatch(request.batch);
        return port.postMessage({ id: request.id, ok: true } satisfies RecordDbReply);
      case 'recent':
        return port.postMessage({
          id: request.id,
          ok: true,
          value: store.recent(request.limit, request.mode),
        } satisfies RecordDbReply);
      case 'close':
        store.close();
        port.postMessage({ id: request.id, ok: true } satisfies RecordDbReply);
        return port.close();
    }
  } catch (err) {
    port.postMessage(failure(request.id, err));
  }
});
