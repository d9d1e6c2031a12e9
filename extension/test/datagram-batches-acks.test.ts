/**
 * The batches' runs against the real core: a Receiver answers what DatagramBatches delivered (one
 * flush a microtask after a run, as shared/src/client/download.ts does) and a real Sender reads
 * the FEEDBACK. A FEEDBACK acknowledges 32 packets below its largest, and the Sender counts older
 * unacknowledged ones as lost: a burst of one proxy's datagrams delivered in one run, answered by
 * one FEEDBACK, made the Sender declare delivered packets lost (issue 30, paper-loss2).
 */
import { createHash } from 'node:crypto';
import { decode, MessageType, Receiver, rlncCodec, seededRandom, Sender } from '@mutp/shared/internal';
import { DatagramBatches, MAX_BATCH, MAX_RUN, ScheduleTask } from '../src/downloader/datagram-batches';

const TRANSFER = 0x5eed0030;
/** More than the 33 packets one FEEDBACK acknowledges (its window of 64 units lets 66 go). */
const BURST = 64;

function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

/** One source's burst of BURST datagrams reaching the core through DatagramBatches, no path loss. */
async function burstThroughBatches(maxRun: number): Promise<{ lost: number; feedbacks: number; delivered: number }> {
  const random = seededRandom(30);
  const object = Uint8Array.from({ length: 512 * 1024 }, () => random() & 0xff);
  const receiver = new Receiver({
    transferId: TRANSFER,
    url: 'https://origin.example/segment.ts',
    mode: 'rlnc',
    scheduler: 'rarest',
    sourceCount: 1,
    window: 64,
    generationSize: 16,
    symbolSize: 1200,
    codec: rlncCodec,
    now: 0,
    sha256,
  });
  const request = receiver.pollDatagram(0);
  if (!request) throw new Error('the receiver sent no REQUEST');
  const decoded = decode(request.bytes);
  if (!decoded.ok || decoded.value.type !== MessageType.Request) throw new Error('the first datagram is no REQUEST');
  // A window that lets the whole burst go at once, as a warm source's on a fast path does.
  const sender = new Sender({
    request: decoded.value,
    object,
    digest: sha256(object),
    codec: rlncCodec,
    random: seededRandom(31),
    now: 0,
    sha256,
    config: { initialWindowPackets: 1024 },
  });
  const burst: Uint8Array[] = [];
  for (let i = 0; i < 10 * BURST && burst.length < BURST; i++) {
    const d = sender.pollDatagram(1);
    if (d) burst.push(d.slice());
  }
  expect(burst).toHaveLength(BURST);

  let feedbacks = 0;
  let delivered = 0;
  let flushQueued = false;
  const now = 45; // the burst arrives one RTT later; feedback goes back at once
  const flush = () => {
    for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now)) {
      const m = decode(d.bytes);
      if (m.ok && m.value.type === MessageType.FeedbackRlnc) feedbacks++;
      sender.handleDatagram(d.bytes, now);
    }
  };
  let tasks: (() => void)[] = [];
  const schedule: ScheduleTask = (run) => tasks.push(run);
  const batches = new DatagramBatches(
    (bytes, at) => {
      delivered++;
      receiver.handleDatagram(0, bytes, at);
      if (flushQueued) return;
      flushQueued = true;
      queueMicrotask(() => {
        flushQueued = false;
        flush();
      });
    },
    schedule,
    () => now,
    undefined,
    MAX_BATCH,
    maxRun,
  );
  for (const d of burst) batches.push(d);
  const run = tasks;
  tasks = [];
  run.forEach((r) => r());
  // Every run and every answer is a microtask; a macrotask later all have run.
  await new Promise<void>((resolve) => setImmediate(resolve));
  return { lost: sender.stats.lost, feedbacks, delivered };
}

describe('DatagramBatches with the real Receiver and Sender', () => {
  it('a burst of one source is answered every MAX_RUN datagrams, so no delivered packet counts as lost', async () => {
    const r = await burstThroughBatches(MAX_RUN);
    expect(r.delivered).toBe(BURST);
    expect(r.feedbacks).toBeGreaterThanOrEqual(Math.floor(BURST / MAX_RUN));
    expect(r.lost).toBe(0);
  });

  it('(the cause) the same burst in one run is one FEEDBACK, and the Sender declares the older part lost', async () => {
    const r = await burstThroughBatches(MAX_BATCH);
    expect(r.delivered).toBe(BURST);
    expect(r.feedbacks).toBe(1);
    // All but the 33 acknowledged and the META/DIGESTS (no sequence number) ones.
    expect(r.lost).toBeGreaterThan(20);
  });
});
