/**
 * The Sender's parts on their own: the sent ring and loss detection, slot ownership and pins, the
 * client's progress, the path and in-flight limit, META/DIGESTS repetition, the resume hold and
 * DATA writing. The Sender as a whole is tested in window.test.ts, endpoint.test.ts, fuzz.test.ts
 * and symbol-digests.test.ts.
 */
import {
  Codec,
  DATA_RLNC_HEADER_BYTES,
  decode,
  DEFAULT_SENDER_CONFIG,
  FeedbackMessage,
  Layout,
  MessageType,
  MAX_DIGESTS_PER_MESSAGE,
  Mode,
  RequestMessage,
  seededRandom,
  uncodedCodec,
  UNIT_DIGEST_BYTES,
  UNLIMITED_IN_FLIGHT,
} from '../src/internal';
import { MetaAnnouncement } from '../src/sender/announcement';
import { DataWriter } from '../src/sender/data-writer';
import { SlotOwnership } from '../src/sender/ownership';
import { PathState } from '../src/sender/path-state';
import { ClientProgress } from '../src/sender/progress';
import { ResumeHold } from '../src/sender/resume-hold';
import { RttEstimator } from '../src/sender/rtt';
import { SentPackets } from '../src/sender/sent-packets';

const config = DEFAULT_SENDER_CONFIG;

function request(mode: Mode, over: Partial<RequestMessage> = {}): RequestMessage {
  return {
    type: MessageType.Request,
    transferId: 7,
    mode,
    scheduler: 'partitioned',
    sourceIndex: 0,
    sourceCount: 2,
    window: 64,
    generationSize: 4,
    symbolSize: 100,
    url: 'test://object',
    ...over,
  };
}

/** A feedback of `mode` with the given progress; no acks. */
function feedback(mode: Mode, wMin: number, report: number[]): FeedbackMessage {
  const common = {
    transferId: 7,
    metaKnown: true,
    rewind: false,
    complete: false,
    largestSeq: 0,
    ackDelay: 0,
    ackBits: 0,
    rateBps: 0,
    inFlightCap: UNLIMITED_IN_FLIGHT,
    weights: Uint8Array.from([1, 1]),
    wMin,
  };
  if (mode === 'uncoded') {
    const bitmap = new Uint8Array((report.length + 7) >> 3);
    report.forEach((bit, i) => (bitmap[i >> 3] |= bit << (i & 7)));
    return { ...common, type: MessageType.FeedbackUncoded, bitmap, bitCount: report.length };
  }
  if (mode === 'rlnc') return { ...common, type: MessageType.FeedbackRlnc, ranks: Uint8Array.from(report) };
  return { ...common, type: MessageType.FeedbackFountain, missing: Uint16Array.from(report) };
}

describe('SentPackets', () => {
  const stats = () => ({ lost: 0, expired: 0 });

  test('counts what is in flight, in all and per unit', () => {
    const sent = new SentPackets(4, 3, stats());
    sent.onSent(2, 0);
    sent.onSent(2, 1);
    sent.onSent(3, 2);
    expect([sent.nextSeq, sent.inFlight, sent.transit[2], sent.transit[3]]).toEqual([3, 3, 2, 1]);
    expect(sent.holds(2)).toBe(true);
    expect(sent.holds(3)).toBe(false); // not sent yet
    expect(sent.sentAt(1)).toBe(1);
  });

  test('acks retire packets as delivered: the largest and those its ackBits name', () => {
    const sent = new SentPackets(4, 3, stats());
    for (let i = 0; i < 3; i++) sent.onSent(i, i);
    sent.retireAcknowledged(2, 0b10, 10, 100); // seq 2, and seq 0 (bit 1 = largest - 2)
    expect(sent.inFlight).toBe(1);
    expect([sent.delivered[0], sent.delivered[1], sent.delivered[2]]).toEqual([1, 0, 1]);
    expect(sent.transit[1]).toBe(1);
    expect(sent.oldestSentAt()).toBe(1);
  });

  test('a missing packet is lost once reorderThreshold later ones arrived', () => {
    const s = stats();
    const sent = new SentPackets(8, 3, s);
    for (let i = 0; i < 5; i++) sent.onSent(i, 0);
    sent.retireAcknowledged(3, 0b011, 0, 100); // 3, 2, 1 arrived; 0 missing, only 3 after it
    expect(s.lost).toBe(1);
    expect(sent.transit[0]).toBe(0);
    expect(sent.lostPackets).toBe(1);
  });

  test('a missing packet sent well over an RTT ago is lost with fewer followers (time threshold)', () => {
    const s = stats();
    const sent = new SentPackets(8, 3, s);
    sent.onSent(0, 0);
    sent.onSent(1, 200);
    sent.retireAcknowledged(1, 0, 210, 100); // seq 0 sent 210 ms ago, over 9/8 of 100 ms
    expect(s.lost).toBe(1);
    const fresh = new SentPackets(8, 3, stats());
    fresh.onSent(0, 150);
    fresh.onSent(1, 200);
    fresh.retireAcknowledged(1, 0, 210, 100);
    expect(fresh.inFlight).toBe(1); // seq 0 may still arrive
  });

  test('expiry retires what no feedback accounted for within the timeout, oldest first', () => {
    const s = stats();
    const sent = new SentPackets(4, 3, s);
    sent.onSent(0, 0);
    sent.onSent(1, 50);
    sent.expireStale(99, 100);
    expect(sent.inFlight).toBe(2);
    sent.expireStale(100, 100); // sent at 0 + timeout 100: due now
    expect([sent.inFlight, s.expired, s.lost]).toEqual([1, 1, 1]);
    expect(sent.oldestSentAt()).toBe(50);
    sent.expireStale(150, 100);
    expect(sent.oldestSentAt()).toBe(Infinity);
  });

  test('only a larger acknowledged seq raises the largest (an RTT sample)', () => {
    const sent = new SentPackets(4, 3, stats());
    expect(sent.raiseLargestAcked(5)).toBe(true);
    expect(sent.raiseLargestAcked(5)).toBe(false);
    expect(sent.raiseLargestAcked(4)).toBe(false);
    expect(sent.raiseLargestAcked(6)).toBe(true);
  });

  test('the loss rate has a prior of 20 delivered packets', () => {
    const sent = new SentPackets(4, 0, stats());
    expect(sent.lossRate()).toBe(0);
    sent.onSent(0, 0);
    sent.onSent(1, 0);
    sent.retireAcknowledged(1, 0, 0, 100); // 1 delivered; 0 lost (threshold 0)
    expect(sent.lossRate()).toBeCloseTo(1 / 22, 12);
  });

  test('a rewind forgets a unit’s deliveries', () => {
    const sent = new SentPackets(4, 3, stats());
    sent.onSent(1, 0);
    sent.retireAcknowledged(0, 0, 0, 100);
    expect(sent.delivered[1]).toBe(1);
    sent.forgetDelivered(1);
    expect(sent.delivered[1]).toBe(0);
  });
});

describe('SlotOwnership', () => {
  const owners = (o: SlotOwnership, unit: number, slots = 64) =>
    Array.from({ length: slots }, (_, s) => o.ownerOf(unit, s));

  test('a begun unit keeps the owners it began under when the REQUEST carried weights', () => {
    const o = new SlotOwnership(4, 2, Uint8Array.from([1, 1]));
    const before = owners(o, 0);
    o.pin(0);
    o.repartition(Uint8Array.from([1, 7]));
    expect(owners(o, 0)).toEqual(before);
    expect(owners(o, 1)).not.toEqual(before); // not begun: the new partition
    expect(o.partition.share(1)).toBeCloseTo(7 / 8, 6);
  });

  test('without the REQUEST’s weights, begun units follow the first measured weights', () => {
    const o = new SlotOwnership(4, 2, undefined);
    o.pin(0);
    o.repartition(Uint8Array.from([1, 7]));
    expect(owners(o, 0)).toEqual(owners(o, 1));
  });

  test('a source dropping to no share unpins every unit', () => {
    const o = new SlotOwnership(4, 2, Uint8Array.from([1, 1]));
    o.pin(0);
    o.repartition(Uint8Array.from([0, 1]));
    expect(new Set(owners(o, 0))).toEqual(new Set([1]));
  });

  test('past 64 partitions every pin is dropped', () => {
    const o = new SlotOwnership(4, 2, Uint8Array.from([1, 1]));
    o.pin(0);
    const pinned = owners(o, 0);
    // 63 new partitions keep it (64 with the first), the next drops every pin.
    for (let i = 0; i < 63; i++) o.repartition(Uint8Array.from([2 + (i % 2), 1]));
    expect(owners(o, 0)).toEqual(pinned);
    o.repartition(Uint8Array.from([1, 9]));
    expect(owners(o, 0)).toEqual(owners(o, 1));
  });

  test('repeated weights keep the current partition', () => {
    const o = new SlotOwnership(4, 2, Uint8Array.from([1, 3]));
    const partition = o.partition;
    o.repartition(Uint8Array.from([1, 3]));
    expect(o.partition).toBe(partition);
  });
});

describe('ClientProgress', () => {
  function parts(mode: Mode, objectLength: number, windowUnits: number, completeBelow = 0) {
    const layout = new Layout(mode, objectLength, 100, 4);
    const owners = new SlotOwnership(layout.unitCount, 2, Uint8Array.from([1, 1]));
    const sent = new SentPackets(layout.unitCount, 3, { lost: 0, expired: 0 });
    const progress = new ClientProgress(layout, windowUnits, owners, sent, completeBelow, 5);
    return { layout, owners, sent, progress };
  }

  test('the window starts at the units a resuming client lacks', () => {
    const { progress } = parts('uncoded', 1000, 4, 3);
    expect([progress.wMin, progress.windowEnd]).toEqual([3, 7]);
    expect(Array.from(progress.ranks)).toEqual([1, 1, 1, 0, 0, 0, 0, 0, 0, 0]);
    expect(Array.from(progress.enteredAt)).toEqual([0, 0, 0, 5, 5, 5, 5, 0, 0, 0]);
  });

  test('uncoded: the bitmap raises ranks, wMin slides, new window units enter now', () => {
    const { progress } = parts('uncoded', 1000, 4);
    progress.apply(feedback('uncoded', 0, [1, 1, 0, 1]), false, 20);
    expect([progress.wMin, progress.windowEnd]).toEqual([2, 6]);
    expect(progress.ranks[3]).toBe(1);
    expect(Array.from(progress.enteredAt.subarray(0, 7))).toEqual([5, 5, 5, 5, 20, 20, 0]);
  });

  test('units reported begun are pinned to the partition they began under', () => {
    const { progress, owners } = parts('rlnc', 4000, 4);
    const before = Array.from({ length: 8 }, (_, s) => owners.ownerOf(1, 4 + s));
    progress.apply(feedback('rlnc', 0, [0, 2]), false, 20);
    owners.repartition(Uint8Array.from([9, 1]));
    expect(Array.from({ length: 8 }, (_, s) => owners.ownerOf(1, 4 + s))).toEqual(before);
  });

  test('rlnc ranks are capped at the unit size; fountain reports what is missing', () => {
    const rlnc = parts('rlnc', 4000, 4).progress;
    rlnc.apply(feedback('rlnc', 0, [9, 3]), false, 20);
    expect([rlnc.wMin, rlnc.ranks[0], rlnc.ranks[1]]).toEqual([1, 4, 3]);
    const fountain = parts('fountain', 4000, 1).progress;
    fountain.apply(feedback('fountain', 0, [15]), false, 20);
    expect([fountain.wMin, fountain.ranks[0]]).toEqual([0, 40 - 15]);
  });

  test('only a rewind lowers wMin and ranks, and the unit’s deliveries are forgotten', () => {
    const { progress, sent } = parts('rlnc', 4000, 4);
    progress.apply(feedback('rlnc', 2, [1]), false, 20);
    sent.onSent(1, 0);
    sent.retireAcknowledged(0, 0, 0, 100);
    progress.apply(feedback('rlnc', 1, [0]), false, 30);
    expect([progress.wMin, progress.ranks[1]]).toEqual([2, 4]);
    progress.apply(feedback('rlnc', 1, [1]), true, 30);
    expect([progress.wMin, progress.ranks[1], sent.delivered[1]]).toEqual([1, 1, 0]);
  });
});

describe('PathState', () => {
  const datagram = 100 + DATA_RLNC_HEADER_BYTES; // the client measures whole datagrams

  test('the initial window until the client reports a rate; then gain x rate x min RTT + headroom', () => {
    const path = new PathState(config, 100, undefined);
    expect(path.inFlightLimit).toBe(config.initialWindowPackets);
    path.rtt.addSample(50);
    path.rtt.addSample(80);
    path.onReport(datagram * 1000, UNLIMITED_IN_FLIGHT); // 1000 datagrams/s: 50 per 50 ms
    expect(path.inFlightLimit).toBe(Math.ceil(1.5 * 50) + config.inFlightHeadroomPackets);
    path.onReport(0, 10); // no new rate: the last one stands; the client's cap bounds it
    expect(path.inFlightLimit).toBe(10);
  });

  test('a warm start stands in for the first rate and RTT, if it is usable', () => {
    const warm = new PathState(config, 100, { rateBps: datagram * 1000, minRttMs: 20 });
    expect(warm.rtt.base).toBe(20);
    expect(warm.inFlightLimit).toBe(Math.ceil(1.5 * 20) + config.inFlightHeadroomPackets);
    const unusable = new PathState(config, 100, { rateBps: 1000, minRttMs: Infinity });
    expect(unusable.inFlightLimit).toBe(config.initialWindowPackets);
    expect(unusable.rtt.base).toBe(config.initialRttMs);
  });

  test('the transfer’s BDP is this source’s rate over its share; the estimate needs an RTT sample', () => {
    const path = new PathState(config, 100, undefined);
    expect(path.transferBdpPackets(0.5)).toBe(0);
    path.onReport(datagram * 1000, UNLIMITED_IN_FLIGHT);
    expect(path.estimate()).toBeUndefined();
    path.rtt.addSample(40);
    expect(path.transferBdpPackets(0.5)).toBeCloseTo(80, 9);
    expect(path.transferBdpPackets(0)).toBe(0);
    expect(path.estimate()).toEqual({ rateBps: datagram * 1000, minRttMs: 40 });
  });
});

describe('MetaAnnouncement', () => {
  /** One check unit per generation of 4 symbols (rlnc). */
  function announcement(generations: number) {
    const r = request('rlnc');
    const object = new Uint8Array(generations * 4 * 100);
    const layout = new Layout('rlnc', object.length, 100, 4);
    const rtt = new RttEstimator(100);
    const stats = { metaSent: 0 };
    const a = new MetaAnnouncement({ request: r, object, digest: new Uint8Array(32), now: 0 }, layout, rtt, 25, stats);
    return { a, rtt, stats };
  }
  const typeOf = (d: Uint8Array | undefined) => (d ? decode(d) : undefined);

  test('META first, then its DIGESTS, then nothing until it times out', () => {
    const { a, rtt, stats } = announcement(MAX_DIGESTS_PER_MESSAGE + 1);
    const meta = typeOf(a.poll(0, 0));
    expect(meta?.ok && meta.value.type).toBe(MessageType.Meta);
    const first = typeOf(a.poll(0, 0));
    const second = typeOf(a.poll(0, 0));
    expect(first?.ok && first.value.type === MessageType.Digests && first.value.digests.length).toBe(
      MAX_DIGESTS_PER_MESSAGE * UNIT_DIGEST_BYTES,
    );
    expect(second?.ok && second.value.type === MessageType.Digests && second.value.first).toBe(MAX_DIGESTS_PER_MESSAGE);
    expect(a.poll(1, 0)).toBeUndefined();
    const due = rtt.timeout(25);
    expect(a.deadline).toBe(due);
    a.onTimeout(due - 1);
    expect(a.poll(due - 1, 0)).toBeUndefined();
    a.onTimeout(due);
    expect(a.deadline).toBe(Infinity); // pending: goes out at the next poll
    expect(a.poll(due, 0)).toBeDefined();
    expect(stats.metaSent).toBe(2);
  });

  test('a feedback saying the client has META ends it, DIGESTS left unsent included', () => {
    const { a } = announcement(MAX_DIGESTS_PER_MESSAGE + 1);
    a.poll(0, 0);
    a.onFeedback(true, -1, 1);
    expect(a.poll(1, 0)).toBeUndefined();
    expect(a.deadline).toBe(Infinity);
    a.onRequest(1000);
    expect(a.poll(1000, 0)).toBeUndefined();
  });

  test('a repeated REQUEST or data acked past META repeat it, at most once per round trip', () => {
    const { a, stats } = announcement(1);
    a.poll(0, 10); // META, then DATA from seq 10 on
    a.poll(0, 10); // its DIGESTS
    a.onRequest(50);
    expect(a.poll(50, 10)).toBeUndefined();
    a.onFeedback(false, 9, 150); // acks data sent before META: no word on it yet
    expect(a.poll(150, 10)).toBeUndefined();
    a.onFeedback(false, 10, 150);
    expect(a.poll(150, 12)).toBeDefined();
    a.poll(150, 12);
    a.onRequest(200); // within a round trip of the repeat
    expect(a.poll(200, 12)).toBeUndefined();
    a.onRequest(250);
    expect(a.poll(250, 12)).toBeDefined();
    expect(stats.metaSent).toBe(3);
  });
});

describe('ResumeHold', () => {
  test('holds DATA until released or until its deadline passes', () => {
    const hold = new ResumeHold();
    expect([hold.holds(0), hold.deadline]).toEqual([false, Infinity]);
    hold.start(100);
    expect([hold.holds(99), hold.holds(100), hold.deadline]).toEqual([true, false, 100]);
    hold.onTimeout(99);
    expect(hold.holds(99)).toBe(true);
    hold.onTimeout(100);
    expect([hold.holds(0), hold.deadline]).toEqual([false, Infinity]);
    hold.start(100);
    hold.release();
    expect(hold.holds(0)).toBe(false);
  });
});

describe('DataWriter', () => {
  /** A codec that writes the key into every payload byte, and cannot use keys divisible by 5. */
  const keyCodec: Codec = {
    mode: 'fountain',
    name: 'key',
    createEncoder: () => ({
      mode: 'fountain',
      encodeInto: (_unit, key, out) => out.fill(key & 0xff),
      usableKey: (_unit, key) => key % 5 !== 0,
      free: () => undefined,
    }),
    createDecoder: () => {
      throw new Error('unused');
    },
  };

  test('writes into the host’s buffer, one view per length, and a new array when it does not fit', () => {
    const object = new Uint8Array(250).map((_, i) => i);
    const layout = new Layout('uncoded', object.length, 100, 4);
    const w = new DataWriter(uncodedCodec, object, layout, request('uncoded'), seededRandom(1));
    const own = w.write(0, 0);
    w.datagramBuffer = new Uint8Array(1500);
    const a = w.write(0, 1);
    const b = w.write(1, 2);
    expect(a).toBe(b); // same length: the same view, rewritten
    expect(a.buffer).toBe(w.datagramBuffer.buffer);
    expect(own.buffer).not.toBe(w.datagramBuffer.buffer);
    const last = decode(w.write(2, 3));
    expect(last.ok && last.value.type === MessageType.DataUncoded && Array.from(last.value.payload)).toEqual(
      Array.from(object.subarray(200)),
    );
    w.datagramBuffer = new Uint8Array(20);
    expect(w.write(0, 4).buffer).not.toBe(w.datagramBuffer.buffer);
  });

  test('fountain: source i of N uses block ids i + N k, skipping unusable ones and rounds sent before', () => {
    const layout = new Layout('fountain', 100_000, 100, 4);
    const ids = (w: DataWriter, n: number) =>
      Array.from({ length: n }, (_, seq) => {
        const d = decode(w.write(0, seq));
        return d.ok && d.value.type === MessageType.DataFountain ? d.value.blockId : -1;
      });
    const r = request('fountain', { sourceIndex: 1, sourceCount: 3 });
    expect(ids(new DataWriter(keyCodec, new Uint8Array(100_000), layout, r, seededRandom(1)), 4)).toEqual([
      1, 4, 7, 13,
    ]);
    const resumed = new DataWriter(keyCodec, new Uint8Array(100_000), layout, r, seededRandom(1));
    resumed.skipBlockRounds(2);
    expect(ids(resumed, 2)).toEqual([7, 13]);
  });
});
