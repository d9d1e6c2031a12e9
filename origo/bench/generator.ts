/**
 * The load generator as worker processes (worker.ts), driven over their IPC channels: peer i
 * (client or proxy) lives in worker i % workers. Each request goes to every worker and resolves
 * with their replies; a worker that dies fails the request in flight with its exit code.
 */
import { ChildProcess, fork } from 'node:child_process';
import { join } from 'node:path';
import type { BookJson } from './book-wire';
import type { LoadSettings } from './settings';

const REPO_ROOT = join(__dirname, '..', '..');
const WORKER = join(__dirname, 'worker.ts');

export interface PeerAt {
  url: string;
  localAddress: string;
  instance: number;
}

type Body =
  | { op: 'proxies'; peers: (PeerAt & { id: string })[]; concurrency: number; timeoutMs: number; sdpBytes: number }
  | {
      op: 'clients';
      peers: (PeerAt & { index: number })[];
      concurrency: number;
      timeoutMs: number;
      sdpBytes: number;
      requestCount: number;
      instances: number;
    }
  /** Clients with an index below `activeBelow` make offers, `offerRate` per second in this worker. */
  | { op: 'drive'; activeBelow: number; offerRate: number; settings: LoadSettings }
  | { op: 'measure'; on: boolean }
  | { op: 'stop'; drainMs: number }
  | { op: 'close'; timeoutMs: number };

export type Request = Body & { id: number };

/** Sent by a worker while it connects peers (no id: not a reply). */
export interface Progress {
  progress: { op: 'proxies' | 'clients'; done: number };
}

/** Handshakes a worker reports progress after, each time. */
export const PROGRESS_STEP = 1000;

export interface Reply {
  id: number;
  result?: {
    /** Peers the worker holds (registered, connected or driven, by op). */
    peers: number;
    open?: { clients: number; proxies: number };
    book?: BookJson;
  };
  error?: string;
}

type Result = NonNullable<Reply['result']>;

interface Pending {
  resolve(result: Result): void;
  reject(err: Error): void;
}

class Worker {
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private exited = false;
  onProgress?: (op: Progress['progress']['op'], done: number) => void;

  constructor(
    readonly index: number,
    readonly child: ChildProcess,
  ) {
    child.on('message', (message: Reply | Progress) => {
      if ('progress' in message) {
        this.onProgress?.(message.progress.op, message.progress.done);
        return;
      }
      const reply = message;
      const p = this.pending.get(reply.id);
      if (p === undefined) return;
      this.pending.delete(reply.id);
      if (reply.error !== undefined) p.reject(new Error(`generator worker ${index}: ${reply.error}`));
      else p.resolve(reply.result!);
    });
    child.once('exit', (code, signal) => {
      this.exited = true;
      for (const p of this.pending.values()) {
        p.reject(new Error(`generator worker ${index} exited (${code ?? signal}) with a request in flight`));
      }
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  ask(body: Body): Promise<Result> {
    if (this.exited) return Promise.reject(new Error(`generator worker ${this.index} has exited`));
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ ...body, id } as Request);
    });
  }

  /** Ends the process (its peers closed or not): disconnect, then SIGKILL if it lingers. */
  async end(graceMs: number): Promise<void> {
    if (this.exited || this.child.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    if (this.child.connected) this.child.disconnect();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), graceMs)));
    if ((await Promise.race([gone, late])) === 'late') this.child.kill('SIGKILL');
    clearTimeout(timer);
    await gone;
  }
}

export class Generator {
  private constructor(private readonly workers: Worker[]) {}

  /** Forks `count` workers (node --import tsx worker.ts) and waits until each has started. */
  static async start(count: number): Promise<Generator> {
    const workers = Array.from({ length: count }, (_, index) => {
      const child = fork(WORKER, [], {
        cwd: REPO_ROOT,
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      return new Worker(index, child);
    });
    const generator = new Generator(workers);
    try {
      await generator.all(() => ({ op: 'measure', on: false }));
    } catch (err) {
      await generator.end();
      throw err;
    }
    return generator;
  }

  get count(): number {
    return this.workers.length;
  }

  /** Told of each worker's handshakes done so far, every PROGRESS_STEP of them. */
  set onProgress(report: (worker: number, op: Progress['progress']['op'], done: number) => void) {
    for (const w of this.workers) w.onProgress = (op, done) => report(w.index, op, done);
  }

  get pids(): number[] {
    return this.workers.map((w) => w.pid);
  }

  /** Peer i of `total` lives in worker i % count: the worker's share, in index order. */
  share<T>(total: number, worker: number, make: (i: number) => T): T[] {
    const out: T[] = [];
    for (let i = worker; i < total; i += this.workers.length) out.push(make(i));
    return out;
  }

  /** Sends each worker its request (made per worker) and resolves with every reply. */
  all(body: (worker: number) => Body): Promise<Result[]> {
    return Promise.all(this.workers.map((w) => w.ask(body(w.index))));
  }

  /** Ends every worker (bounded). */
  async end(graceMs = 5000): Promise<void> {
    await Promise.all(this.workers.map((w) => w.end(graceMs)));
  }
}
