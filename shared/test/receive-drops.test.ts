/**
 * A host that drops received messages unread (node-rtc's per-turn receive budget): the rate the
 * receiver reports in FEEDBACK follows what it handles, not the bunched trains it reads from a
 * backlog (shared/src/receiver/handled-rate.ts). In memory, on a virtual clock: one source sends
 * at a steady wire rate; the host's thread runs turns, each with a fixed cost (the client's other
 * work) and a small cost per message, hands on at most BUDGET messages of a turn and drops the
 * rest, as node-rtc's TurnBudget does.
 */
import {
  decode,
  encodeDataUncoded,
  MessageType,
  RateEstimator,
  Receiver,
  seededRandom,
  uncodedCodec,
} from '../src/internal';

const TRANSFER = 0x5eed0001;
const SYMBOL = 1120;
const DATAGRAM = SYMBOL + 14; // DATA_UNCODED header
/** The source's wire rate: a datagram every 0.1 ms (about 11 MB/s). */
const SEND_INTERVAL_MS = 0.1;
const BUDGET = 64;
const PER_MESSAGE_MS = 0.02;

interface Run {
  /** Bytes/s the receiver handled over the measured span. */
  handledBps: number;
  /** The mean rateBps of the FEEDBACK sent over that span. */
  reportedBps: number;
  /** The last FEEDBACK's rateBps, and the receiver's own estimate at that moment. */
  lastReported: number;
  lastEstimate: number;
  dropFraction: number;
}

/**
 * Runs the source and the host for `phases` (each: how long, the fixed cost of a turn) and
 * measures the last `measureMs` of the last phase. `countDrops`: the receiver is told the host's
 * drop count (as the Node client is); otherwise it is not (as before, and as in the browser).
 */
function run(countDrops: boolean, phases: { ms: number; turnCostMs: number }[], measureMs: number): Run {
  let drops = 0;
  const receiver = new Receiver({
    transferId: TRANSFER,
    url: 'https://origin.example/object',
    mode: 'uncoded',
    sourceCount: 1,
    window: 256,
    generationSize: 1,
    symbolSize: SYMBOL,
    codec: uncodedCodec,
    now: 0,
    ...(countDrops ? { receiveDrops: () => drops } : {}),
  });
  const random = seededRandom(7);
  const payload = Uint8Array.from({ length: SYMBOL }, () => random() & 0xff);
  const endMs = phases.reduce((sum, p) => sum + p.ms, 0);
  const measureFrom = endMs - measureMs;
  let seq = 0;
  let thread = 0;
  let phaseEnd = phases[0].ms;
  let phase = 0;
  let handledBytes = 0;
  let arrived = 0;
  let dropped = 0;
  const reported: number[] = [];
  let lastReported = 0;
  let lastEstimate = 0;
  const poll = (now: number) => {
    for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now)) {
      const m = decode(d.bytes);
      if (!m.ok || m.value.type !== MessageType.FeedbackUncoded) continue;
      lastReported = m.value.rateBps;
      lastEstimate = receiver.stats().sources[0].rateBps;
      if (now >= measureFrom) reported.push(m.value.rateBps);
    }
  };
  while (thread < endMs) {
    if (thread >= phaseEnd && phase + 1 < phases.length) phaseEnd += phases[++phase].ms;
    // A turn: what arrived since the last one waits in the native queue; BUDGET are handed on.
    const queued = Math.max(0, Math.floor(thread / SEND_INTERVAL_MS) - seq);
    const measured = thread >= measureFrom;
    for (let k = 0; k < queued; k++, seq++) {
      if (measured) arrived++;
      if (k >= BUDGET) {
        drops++;
        if (measured) dropped++;
        continue;
      }
      thread += PER_MESSAGE_MS;
      const bytes = encodeDataUncoded({ transferId: TRANSFER, seq, index: seq % 200, payload });
      receiver.handleDatagram(0, bytes, thread);
      if (measured) handledBytes += bytes.length;
      poll(thread);
    }
    const deadline = receiver.nextDeadline();
    if (deadline !== null && deadline <= thread) receiver.handleTimeout(thread);
    poll(thread);
    thread += Math.max(phases[phase].turnCostMs, SEND_INTERVAL_MS);
  }
  return {
    handledBps: (handledBytes * 1000) / measureMs,
    reportedBps: reported.reduce((a, b) => a + b, 0) / Math.max(1, reported.length),
    lastReported,
    lastEstimate,
    dropFraction: dropped / Math.max(1, arrived),
  };
}

const OVERLOADED = { ms: 3000, turnCostMs: 10 };

test('the host drops over half of what arrives: the reported rate follows what the receiver handles', () => {
  const r = run(true, [OVERLOADED], 1000);
  expect(r.dropFraction).toBeGreaterThan(0.4);
  expect(r.handledBps).toBeGreaterThan(3e6);
  expect(r.reportedBps).toBeGreaterThan(0.8 * r.handledBps);
  expect(r.reportedBps).toBeLessThan(1.25 * r.handledBps);
});

test('without the drop count the bunched trains report many times what is handled (as before)', () => {
  const r = run(false, [OVERLOADED], 1000);
  expect(r.dropFraction).toBeGreaterThan(0.4);
  expect(r.reportedBps).toBeGreaterThan(4 * r.handledBps);
  // The rate reported is the estimate itself: a host without drops (simulator, browser) is unchanged.
  expect(r.lastReported).toBe(Math.round(r.lastEstimate));
});

test('once the host keeps up again, the cap loosens and lifts within a few holds', () => {
  const r = run(true, [OVERLOADED, { ms: 8000, turnCostMs: 1 }], 500);
  expect(r.dropFraction).toBe(0);
  expect(r.lastReported).toBe(Math.round(r.lastEstimate));
});

test('the train estimator alone reads a backlog at the thread speed (why the cap is needed)', () => {
  const estimator = new RateEstimator();
  for (let seq = 0; seq < 64 * 20; seq++) {
    const turn = Math.floor(seq / 64);
    estimator.onPacket(seq, DATAGRAM, turn * 11 + (seq % 64) * PER_MESSAGE_MS);
  }
  // 64 messages every 11 ms are about 6.6 MB/s; the trains inside a turn read 20 MB/s and more.
  expect(estimator.bytesPerSecond).toBeGreaterThan(20e6);
});
