/**
 * The Receiver's parts on their own: the acks of one source's data, a source's timers and
 * exclusion, the steering (weights, in-flight caps), the identity quorum and decode completion. The Receiver as a
 * whole is tested in receiver.test.ts, window.test.ts and integrity.test.ts.
 */
import { createHash } from 'node:crypto';
import {
  DEFAULT_RECEIVER_CONFIG,
  Layout,
  Mode,
  rlncCodec,
  seededRandom,
  StopReason,
  uncodedCodec,
  unitDigests,
  UNLIMITED_IN_FLIGHT,
} from '../src/internal';
import { AckTracker } from '../src/receiver/ack-tracker';
import { Identity } from '../src/receiver/agreement';
import { Completion } from '../src/receiver/completion';
import { IdentityQuorum } from '../src/receiver/quorum';
import { Source } from '../src/receiver/source';
import { Steering, SteeringConfig } from '../src/receiver/steering';

const config = DEFAULT_RECEIVER_CONFIG;

/** Bit i of ackBits set = seq largestSeq - 1 - i acknowledged; the list of those seqs. */
function acked(t: AckTracker): number[] {
  const out: number[] = [];
  for (let i = 0; i < 32; i++) if (t.ackBits & (2 ** i)) out.push(t.largestSeq - 1 - i);
  return out;
}

describe('AckTracker', () => {
  test('starts with nothing received', () => {
    const t = new AckTracker();
    expect([t.largestSeq, t.ackBits]).toEqual([-1, 0]);
  });

  test('the first packet sets the largest seq and its time, with no bits', () => {
    const t = new AckTracker();
    t.record(7, 100);
    expect([t.largestSeq, t.largestSeqAt, t.ackBits]).toEqual([7, 100, 0]);
  });

  test('in order and with gaps: the bits name exactly the earlier seqs received', () => {
    const t = new AckTracker();
    for (const seq of [0, 1, 2, 5, 6, 9]) t.record(seq, seq);
    expect(t.largestSeq).toBe(9);
    expect(acked(t)).toEqual([6, 5, 2, 1, 0]);
  });

  test('a late packet within 32 sets its bit and keeps the largest seq and its time', () => {
    const t = new AckTracker();
    t.record(10, 1);
    t.record(40, 2);
    t.record(20, 3);
    expect([t.largestSeq, t.largestSeqAt]).toEqual([40, 2]);
    expect(acked(t)).toEqual([20, 10]);
  });

  test('a jump of exactly 32 keeps only the old largest (the top bit); beyond 32 nothing', () => {
    const t = new AckTracker();
    t.record(0, 0);
    t.record(32, 1);
    expect(t.ackBits).toBe(0x80000000);
    expect(acked(t)).toEqual([0]);
    t.record(65, 2);
    expect(t.ackBits).toBe(0);
  });

  test('packets older than 32 before the largest and duplicates change nothing', () => {
    const t = new AckTracker();
    t.record(50, 0);
    t.record(51, 1);
    const before = t.ackBits;
    t.record(10, 2);
    t.record(51, 3);
    t.record(18, 4); // 51 - 1 - 18 = 32: just outside
    expect([t.largestSeq, t.ackBits, t.largestSeqAt]).toEqual([51, before, 1]);
  });
});

describe('Source', () => {
  test('REQUEST retries back off by doubling up to the maximum', () => {
    const s = new Source(0, { ...config, requestRetryMs: 100, maxRequestRetryMs: 300 });
    const sentAt: number[] = [];
    for (let now = 0; now <= 1200; now += 10) if (s.takeRequest(now)) sentAt.push(now);
    expect(sentAt).toEqual([0, 100, 300, 600, 900, 1200]);
    expect(s.requested).toBe(true);
  });

  test('feedback is due after its interval, or at once after ackEveryPackets data packets', () => {
    const s = new Source(0, { ...config, feedbackIntervalMs: 20, ackEveryPackets: 3 });
    expect(s.takeFeedback(19)).toBe(false);
    expect(s.takeFeedback(20)).toBe(true);
    expect(s.feedbackDeadline).toBe(40);
    s.onData(0, 100, 21);
    s.onData(1, 100, 22);
    expect(s.takeFeedback(22)).toBe(false);
    s.onData(2, 100, 23);
    expect(s.takeFeedback(23)).toBe(true);
    expect(s.takeFeedback(24)).toBe(false);
  });

  test('data is counted and makes a connecting source active', () => {
    const s = new Source(0, config);
    expect(s.stats.state).toBe('connecting');
    s.onData(4, 1200, 5);
    expect(s.stats).toMatchObject({ state: 'active', received: 1, bytes: 1200 });
    expect([s.heard, s.lastArrivalAt, s.acks.largestSeq]).toEqual([true, 5, 4]);
  });

  test('a STOP is sent once; the reminder after completion waits a feedback interval', () => {
    const s = new Source(0, { ...config, feedbackIntervalMs: 20 });
    s.stopDue = StopReason.Complete;
    expect(s.takeStop(100)).toBe(StopReason.Complete);
    expect(s.takeStop(101)).toBe(-1);
    s.remindComplete(110);
    expect(s.stopDue).toBe(-1);
    s.remindComplete(120);
    expect(s.takeStop(120)).toBe(StopReason.Complete);
  });

  test('excluding a live source drops it and tells it to stop; the first kind is kept', () => {
    const s = new Source(0, config);
    s.metaOk = true;
    s.exclude('digests', 'bad digests');
    expect(s.stats).toMatchObject({ state: 'dropped', polluter: true, error: 'bad digests' });
    expect([s.live, s.metaOk, s.pollution, s.stopDue]).toEqual([false, false, 'digests', StopReason.BadSource]);
    s.exclude('data', 'bad data');
    expect([s.pollution, s.stats.error]).toEqual(['digests', 'bad data']);
  });

  test('excluding a source that already failed names it a polluter without a STOP', () => {
    const s = new Source(0, config);
    s.end('failed', 'channel closed');
    s.exclude('meta', 'wrong identity');
    expect(s.stats).toMatchObject({ state: 'failed', polluter: true, error: 'wrong identity' });
    expect(s.stopDue).toBe(-1);
  });
});

/** A source whose rate estimate is `bytesPerSecond` (trains of 16 packets, 1 ms apart), last heard at `until`. */
function sourceAt(bytesPerSecond: number, until = 100): Source {
  const s = new Source(0, config);
  const bytes = bytesPerSecond / 1000;
  for (let seq = 0; seq <= 16; seq++) s.onData(seq, bytes, until - 16 + seq);
  expect(s.rate.bytesPerSecond).toBeCloseTo(bytesPerSecond);
  return s;
}

// 32 levels (the paper configuration's) keep the expected weights small enough to read.
const steeringConfig: SteeringConfig = { ...config, inFlightCaps: true, weightLevels: 32 };

describe('Steering weights', () => {
  test('shares are proportional to the measured rates, quantised to weightLevels', () => {
    const steering = new Steering(steeringConfig);
    steering.onData(0);
    const weights = steering.weights([sourceAt(1e6), sourceAt(3e6)], 100);
    expect([...weights]).toEqual([8, 24]);
  });

  test('a source without an estimate yet counts as the average of the others', () => {
    const steering = new Steering(steeringConfig);
    steering.onData(0);
    const fresh = new Source(0, config);
    expect([...steering.weights([sourceAt(1e6), sourceAt(3e6), fresh], 100)]).toEqual([5, 16, 11]);
  });

  test('no source has an estimate: all equal', () => {
    const steering = new Steering(steeringConfig);
    expect([...steering.weights([new Source(0, config), new Source(0, config)], 0)]).toEqual([16, 16]);
  });

  test('silent, failed and never-started sources get no share', () => {
    const steering = new Steering(steeringConfig);
    steering.onData(0);
    const quiet = sourceAt(1e6, 100);
    const failed = sourceAt(1e6, 700);
    failed.end('failed', 'gone');
    const neverSent = new Source(0, config);
    const weights = steering.weights([sourceAt(1e6, 700), quiet, failed, neverSent], 700);
    expect([...weights]).toEqual([32, 0, 0, 0]);
  });

  test('every live source silent: all zero (equal shares)', () => {
    const steering = new Steering(steeringConfig);
    steering.onData(0);
    expect([...steering.weights([sourceAt(1e6, 100)], 1000)]).toEqual([0]);
  });

  test('small moves keep the published weights; a move beyond the hysteresis or a death republishes', () => {
    const steering = new Steering(steeringConfig);
    steering.onData(0);
    const first = steering.weights([sourceAt(1e6), sourceAt(1e6)], 100);
    expect([...first]).toEqual([16, 16]);
    expect(steering.weights([sourceAt(1.1e6), sourceAt(1e6)], 100)).toBe(first);
    expect([...steering.weights([sourceAt(3e6), sourceAt(1e6)], 100)]).toEqual([24, 8]);
    const dead = sourceAt(1e6);
    dead.end('failed', 'gone');
    expect([...steering.weights([sourceAt(3e6), dead], 100)]).toEqual([32, 0]);
  });
});

describe('Steering with known capacities (origo capacityBps)', () => {
  test('the initial weights (carried by the REQUEST) are the capacities, and are the first published', () => {
    const steering = new Steering(steeringConfig, [1e6, 3e6]);
    const initial = steering.initialWeights(2);
    expect(initial && [...initial]).toEqual([8, 24]);
    steering.onData(0);
    expect(steering.weights([new Source(0, config), new Source(0, config)], 10)).toBe(initial);
  });

  test('no initial weights when some capacity is unknown: the sources start from equal shares', () => {
    expect(new Steering(steeringConfig, [1e6, 0]).initialWeights(2)).toBeUndefined();
    expect(new Steering(steeringConfig, [1e6]).initialWeights(2)).toBeUndefined();
    expect(new Steering(steeringConfig).initialWeights(2)).toBeUndefined();
    expect(new Steering(steeringConfig, [NaN, Infinity]).initialWeights(2)).toBeUndefined();
  });

  test('no capacity counts for more than 4 times the median of the known ones', () => {
    // The claim of 1e12 B/s is cut to 4 x 1e6 (the median of 1e6, 1e6, 1e12).
    const weights = new Steering(steeringConfig, [1e6, 1e6, 1e12]).initialWeights(3);
    expect(weights && [...weights]).toEqual([5, 5, 21]);
  });

  test('a measured rate is raised towards the capacity, at most twofold, and never above it', () => {
    const steering = new Steering(steeringConfig, [4e6, 1e6]);
    steering.onData(0);
    // Source 0 measures 1e6 (it owned too few slots to show more): counted as 2e6, not 4e6.
    expect([...steering.weights([sourceAt(1e6), sourceAt(1e6)], 100)]).toEqual([21, 11]);
    // Measured above its capacity (a bunched train: the proxy enforces its limit): the capacity.
    const fast = new Steering(steeringConfig, [1e6, 1e6]);
    fast.onData(0);
    expect([...fast.weights([sourceAt(3e6), sourceAt(1e6)], 100)]).toEqual([16, 16]);
    // Without a known capacity the measurement stands.
    const unknown = new Steering(steeringConfig, [0, 1e6]);
    unknown.onData(0);
    expect([...unknown.weights([sourceAt(3e6), sourceAt(1e6)], 100)]).toEqual([24, 8]);
  });
});

describe('Steering in-flight caps', () => {
  test('unlimited when caps are off', () => {
    const steering = new Steering({ ...steeringConfig, inFlightCaps: false });
    expect(steering.inFlightCap(sourceAt(1e6), Uint8Array.of(16, 16), 0, 100)).toBe(UNLIMITED_IN_FLIGHT);
  });

  test("a source's share of what the window misses, with headroom, margin and slack", () => {
    const c = { ...steeringConfig, capHeadroom: 1.5, capLossMargin: 0.05, capSlackPackets: 2 };
    const steering = new Steering(c);
    const s = sourceAt(1e6); // 17 packets, none lost
    // share 1/4 × 1.5 headroom × 1.05 margin of 100 missing, plus 2 slack
    expect(steering.inFlightCap(s, Uint8Array.of(8, 24), 0, 100)).toBe(Math.ceil(100 * 0.375 * 1.05) + 2);
    // a share above 1/headroom is capped at the whole window
    expect(steering.inFlightCap(s, Uint8Array.of(8, 24), 1, 100)).toBe(Math.ceil(100 * 1 * 1.05) + 2);
    // all-zero weights: equal shares
    expect(steering.inFlightCap(s, Uint8Array.of(0, 0), 0, 100)).toBe(Math.ceil(100 * 0.75 * 1.05) + 2);
    // nothing missing: only the slack
    expect(steering.inFlightCap(s, Uint8Array.of(8, 24), 0, 0)).toBe(2);
  });

  test('measured loss raises the cap', () => {
    const steering = new Steering(steeringConfig);
    const lossy = new Source(0, config);
    for (let seq = 0; seq < 10; seq += 2) lossy.onData(seq, 1000, seq); // 5 of 9 received
    const loss = 1 - 5 / 9;
    expect(steering.inFlightCap(lossy, Uint8Array.of(16, 16), 0, 100)).toBe(
      Math.ceil(100 * 0.75 * (1 + loss + config.capLossMargin)) + config.capSlackPackets,
    );
  });
});

function identity(objectLength: number): Identity {
  return { objectLength, digest: new Uint8Array(32).fill(objectLength & 0xff), unitRoot: new Uint8Array(32) };
}

describe('IdentityQuorum', () => {
  const noChecks = () => 0;
  const hash = (d: Uint8Array) => d.slice(0, 32);
  const quorumOf = (sources: number, quorum = 2, waitMs = 1000) =>
    new IdentityQuorum(sources, noChecks, hash, quorum, waitMs);
  const heardSources = (n: number) =>
    Array.from({ length: n }, () => {
      const s = new Source(0, config);
      s.hear(0);
      return s;
    });

  test('agrees once the quorum reports the same identity', () => {
    const q = quorumOf(3);
    const sources = heardSources(3);
    q.onMeta(0, identity(100), 0);
    expect(q.evaluate(sources, 0)).toBe('waiting');
    q.onMeta(1, identity(100), 5);
    expect(q.evaluate(sources, 5)).toBe('agreed');
    expect([q.identity()?.objectLength, q.agrees(1), q.agrees(2)]).toEqual([100, true, false]);
    expect(q.digests()).toEqual(new Uint8Array(0));
  });

  test('votes pending hold a complete object until the last live source states, or the wait ends exactly at its deadline', () => {
    // A fractional first-META time: now - first >= wait is false at first + wait in floating
    // point (999.9999999999999), which once left a timer firing at the same instant for ever.
    const first = 61.926881945883764;
    const q = quorumOf(3);
    const sources = heardSources(3);
    q.onMeta(0, identity(100), first);
    q.onMeta(1, identity(100), first);
    expect(q.votesPending(sources, first + 10)).toBe(true);
    expect(q.holdDeadline).toBe(first + 1000);
    expect(q.votesPending(sources, q.holdDeadline)).toBe(false);
    sources[2].end('failed', 'closed');
    expect(q.votesPending(sources, first + 10)).toBe(false);
    const stated = quorumOf(3);
    stated.onMeta(0, identity(100), 0);
    stated.onMeta(1, identity(100), 0);
    stated.onMeta(2, identity(100), 0);
    expect(stated.votesPending(heardSources(3), 1)).toBe(false);
  });

  test('two sources that disagree are a conflict, whoever else may still vote', () => {
    const q = quorumOf(4);
    const sources = heardSources(4);
    q.onMeta(0, identity(100), 0);
    q.onMeta(1, identity(200), 0);
    expect(q.evaluate(sources, 0)).toBe('conflict');
  });

  test('a majority does not outvote a disagreeing source: agreeing rogues cannot drop an honest one', () => {
    const q = quorumOf(4);
    const sources = heardSources(4);
    q.onMeta(0, identity(666), 0);
    q.onMeta(1, identity(666), 0);
    q.onMeta(2, identity(666), 0);
    q.onMeta(3, identity(100), 0);
    expect(q.evaluate(sources, 0)).toBe('conflict');
  });

  test('a source that failed after its META still votes, against the others too', () => {
    const sources = heardSources(3);
    const q = quorumOf(3, 2);
    q.onMeta(0, identity(100), 0);
    q.onMeta(1, identity(100), 0);
    sources[1].end('failed', 'closed');
    expect(q.evaluate(sources, 0)).toBe('agreed');
    expect(q.identity()?.objectLength).toBe(100);
    const other = quorumOf(3, 2);
    other.onMeta(0, identity(100), 0);
    other.onMeta(1, identity(200), 0);
    sources[1].end('failed', 'closed');
    expect(other.evaluate(sources, 0)).toBe('conflict');
  });

  test("a dropped source's META does not count", () => {
    const sources = heardSources(3);
    const q = quorumOf(3, 2);
    q.onMeta(0, identity(100), 0);
    q.onMeta(1, identity(200), 0);
    q.onMeta(2, identity(200), 0);
    sources[0].end('dropped', 'polluter');
    expect(q.evaluate(sources, 0)).toBe('agreed');
    expect(q.identity()?.objectLength).toBe(200);
  });

  test('sources failing before their META never lower the bar: one left is unconfirmed', () => {
    const sources = heardSources(3);
    const q = quorumOf(3, 2);
    q.onMeta(0, identity(666), 0);
    sources[1].end('failed', 'Overloaded');
    expect(q.evaluate(sources, 0)).toBe('waiting');
    sources[2].end('failed', 'Overloaded');
    expect(q.evaluate(sources, 0)).toBe('unconfirmed');
    expect(q.identity()).toBeUndefined();
  });

  test('silent sources are written off after the wait: agreed when the others meet the quorum', () => {
    const q = quorumOf(3, 2, 1000);
    const sources = Array.from({ length: 3 }, () => new Source(0, config));
    sources[0].hear(0);
    sources[1].hear(0);
    q.onMeta(0, identity(100), 50);
    expect(q.waiting).toBe(true);
    expect(q.nextDeadline()).toBe(1050);
    expect(q.evaluate(sources, 1049)).toBe('waiting');
    q.onMeta(1, identity(100), 1049);
    expect(q.evaluate(sources, 1049)).toBe('agreed');
    expect(q.waiting).toBe(false);
  });

  test('one answering source and the others silent past the wait is unconfirmed, not trusted', () => {
    const q = quorumOf(3, 2, 1000);
    const sources = Array.from({ length: 3 }, () => new Source(0, config));
    sources[0].hear(0);
    q.onMeta(0, identity(100), 50);
    expect(q.evaluate(sources, 1049)).toBe('waiting');
    q.noteTimedCheck(1050);
    expect(q.nextDeadline()).toBe(null);
    expect(q.evaluate(sources, 1050)).toBe('unconfirmed');
  });

  test('no deadline before the first META', () => {
    const q = quorumOf(2);
    expect([q.waiting, q.nextDeadline()]).toEqual([false, null]);
  });
});

function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

describe('Completion', () => {
  const symbolSize = 64;
  const generationSize = 4;
  const object = Uint8Array.from({ length: 10 * symbolSize - 5 }, (_, i) => (i * 7 + 3) & 0xff);
  const trueIdentity = { objectLength: object.length, digest: sha256(object), unitRoot: new Uint8Array(32) };

  function started(mode: Mode, window = 8): { completion: Completion; layout: Layout } {
    const completion = new Completion({
      mode,
      symbolSize,
      generationSize,
      window,
      codec: mode === 'uncoded' ? uncodedCodec : rlncCodec,
      sha256,
      maxPacketLogBytes: 1 << 20,
    });
    const layout = new Layout(mode, object.length, symbolSize, generationSize);
    completion.start(object.length, unitDigests(object, layout, sha256));
    return { completion, layout };
  }

  const packet = (layout: Layout, unit: number) =>
    object.subarray(unit * symbolSize, unit * symbolSize + layout.payloadLength(unit));

  test('before start: nothing to report, progress unknown', () => {
    const completion = new Completion({
      mode: 'uncoded',
      symbolSize,
      generationSize,
      window: 8,
      codec: uncodedCodec,
      sha256,
      maxPacketLogBytes: 1 << 20,
    });
    expect([completion.started, completion.windowReport(), completion.describeProgress()]).toEqual([
      false,
      undefined,
      '0 of ? DoF',
    ]);
  });

  test('uncoded: the bitmap names the units received; the window slides to the lowest missing', () => {
    const { completion, layout } = started('uncoded');
    for (const u of [0, 1, 3]) expect(completion.add(0, u, 0, packet(layout, u)).outcome.result).toBe('innovative');
    completion.slideWindow(false);
    expect(completion.wMin).toBe(2);
    expect(completion.windowReport()).toEqual({
      mode: 'uncoded',
      bitmap: Uint8Array.of(0b10),
      bitCount: 8,
      missingDof: 7,
    });
    // window 8 plus two check units of slack above wMin
    expect([completion.beyondWindow(2 + 8 + 7), completion.beyondWindow(2 + 8 + 8)]).toEqual([false, true]);
  });

  test('the window report never runs past the last unit', () => {
    const { completion, layout } = started('uncoded');
    for (let u = 0; u < 6; u++) completion.add(0, u, 0, packet(layout, u));
    completion.slideWindow(false);
    expect(completion.windowReport()).toMatchObject({ bitCount: 4, missingDof: 4 });
  });

  test('rlnc: ranks per generation and the DoF still missing', () => {
    const { completion, layout } = started('rlnc', 8);
    const encoder = rlncCodec.createEncoder(object, layout);
    const random = seededRandom(5);
    const payload = new Uint8Array(symbolSize);
    for (let i = 0; i < 2; i++) {
      const seed = random();
      encoder.encodeInto(1, seed, payload);
      completion.add(0, 1, seed, payload.slice());
    }
    expect(completion.windowReport()).toEqual({ mode: 'rlnc', ranks: Uint8Array.of(0, 2), missingDof: 6 });
    expect(completion.dof).toBe(2);
  });

  test('a complete object verifies against the agreed identity and can be taken, once', () => {
    const { completion, layout } = started('uncoded');
    for (let u = 0; u < layout.unitCount; u++) completion.add(1, u, 0, packet(layout, u));
    expect(completion.allUnitsComplete).toBe(true);
    expect(completion.verify({ ...trueIdentity, objectLength: object.length + 1 })).toMatchObject({
      code: 'length-mismatch',
    });
    expect(completion.verify({ ...trueIdentity, digest: new Uint8Array(32) })).toMatchObject({
      code: 'digest-mismatch',
    });
    expect(completion.verify(trueIdentity)).toBeUndefined();
    expect(completion.takeObject()).toEqual(object);
    // Handed over: nothing here holds the object any more (a lingering transfer keeps no copy).
    expect(completion.takeObject()).toBeUndefined();
  });

  test('an object that is one coded check unit is hashed once: its unit check gives the object check its SHA-256', () => {
    const small = object.subarray(0, 3 * symbolSize - 7); // one rlnc generation: one check unit
    const layout = new Layout('rlnc', small.length, symbolSize, generationSize);
    const hashedWhole: number[] = [];
    const counting = (data: Uint8Array) => {
      if (data.length === small.length) hashedWhole.push(data.length);
      return sha256(data);
    };
    const completion = new Completion({
      mode: 'rlnc',
      symbolSize,
      generationSize,
      window: 8,
      codec: rlncCodec,
      sha256: counting,
      maxPacketLogBytes: 1 << 20,
    });
    completion.start(small.length, unitDigests(small, layout, sha256));
    const encoder = rlncCodec.createEncoder(small, layout);
    const random = seededRandom(9);
    const payload = new Uint8Array(symbolSize);
    while (!completion.allUnitsComplete) {
      const seed = random();
      encoder.encodeInto(0, seed, payload);
      completion.add(0, 0, seed, payload.slice());
    }
    const identity = { objectLength: small.length, digest: sha256(small), unitRoot: new Uint8Array(32) };
    // The kept digest is still compared: an identity naming other bytes fails.
    expect(completion.verify({ ...identity, digest: new Uint8Array(32) })).toMatchObject({ code: 'digest-mismatch' });
    expect(completion.verify(identity)).toBeUndefined();
    expect(completion.takeObject()).toEqual(small);
    expect(hashedWhole).toHaveLength(1);
  });

  test('a check unit that fails names its only contributor and rewinds; excluding it rewinds too', () => {
    const { completion, layout } = started('uncoded');
    expect(completion.rewound).toBe(false);
    for (let u = 0; u < generationSize - 1; u++) completion.add(2, u, 0, packet(layout, u));
    const bad = packet(layout, generationSize - 1).slice();
    bad[0] ^= 1;
    const { outcome, checkFailed } = completion.add(2, generationSize - 1, 0, bad);
    expect([outcome.polluters, checkFailed, completion.rewound]).toEqual([[2], true, true]);
    completion.slideWindow(true);
    expect(completion.wMin).toBe(0);

    const other = started('uncoded').completion;
    other.exclude(0);
    expect(other.rewound).toBe(true);
  });
});
