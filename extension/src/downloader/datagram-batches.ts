/**
 * Hands a transport's datagrams to the link in batches. A WebTransport reader gives one read()
 * promise per datagram, and the client core answers the datagrams it was given together (feedback,
 * STOP, its timer: one flush a microtask after them, as for QUIC's Node addon, which delivers a
 * batch at once); a read loop that delivers each datagram as it reads it lets that microtask run
 * between every two reads, so every datagram pays for a whole answer. Here the read loop only
 * queues: one task later, once the loop has drained everything the browser had queued, the batch
 * goes to the link in synchronous runs of at most MAX_RUN, each datagram with the time it was read.
 */

/** Runs `run` in a later task (after the current task's microtasks). */
export type ScheduleTask = (run: () => void) => void;

/** A batch is delivered at once when it reaches this many datagrams (bounds the queue). */
export const MAX_BATCH = 1024;

/**
 * The most datagrams delivered in one synchronous run; the rest of the batch follows in a
 * microtask, after the core's answer to these. A FEEDBACK acknowledges its largest sequence number
 * and the 32 below it, and the source counts every older packet it has not seen acknowledged as
 * lost (shared/src/sender/sent-packets.ts): a batch of more than 33 from one proxy (Chromium hands
 * the frame up to hundreds at once under load) answered by one FEEDBACK declared the older ones
 * lost though delivered (bench:browser paper-loss2 --sender-stats: 20 % lost on a 2 % path).
 * Half of 32 leaves room for one FEEDBACK lost on the way.
 */
export const MAX_RUN = 16;

/** How the batches went (for profiling). */
export interface BatchCounters {
  datagrams: number;
  batches: number;
  largestBatch: number;
}

export class DatagramBatches {
  private pending: Uint8Array[] = [];
  private readAt: number[] = [];
  private scheduled = false;
  private closed = false;
  /** The batch being delivered run by run, from `next` on; a later batch is appended to it. */
  private delivering: Uint8Array[] = [];
  private deliveringAt: number[] = [];
  private next = 0;
  private runQueued = false;

  constructor(
    private readonly deliver: (bytes: Uint8Array, receivedAt: number) => void,
    private readonly schedule: ScheduleTask,
    private readonly now: () => number,
    private readonly counters: BatchCounters = { datagrams: 0, batches: 0, largestBatch: 0 },
    private readonly maxBatch = MAX_BATCH,
    private readonly maxRun = MAX_RUN,
  ) {}

  /** One datagram read: delivered with the rest of its batch. */
  push(bytes: Uint8Array): void {
    if (this.closed) return;
    this.pending.push(bytes);
    this.readAt.push(this.now());
    if (this.pending.length >= this.maxBatch) {
      this.flush();
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    this.schedule(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Nothing more is delivered (the transport closed); what is queued is dropped. */
  close(): void {
    this.closed = true;
    this.pending = [];
    this.readAt = [];
    this.delivering = [];
    this.deliveringAt = [];
  }

  private flush(): void {
    const batch = this.pending;
    const readAt = this.readAt;
    if (batch.length === 0 || this.closed) return;
    this.pending = [];
    this.readAt = [];
    this.counters.batches++;
    this.counters.datagrams += batch.length;
    if (batch.length > this.counters.largestBatch) this.counters.largestBatch = batch.length;
    if (this.next < this.delivering.length) {
      // A run of the previous batch is still queued: it delivers this one after it, in order.
      this.delivering.push(...batch);
      this.deliveringAt.push(...readAt);
      return;
    }
    this.delivering = batch;
    this.deliveringAt = readAt;
    this.next = 0;
    this.deliverRun();
  }

  /** Delivers up to maxRun datagrams; queues the next run behind the microtasks they queued. */
  private deliverRun(): void {
    const end = Math.min(this.next + this.maxRun, this.delivering.length);
    for (; this.next < end && !this.closed; this.next++)
      this.deliver(this.delivering[this.next], this.deliveringAt[this.next]);
    if (this.closed || this.next >= this.delivering.length) {
      this.delivering = [];
      this.deliveringAt = [];
      this.next = 0;
      return;
    }
    if (this.runQueued) return;
    this.runQueued = true;
    queueMicrotask(() => {
      this.runQueued = false;
      this.deliverRun();
    });
  }
}

/** Reads `reader` to its end into `batches` (a failed read ends it too: the transport says why). */
export async function readInto(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  batches: DatagramBatches,
): Promise<void> {
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      batches.push(value);
    }
  } catch {
    // The session closed under the reader.
  }
}

/** Whether the frame's page is hidden (then the browser throttles its timers). */
type Hidden = () => boolean;

const pageHidden: Hidden = () =>
  (globalThis as { document?: { visibilityState?: string } }).document?.visibilityState === 'hidden';

/**
 * The batches' task: a zero-delay timer while the page is visible, a MessageChannel message while
 * it is hidden. Measured in Chromium's frame (profile:browser, paper-loss2, rlnc): a timer task
 * costs ~12 µs and a MessageChannel post 29 µs per batch, a third of what batching saved, with
 * the same batches; `scheduler.postTask` at user-blocking priority ran ahead of the network's next
 * datagram, so no batch ever held more than one. But a hidden page's timers are throttled (to
 * once a second in Chromium), and a download must not wait for that: messages are not throttled.
 */
export function frameTasks(hidden: Hidden = pageHidden): ScheduleTask {
  let channel: MessageChannel | undefined;
  let queued: (() => void)[] = [];
  const viaChannel = (run: () => void) => {
    if (!channel) {
      channel = new MessageChannel();
      channel.port1.onmessage = () => {
        const runs = queued;
        queued = [];
        for (const r of runs) r();
      };
      // In Node (the tests) an open port would keep the process alive; browsers have no unref.
      (channel.port1 as { unref?: () => void }).unref?.();
    }
    queued.push(run);
    if (queued.length === 1) channel.port2.postMessage(null);
  };
  return (run) => (hidden() ? viaChannel(run) : void setTimeout(run, 0));
}
