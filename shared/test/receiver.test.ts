/**
 * The MUTP Receiver driven by hand-built source datagrams: what it sends (decoded from
 * pollDatagram), its rate estimation, completion and verification, and every way it fails.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import {
  decode,
  DEFAULT_RECEIVER_CONFIG,
  encodeDataRlnc,
  encodeDataUncoded,
  encodeError,
  encodeDigests,
  encodeMeta,
  MAX_DIGESTS_PER_MESSAGE,
  UNIT_DIGEST_BYTES,
  unitDigests,
  unitRoot,
  ErrorCode,
  FeedbackRlncMessage,
  FeedbackUncodedMessage,
  Layout,
  MAX_URL_BYTES,
  Message,
  MessageType,
  Mode,
  NO_SEQ,
  RateEstimator,
  Receiver,
  ReceiverConfig,
  RequestMessage,
  rlncCodec,
  SchedulerName,
  seededRandom,
  StopReason,
  uncodedCodec,
  UNLIMITED_IN_FLIGHT,
} from '../src/internal';

const TRANSFER = 0xcafe0001;

function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

function makeObject(length: number, seed = 1): Uint8Array {
  const random = seededRandom(seed);
  return Uint8Array.from({ length }, () => random() & 0xff);
}

interface Setup {
  mode?: Mode;
  scheduler?: SchedulerName;
  sourceCount?: number;
  window?: number;
  generationSize?: number;
  symbolSize?: number;
  config?: Partial<ReceiverConfig>;
  now?: number;
  url?: string;
  sourceNames?: string[];
}

/** A receiver and helpers that play the sources. */
class Harness {
  readonly receiver: Receiver;
  readonly mode: Mode;
  readonly symbolSize: number;
  readonly generationSize: number;
  readonly seqs: number[];
  private readonly random = seededRandom(99);

  constructor(
    readonly object: Uint8Array,
    s: Setup = {},
  ) {
    this.mode = s.mode ?? 'uncoded';
    this.symbolSize = s.symbolSize ?? 64;
    this.generationSize = s.generationSize ?? 4;
    this.receiver = new Receiver({
      transferId: TRANSFER,
      url: s.url ?? 'https://origin.example/object',
      mode: this.mode,
      scheduler: s.scheduler,
      sourceCount: s.sourceCount ?? 1,
      window: s.window ?? 16,
      generationSize: this.generationSize,
      symbolSize: this.symbolSize,
      codec: this.mode === 'uncoded' ? uncodedCodec : rlncCodec,
      now: s.now ?? 0,
      // One META is enough here: these tests are about everything else (quorum: wasm/test/integrity.test.ts).
      config: { quorum: 1, ...s.config },
      ...(s.sourceNames ? { sourceNames: s.sourceNames } : {}),
    });
    this.seqs = new Array<number>(s.sourceCount ?? 1).fill(0);
  }

  get layout(): Layout {
    return new Layout(this.mode, this.object.length, this.symbolSize, this.generationSize);
  }

  /** META (with the object's true unit root unless overridden) and the DIGESTS that go with it. */
  meta(source: number, now: number, over: Partial<Parameters<typeof encodeMeta>[0]> = {}): void {
    const digests = unitDigests(this.object, this.layout, sha256);
    this.receiver.handleDatagram(
      source,
      encodeMeta({
        transferId: TRANSFER,
        objectLength: this.object.length,
        symbolSize: this.symbolSize,
        generationSize: this.generationSize,
        mode: this.mode,
        digest: sha256(this.object),
        unitRoot: unitRoot(digests, sha256),
        ...over,
      }),
      now,
    );
    sendDigests(this.receiver, source, digests, now);
  }

  /** One data datagram for `unit` (rlnc: a random combination), with the source's next seq. */
  dataBytes(source: number, unit: number, seq = this.seqs[source]++): Uint8Array {
    const layout = this.layout;
    if (this.mode === 'uncoded') {
      const start = unit * this.symbolSize;
      return encodeDataUncoded({
        transferId: TRANSFER,
        seq,
        index: unit,
        payload: this.object.subarray(start, start + layout.payloadLength(unit)),
      });
    }
    const seed = this.random();
    const payload = new Uint8Array(this.symbolSize);
    rlncCodec.createEncoder(this.object, layout).encodeInto(unit, seed, payload);
    return encodeDataRlnc({ transferId: TRANSFER, seq, generation: unit, seed, payload });
  }

  data(source: number, unit: number, now: number, seq?: number): void {
    this.receiver.handleDatagram(source, this.dataBytes(source, unit, seq), now);
  }

  /** Delivers every unit (rlnc: packets until each generation is complete) from one source. */
  deliverAll(source: number, now: number): void {
    const layout = this.layout;
    for (let u = 0; u < layout.unitCount && this.receiver.status === 'active'; u++) {
      // Assumes nothing of unit u arrived before.
      const target = this.receiver.stats().dof + layout.unitSize(u);
      for (let i = 0; i < layout.unitSize(u) + 40; i++) {
        if (this.receiver.status !== 'active' || this.receiver.stats().dof >= target) break;
        this.data(source, u, now);
      }
    }
  }

  /** Everything the receiver wants to send now, decoded. */
  poll(now: number): { source: number; m: Message }[] {
    const out: { source: number; m: Message }[] = [];
    for (let i = 0; i < 1000; i++) {
      const d = this.receiver.pollDatagram(now);
      if (!d) return out;
      const decoded = decode(d.bytes);
      if (!decoded.ok) throw new Error(`receiver sent an undecodable datagram: ${decoded.error.message}`);
      if (decoded.value.transferId !== TRANSFER) throw new Error('receiver sent a foreign transferId');
      out.push({ source: d.source, m: decoded.value });
    }
    throw new Error('receiver never ran dry');
  }

  /**
   * Advances to each deadline up to `until`, handling it and polling at it; returns everything
   * sent. (A deadline may lie in the past when something is already due: it is handled at once.)
   */
  runUntil(until: number, from: number): { at: number; source: number; m: Message }[] {
    const out: { at: number; source: number; m: Message }[] = [];
    let now = from;
    for (let i = 0; i < 100_000; i++) {
      const deadline = this.receiver.nextDeadline();
      if (deadline === null || deadline > until) return out;
      now = Math.max(now, deadline);
      this.receiver.handleTimeout(now);
      for (const x of this.poll(now)) out.push({ at: now, ...x });
      const next = this.receiver.nextDeadline();
      if (next !== null && !(next > now))
        throw new Error(`after handleTimeout(${now}) and polling, nextDeadline() is ${next}`);
    }
    throw new Error('too many deadlines');
  }

  lastFeedback(now: number, source = 0): FeedbackUncodedMessage | FeedbackRlncMessage {
    const fb = this.poll(now)
      .filter((x) => x.source === source)
      .map((x) => x.m)
      .filter((m) => m.type === MessageType.FeedbackUncoded || m.type === MessageType.FeedbackRlnc);
    if (fb.length === 0) throw new Error(`no feedback to source ${source} at ${now}`);
    return fb[fb.length - 1] as FeedbackUncodedMessage | FeedbackRlncMessage;
  }
}

function sendDigests(receiver: Receiver, source: number, digests: Uint8Array, now: number): void {
  const step = MAX_DIGESTS_PER_MESSAGE * UNIT_DIGEST_BYTES;
  for (let at = 0; at < digests.length; at += step)
    receiver.handleDatagram(
      source,
      encodeDigests({ transferId: TRANSFER, first: at / UNIT_DIGEST_BYTES, digests: digests.subarray(at, at + step) }),
      now,
    );
}

const types = (msgs: { source: number; m: Message }[]) => msgs.map((x) => [x.source, x.m.type]);

function bitsOf(fb: FeedbackUncodedMessage): number[] {
  const out: number[] = [];
  for (let i = 0; i < fb.bitCount; i++) if (fb.bitmap[i >> 3] & (1 << (i & 7))) out.push(fb.wMin + i);
  return out;
}

// ------------------------------------------------------------------ construction

describe('construction', () => {
  const base = {
    transferId: 1,
    url: 'u',
    mode: 'uncoded' as Mode,
    sourceCount: 2,
    window: 16,
    generationSize: 4,
    symbolSize: 64,
    codec: uncodedCodec,
    now: 0,
  };

  test('rejects bad source counts, unsupported schedulers and a codec of the other mode', () => {
    expect(() => new Receiver({ ...base, sourceCount: 0 })).toThrow(RangeError);
    expect(() => new Receiver({ ...base, sourceCount: 33 })).toThrow(RangeError);
    expect(() => new Receiver({ ...base, sourceCount: 1.5 })).toThrow(RangeError);
    expect(() => new Receiver({ ...base, scheduler: 'rarest' })).toThrow(RangeError);
    expect(() => new Receiver({ ...base, mode: 'rlnc', scheduler: 'random', codec: rlncCodec })).toThrow(RangeError);
    expect(() => new Receiver({ ...base, codec: rlncCodec })).toThrow(RangeError);
    expect(() => new Receiver({ ...base, sourceCount: 32 })).not.toThrow();
  });
});

// ------------------------------------------------------------------ REQUEST

describe('REQUEST', () => {
  test('goes first to every source, describing the transfer', () => {
    const h = new Harness(makeObject(1000), { sourceCount: 3, window: 40, symbolSize: 100, generationSize: 5 });
    const sent = h.poll(0);
    expect(types(sent)).toEqual([
      [0, MessageType.Request],
      [1, MessageType.Request],
      [2, MessageType.Request],
    ]);
    sent.forEach(({ source, m }) => {
      expect(m).toEqual<RequestMessage>({
        type: MessageType.Request,
        transferId: TRANSFER,
        mode: 'uncoded',
        scheduler: 'partitioned',
        sourceIndex: source,
        sourceCount: 3,
        window: 40,
        generationSize: 5,
        symbolSize: 100,
        url: 'https://origin.example/object',
      });
    });
    expect(h.poll(0)).toEqual([]);
    expect(h.receiver.stats().requestsSent).toBe(3);
  });

  test('is retried with exponential backoff (200 ms doubling, at most 2 s) until the source is heard', () => {
    const h = new Harness(makeObject(1000), { sourceCount: 2 });
    h.poll(0);
    const sent = h.runUntil(9000, 0).filter((x) => x.m.type === MessageType.Request);
    const times = (source: number) => sent.filter((x) => x.source === source).map((x) => x.at);
    expect(times(0)).toEqual([200, 600, 1400, 3000, 5000, 7000, 9000]);
    expect(times(1)).toEqual(times(0));
  });

  test('stops for a source once it is heard; the others keep being asked', () => {
    const h = new Harness(makeObject(1000), { sourceCount: 2 });
    h.poll(0);
    h.meta(0, 150);
    // Until 1150: silent for resumeAfterMs (1 s) after its META, it would be asked again (below).
    const sent = h.runUntil(1140, 150);
    expect(sent.filter((x) => x.source === 0 && x.m.type === MessageType.Request)).toEqual([]);
    expect(sent.filter((x) => x.source === 0 && x.m.type === MessageType.FeedbackUncoded).length).toBeGreaterThan(10);
    // Source 0 answered in 150 ms: source 1 is asked again every 2 x 150 ms, doubling, not 400 ms after its first retry.
    expect(sent.filter((x) => x.source === 1 && x.m.type === MessageType.Request).map((x) => x.at)).toEqual([
      200, 500, 1100,
    ]);
  });

  test('resume: a source silent for resumeAfterMs is asked again, backing off, until it is heard', () => {
    const h = new Harness(makeObject(4000), { sourceCount: 1 });
    h.poll(0);
    h.meta(0, 10);
    h.data(0, 0, 20);
    const sent = h.runUntil(5000, 20);
    const requests = sent.filter((x) => x.m.type === MessageType.Request).map((x) => x.at);
    // Heard last at 20: asked again at 1020, then 200 ms doubling to at most 2 s.
    expect(requests).toEqual([1020, 1220, 1620, 2420, 4020]);
    expect(h.receiver.stats().sources[0].state).toBe('active');
    // Data again: no more REQUESTs while it keeps sending.
    h.data(0, 1, 5000);
    const after = h.runUntil(5900, 5000).filter((x) => x.m.type === MessageType.Request);
    expect(after).toEqual([]);
  });

  test('resume: a sender that started the transfer again is acked in its new numbering; decoded data stays', () => {
    const h = new Harness(makeObject(4000), { sourceCount: 1 });
    h.poll(0);
    h.meta(0, 10);
    for (let u = 0; u < 20; u++) h.data(0, u, 20, 1000 + u);
    const dofBefore = h.receiver.stats().dof;
    expect(dofBefore).toBe(20);
    // Disconnected: asked again after 1 s of silence; the sender had dropped the transfer, so its
    // answer is a new META and data from seq 0.
    h.runUntil(1100, 20);
    h.meta(0, 1100);
    h.data(0, 20, 1110, 0);
    h.data(0, 21, 1111, 1);
    const fb = h.poll(1200).find((x) => x.m.type === MessageType.FeedbackUncoded)!.m as FeedbackUncodedMessage;
    expect(fb.largestSeq).toBe(1);
    expect(h.receiver.stats().dof).toBe(dofBefore + 2);

    // Its META lost: data from seq 0 far below the old numbering restarts the acks too.
    const g = new Harness(makeObject(4000), { sourceCount: 1 });
    g.poll(0);
    g.meta(0, 10);
    for (let u = 0; u < 20; u++) g.data(0, u, 20, 5000 + u);
    g.runUntil(1100, 20);
    g.data(0, 20, 1110, 0);
    const fb2 = g.poll(1200).find((x) => x.m.type === MessageType.FeedbackUncoded)!.m as FeedbackUncodedMessage;
    expect(fb2.largestSeq).toBe(0);
  });

  test('resume: the REQUEST asked again says which units are complete; a URL that leaves no room goes without', () => {
    const longUrl = 'https://origin.example/' + 'a'.repeat(MAX_URL_BYTES - 23);
    for (const [url, resume] of [
      [undefined, { fromUnit: 20, blockRound: 0 }],
      [longUrl, undefined],
    ] as const) {
      const h = new Harness(makeObject(4000), { sourceCount: 1, ...(url ? { url } : {}) });
      const [first] = h.poll(0);
      expect((first.m as RequestMessage).resume).toBeUndefined();
      h.meta(0, 10);
      for (let u = 0; u < 20; u++) h.data(0, u, 20, 1000 + u);
      const again = h.runUntil(1100, 20).filter((x) => x.m.type === MessageType.Request);
      expect(again).toHaveLength(1);
      expect((again[0].m as RequestMessage).resume).toEqual(resume);
    }
  });

  test('once one source answers fast, a silent one is asked again after twice that time (at least 20 ms)', () => {
    const h = new Harness(makeObject(1000), { sourceCount: 3 });
    h.poll(0);
    h.meta(0, 30);
    const sent = h.runUntil(400, 30).filter((x) => x.m.type === MessageType.Request);
    const times = (source: number) => sent.filter((x) => x.source === source).map((x) => x.at);
    expect(times(1)).toEqual([60, 120, 240]);
    expect(times(2)).toEqual(times(1));
    expect(h.receiver.stats().sources[0].answerMs).toBe(30);
    expect(h.receiver.stats().sources[1].answerMs).toBeUndefined();

    const loopback = new Harness(makeObject(1000), { sourceCount: 2 });
    loopback.poll(0);
    loopback.meta(0, 1);
    const again = loopback.runUntil(100, 1).filter((x) => x.m.type === MessageType.Request && x.source === 1);
    expect(again.map((x) => x.at)).toEqual([20, 40, 80]);
  });

  test('uses the scheduler asked for (rlnc default: partitioned)', () => {
    const rarest = new Harness(makeObject(100), { mode: 'rlnc', scheduler: 'rarest' });
    expect((rarest.poll(0)[0].m as RequestMessage).scheduler).toBe('rarest');
    const dflt = new Harness(makeObject(100), { mode: 'rlnc' });
    expect((dflt.poll(0)[0].m as RequestMessage).scheduler).toBe('partitioned');
    expect((dflt.poll(300)[0].m as RequestMessage).mode).toBe('rlnc');
  });
});

// ------------------------------------------------------------------ FEEDBACK

describe('FEEDBACK', () => {
  test('goes out at once after META with metaKnown, then every 20 ms', () => {
    const symbolSize = 64;
    const h = new Harness(makeObject(symbolSize * 20), { window: 8, symbolSize });
    h.poll(0);
    h.meta(0, 10);
    const [first] = h.poll(10);
    expect(first.m).toMatchObject({
      type: MessageType.FeedbackUncoded,
      transferId: TRANSFER,
      metaKnown: true,
      complete: false,
      largestSeq: NO_SEQ,
      ackBits: 0,
      wMin: 0,
      bitCount: 8,
      rateBps: 0,
    });
    expect(Array.from((first.m as FeedbackUncodedMessage).weights)).toHaveLength(1);
    expect(h.poll(29)).toEqual([]);
    expect(h.receiver.nextDeadline()).toBe(30);
    expect(types(h.poll(30))).toEqual([[0, MessageType.FeedbackUncoded]]);
  });

  test('before META (data arrived first) it reports metaKnown = 0 and no units', () => {
    const h = new Harness(makeObject(640), { mode: 'rlnc' });
    h.poll(0);
    h.data(0, 0, 5);
    const fb = h.lastFeedback(25) as FeedbackRlncMessage;
    expect(fb.type).toBe(MessageType.FeedbackRlnc);
    expect(fb.metaKnown).toBe(false);
    expect(fb.ranks.length).toBe(0);
    expect(fb.largestSeq).toBe(0);
    // Held until the identity is agreed (early-data.ts), not dropped.
    expect(h.receiver.stats().sources[0].beforeMeta).toBe(0);
  });

  test('goes out after every ackEveryPackets data packets, without waiting for the interval', () => {
    const every = DEFAULT_RECEIVER_CONFIG.ackEveryPackets;
    const h = new Harness(makeObject(64 * 40), { window: 32 });
    h.poll(0);
    h.meta(0, 0);
    h.poll(0);
    for (let u = 0; u < every - 1; u++) h.data(0, u, 1);
    expect(h.poll(1)).toEqual([]);
    h.data(0, every - 1, 1);
    expect(types(h.poll(1))).toEqual([[0, MessageType.FeedbackUncoded]]);
  });

  test('uncoded bitmap: wMin is the lowest missing packet, bits mark what arrived inside the window', () => {
    // g = 1: every packet is its own check unit, so wMin moves as each arrives (a larger g holds
    // wMin at the first packet of the lowest check unit not yet verified).
    const h = new Harness(makeObject(64 * 20 - 10), { window: 8, generationSize: 1 });
    h.poll(0);
    h.meta(0, 0);
    for (const u of [0, 1, 3, 5]) h.data(0, u, 1);
    const fb = h.lastFeedback(40) as FeedbackUncodedMessage;
    expect(fb.wMin).toBe(2);
    expect(fb.bitCount).toBe(8);
    expect(bitsOf(fb)).toEqual([3, 5]);
    // Near the end the count shrinks to the units left.
    for (const u of [2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 19]) h.data(0, u, 50);
    const late = h.lastFeedback(80) as FeedbackUncodedMessage;
    expect(late.wMin).toBe(16);
    expect(late.bitCount).toBe(4);
    expect(bitsOf(late)).toEqual([19]);
  });

  test('rlnc ranks: DoF per generation from wMin, over the window', () => {
    const g = 4;
    const h = new Harness(makeObject(64 * 4 * 6), { mode: 'rlnc', generationSize: g, window: 16 });
    h.poll(0);
    h.meta(0, 0);
    h.poll(0);
    let seq = 0;
    const add = (gen: number, n: number) => {
      for (let i = 0; i < n; i++) h.data(0, gen, 1, seq++);
    };
    add(0, 4);
    add(1, 2);
    add(3, 1);
    expect(h.receiver.stats().dof).toBe(7);
    const fb = h.lastFeedback(1) as FeedbackRlncMessage; // generation 0 completed: feedback at once
    expect(fb.wMin).toBe(1);
    expect(Array.from(fb.ranks)).toEqual([2, 0, 1, 0]);
  });

  test('a completed generation triggers feedback to every heard source (rlnc)', () => {
    const h = new Harness(makeObject(64 * 8), { mode: 'rlnc', generationSize: 4, sourceCount: 3 });
    h.poll(0);
    h.meta(0, 0);
    h.meta(1, 0);
    h.poll(0);
    for (let i = 0; i < 3; i++) h.data(0, 0, 1);
    expect(h.poll(1)).toEqual([]);
    h.data(0, 0, 1);
    expect(types(h.poll(1))).toEqual([
      [0, MessageType.FeedbackRlnc],
      [1, MessageType.FeedbackRlnc],
    ]);
  });

  test('largestSeq and ackBits describe exactly which of the last 32 seqs arrived (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 120 }), { minLength: 1, maxLength: 80 }),
        fc.integer({ min: 0, max: 19 }),
        (arrivals, holdMs) => {
          const h = new Harness(makeObject(64 * 200), { window: 64 });
          h.poll(0);
          h.meta(0, 0);
          h.poll(0);
          let now = 0;
          let largestAt = 0;
          let largest = -1;
          for (const seq of arrivals) {
            now += 0.5;
            h.data(0, seq % 200, now, seq);
            if (seq > largest) {
              largest = seq;
              largestAt = now;
            }
          }
          now += holdMs + 20; // past the periodic interval
          const fb = h.lastFeedback(now);
          const got = new Set(arrivals);
          let bits = 0;
          for (let i = 0; i < 32; i++) if (got.has(largest - 1 - i)) bits |= 1 << i;
          expect(fb.largestSeq).toBe(largest);
          expect((fb.ackBits >>> 0).toString(2)).toBe((bits >>> 0).toString(2));
          expect(fb.ackDelay).toBe(Math.round((now - largestAt) * 10));
        },
      ),
      { seed: 42, numRuns: 200 },
    );
  });
});

// ------------------------------------------------------------------ rates, weights, caps

/** Data from several sources at known rates, interleaved by arrival time. */
function deliverAtRates(h: Harness, ratesBps: number[], packets: number, from: number): number {
  const events: { at: number; source: number; bytes: Uint8Array }[] = [];
  ratesBps.forEach((rate, source) => {
    let at = from;
    for (let i = 0; i < packets; i++) {
      const bytes = h.dataBytes(source, i % h.layout.unitCount);
      events.push({ at, source, bytes });
      at += (bytes.length / rate) * 1000;
    }
  });
  events.sort((a, b) => a.at - b.at || a.source - b.source);
  for (const e of events) h.receiver.handleDatagram(e.source, e.bytes, e.at);
  return events[events.length - 1].at;
}

describe('data that arrives before it can be used (early-data.ts)', () => {
  test('is held until a quorum agrees and then used, not dropped', () => {
    // uncoded, 4 units of 64 bytes, quorum 2: source 0 answers first and sends everything.
    const object = makeObject(256);
    const h = new Harness(object, { sourceCount: 2, config: { quorum: 2 } });
    h.poll(0);
    h.meta(0, 1);
    for (let u = 0; u < 4; u++) h.data(0, u, 2);
    expect(h.receiver.status).toBe('active');
    expect(h.receiver.stats().sources[0].useful).toBe(0);
    // The second META agrees: the held packets complete the object at once.
    h.meta(1, 5);
    expect(h.receiver.status).toBe('complete');
    expect(h.receiver.stats().sources[0]).toMatchObject({ useful: 4, beforeMeta: 0 });
    expect(Buffer.from(h.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
  });

  test("data that came before the source's own META is used once that META matches", () => {
    const object = makeObject(256);
    const h = new Harness(object, { sourceCount: 2, config: { quorum: 1 } });
    h.poll(0);
    h.meta(0, 1);
    h.data(1, 0, 2); // unordered channel: source 1's data overtook its META
    h.data(1, 1, 2);
    expect(h.receiver.stats().sources[1].useful).toBe(0);
    h.meta(1, 3);
    expect(h.receiver.stats().sources[1]).toMatchObject({ useful: 2, beforeMeta: 0 });
  });

  test('a window of packets is held per source; beyond, and from a source excluded, they are dropped and counted', () => {
    const object = makeObject(64 * 40);
    const h = new Harness(object, { sourceCount: 3, window: 8, config: { quorum: 2 } });
    h.poll(0);
    h.meta(0, 1);
    for (let i = 0; i < 12; i++) h.data(0, i % 8, 2);
    expect(h.receiver.stats().sources[0].beforeMeta).toBe(4);
    // Source 1 answers with another layout than asked for: it is excluded and what it sent
    // meanwhile is never used.
    for (let i = 0; i < 3; i++) h.data(1, i, 2);
    h.meta(1, 3, { symbolSize: 65 });
    h.meta(2, 4);
    expect(h.receiver.stats().sources[1]).toMatchObject({ useful: 0, beforeMeta: 3, polluter: true });
    expect(h.receiver.stats().sources[0].useful).toBe(8);
  });
});

describe('rates, weights and in-flight caps', () => {
  test('the feedback reports each source rate and weights proportional to them', () => {
    // Unit count large enough that nothing completes; equal datagram sizes.
    const h = new Harness(makeObject(64 * 2000), { sourceCount: 2, window: 64 });
    h.poll(0);
    h.meta(0, 0);
    h.meta(1, 0);
    h.poll(0);
    const end = deliverAtRates(h, [100_000, 300_000], 16 * 4 + 1, 1);
    const fb0 = h.lastFeedback(end + 1, 0);
    const fb1 = h.lastFeedback(end + 21, 1);
    expect(Math.abs(fb0.rateBps / 100_000 - 1)).toBeLessThan(0.01);
    expect(Math.abs(fb1.rateBps / 300_000 - 1)).toBeLessThan(0.01);
    expect(Array.from(fb1.weights)).toEqual([64, 191]); // 1:3 in 255 levels
    expect(h.receiver.stats().sources.map((s) => Math.round(s.rateBps / 1000))).toEqual([100, 300]);
  });

  test('a silent source gets weight 0; a failed one too', () => {
    const h = new Harness(makeObject(64 * 2000), { sourceCount: 3, window: 64 });
    h.poll(0);
    for (const s of [0, 1, 2]) h.meta(s, 0);
    h.poll(0);
    const end = deliverAtRates(h, [200_000, 200_000, 200_000], 40, 1);
    expect(Array.from(h.lastFeedback(end + 25, 0).weights)).toEqual([85, 85, 85]);
    // Sources 1 and 2 go on, source 0 falls silent for more than inactiveAfterMs (500 ms).
    let at = end;
    for (let i = 0; i < 400; i++) {
      at += 2;
      h.data(1, i % 100, at);
      h.data(2, i % 100, at);
    }
    expect(Array.from(h.lastFeedback(at + 25, 1).weights)).toEqual([0, 128, 128]);
    h.receiver.handleDatagram(
      2,
      encodeError({ transferId: TRANSFER, code: ErrorCode.Internal, message: 'x' }),
      at + 30,
    );
    expect(Array.from(h.lastFeedback(at + 60, 1).weights)).toEqual([0, 255, 0]);
  });

  test('inFlightCap: share of what the window misses, with loss margin and slack (partitioned)', () => {
    const c = DEFAULT_RECEIVER_CONFIG;
    const h = new Harness(makeObject(64 * 40), { sourceCount: 2, window: 16, generationSize: 1 });
    h.poll(0);
    h.meta(0, 0);
    h.meta(1, 0);
    h.poll(0);
    // Seqs 0..3 carry units 0..3; seq 1 is lost.
    for (const seq of [0, 2, 3]) h.data(0, seq, 1, seq);
    const fb = h.lastFeedback(25, 0) as FeedbackUncodedMessage;
    expect(fb.wMin).toBe(1);
    const missing = 16 - 2; // window [1, 17) holds units 2 and 3
    const total = fb.weights[0] + fb.weights[1];
    const share = fb.weights[0] / total;
    const loss = 1 - 3 / 4;
    const expected =
      Math.ceil(missing * Math.min(1, share * c.capHeadroom) * (1 + loss + c.capLossMargin)) + c.capSlackPackets;
    expect(fb.inFlightCap).toBe(expected);
    // The other source has no loss and the same share.
    const other = h.lastFeedback(45, 1);
    expect(other.inFlightCap).toBe(
      Math.ceil(missing * Math.min(1, share * c.capHeadroom) * (1 + c.capLossMargin)) + c.capSlackPackets,
    );
  });

  test('inFlightCap is unlimited before META and with the paper schedulers', () => {
    const before = new Harness(makeObject(640), { sourceCount: 1 });
    before.poll(0);
    before.data(0, 0, 1);
    expect(before.lastFeedback(25).inFlightCap).toBe(UNLIMITED_IN_FLIGHT);
    for (const [mode, scheduler] of [
      ['uncoded', 'random'],
      ['rlnc', 'rarest'],
    ] as const) {
      const h = new Harness(makeObject(640), { mode, scheduler });
      h.poll(0);
      h.meta(0, 0);
      h.data(0, 0, 1);
      expect(h.lastFeedback(25).inFlightCap).toBe(UNLIMITED_IN_FLIGHT);
    }
    const off = new Harness(makeObject(640), { config: { inFlightCaps: false } });
    off.poll(0);
    off.meta(0, 0);
    expect(off.lastFeedback(0).inFlightCap).toBe(UNLIMITED_IN_FLIGHT);
  });
});

describe('RateEstimator', () => {
  /** Feeds trains [from, to) of packets of `bytes` at `rate` B/s starting at `t`; returns the end time. */
  function feed(e: RateEstimator, seqs: number[], bytes: number, rate: number, t: number): number {
    for (const seq of seqs) {
      e.onPacket(seq, bytes, t);
      t += (bytes / rate) * 1000;
    }
    return t;
  }
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

  test('is within 1% of a known rate, and 0 until the first train has closed', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10_000, max: 50_000_000 }),
        fc.integer({ min: 30, max: 1276 }),
        fc.integer({ min: 1, max: 8 }),
        (rate, bytes, trains) => {
          const e = new RateEstimator(16, 5);
          const t = feed(e, range(0, 16 * trains), bytes, rate, 1000);
          if (trains === 1) expect(e.bytesPerSecond).toBe(0);
          else expect(Math.abs(e.bytesPerSecond / rate - 1)).toBeLessThan(0.01);
          e.onPacket(16 * trains, bytes, t); // opens the next train, closing the last one
          expect(Math.abs(e.bytesPerSecond / rate - 1)).toBeLessThan(0.01);
        },
      ),
      { seed: 42, numRuns: 200 },
    );
    const e = new RateEstimator();
    feed(e, range(0, 15), 1000, 1e6, 0);
    expect(e.bytesPerSecond).toBe(0);
  });

  test('ignores trains with fewer than half their packets', () => {
    const seven = new RateEstimator(16, 5);
    let t = feed(seven, [0, 2, 4, 6, 8, 10, 12], 1000, 1e6, 0); // 7 of 16
    feed(seven, [16], 1000, 1e6, t);
    expect(seven.bytesPerSecond).toBe(0);
    const eight = new RateEstimator(16, 5);
    t = feed(eight, [0, 2, 4, 6, 8, 10, 12, 14], 1000, 1e6, 0); // 8 of 16
    feed(eight, [16], 1000, 1e6, t);
    expect(eight.bytesPerSecond).toBeCloseTo(1e6, -2);
  });

  test('takes the median of the last 5 trains: one or two outlier trains do not move it', () => {
    const e = new RateEstimator(16, 5);
    let t = 0;
    const rates = [1e6, 1e6, 10e6, 1e6, 50e6, 1e6, 1e6];
    rates.forEach((rate, train) => {
      t = feed(e, range(16 * train, 16 * train + 16), 1000, rate, t);
    });
    feed(e, [16 * rates.length], 1000, 1e6, t);
    expect(e.bytesPerSecond).toBeCloseTo(1e6, -3);
  });

  test('a bunched train among the first two does not hold the estimate up', () => {
    // A start-up burst (or a receiver stall) delivers a train 20x faster than the path.
    for (const bunched of [0, 1]) {
      const e = new RateEstimator(16, 5);
      let t = 0;
      const seen: number[] = [];
      for (let train = 0; train < 12; train++) {
        t = feed(e, range(16 * train, 16 * train + 16), 1000, train === bunched ? 20e6 : 1e6, t);
        if (train > 0) seen.push(e.bytesPerSecond);
      }
      // Once three trains have closed, the estimate is the path's rate and stays there.
      for (const rate of seen.slice(2)) expect(rate / 1e6).toBeCloseTo(1, 2);
    }
  });

  test('follows a rise in rate once it holds for 3 of the last 5 trains', () => {
    const e = new RateEstimator(16, 5);
    let t = 0;
    const seen: number[] = [];
    [1e6, 1e6, 1e6, 2e6, 2e6, 2e6].forEach((rate, train) => {
      t = feed(e, range(16 * train, 16 * train + 16), 1000, rate, t);
      if (train > 0) seen.push(Math.round(e.bytesPerSecond / 1e5) / 10);
    });
    feed(e, [16 * 6], 1000, 1e6, t);
    seen.push(Math.round(e.bytesPerSecond / 1e5) / 10);
    // Estimates (MB/s) after trains 0..5 close: only the last sees 3 fast trains in its 5.
    expect(seen).toEqual([1, 1, 1, 1, 1, 2]);
  });

  test('stragglers of a closed train and zero-span trains are ignored', () => {
    const e = new RateEstimator(16, 5);
    e.onPacket(0, 1000, 0); // train 0: a single packet, no sample
    let t = feed(e, range(16, 32), 1000, 1e6, 10); // train 1 at 1 MB/s
    e.onPacket(5, 1000, t + 1000); // a straggler of train 0, a second later: ignored
    t += 1001;
    e.onPacket(32, 1000, t); // closes train 1
    expect(e.bytesPerSecond).toBeCloseTo(1e6, -3);
    const flat = new RateEstimator(16, 5);
    for (const seq of range(0, 16)) flat.onPacket(seq, 1000, 5);
    flat.onPacket(16, 1000, 5);
    expect(flat.bytesPerSecond).toBe(0);
  });
});

// ------------------------------------------------------------------ completion

describe('completion and verification', () => {
  test.each(['uncoded', 'rlnc'] as const)('%s: verified object, STOP Complete to every heard source', (mode) => {
    const object = makeObject(64 * 13 + 5);
    const h = new Harness(object, { mode, sourceCount: 3, generationSize: 4 });
    h.poll(0);
    h.meta(0, 1);
    h.meta(1, 2); // source 2 never answers
    h.poll(2);
    h.deliverAll(0, 10);
    // Source 2 may still state another identity: the object is held until agreementWaitMs
    // (1000 ms) after the first META (issue 31, races).
    expect(h.receiver.status).toBe('active');
    expect(h.receiver.nextDeadline()).toBeLessThanOrEqual(1001);
    h.receiver.handleTimeout(1000);
    expect(h.receiver.status).toBe('active');
    h.receiver.handleTimeout(1001);
    expect(h.receiver.status).toBe('complete');
    expect(h.receiver.error).toBeUndefined();
    expect(Buffer.from(h.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(h.receiver.objectLength).toBe(object.length);
    expect(h.receiver.stats().completedAt).toBe(1001);
    const stops = h.poll(1001);
    expect(types(stops)).toEqual([
      [0, MessageType.Stop],
      [1, MessageType.Stop],
    ]);
    for (const { m } of stops) expect(m).toMatchObject({ reason: StopReason.Complete });
    expect(h.receiver.nextDeadline()).toBeNull();
    expect(h.poll(2000)).toEqual([]);
  });

  test('a held object is released by the last identity: complete when the slow source agrees', () => {
    const object = makeObject(64 * 13 + 5);
    const h = new Harness(object, { mode: 'rlnc', sourceCount: 3, generationSize: 4 });
    h.poll(0);
    h.meta(0, 1);
    h.meta(1, 2);
    h.deliverAll(0, 10);
    expect(h.receiver.status).toBe('active');
    h.meta(2, 40);
    expect(h.receiver.status).toBe('complete');
    expect(h.receiver.stats().completedAt).toBe(40);
  });

  test('an injected sha256 is the one used for verification', () => {
    const object = makeObject(300);
    const calls: number[] = [];
    const receiver = new Receiver({
      transferId: TRANSFER,
      url: 'u',
      mode: 'uncoded',
      sourceCount: 1,
      window: 8,
      generationSize: 1,
      symbolSize: 100,
      codec: uncodedCodec,
      now: 0,
      sha256: (data) => {
        calls.push(data.length);
        return sha256(data);
      },
    });
    receiver.handleDatagram(
      0,
      encodeMeta({
        transferId: TRANSFER,
        objectLength: 300,
        symbolSize: 100,
        generationSize: 1,
        mode: 'uncoded',
        digest: sha256(object),
        unitRoot: unitRoot(unitDigests(object, new Layout('uncoded', 300, 100, 1), sha256), sha256),
      }),
      0,
    );
    sendDigests(receiver, 0, unitDigests(object, new Layout('uncoded', 300, 100, 1), sha256), 0);
    for (let u = 0; u < 3; u++)
      receiver.handleDatagram(
        0,
        encodeDataUncoded({ transferId: TRANSFER, seq: u, index: u, payload: object.subarray(u * 100, u * 100 + 100) }),
        1,
      );
    expect(receiver.status).toBe('complete');
    // Every digest goes through it: the unit root over 3 unit digests, each unit (uncoded: its one
    // symbol, then the list of its symbol digests), the object.
    expect(calls).toEqual([48, 100, 16, 100, 16, 100, 16, 300]);
  });

  test('an empty object completes as soon as META is accepted', () => {
    for (const mode of ['uncoded', 'rlnc'] as const) {
      const h = new Harness(new Uint8Array(0), { mode });
      h.poll(0);
      h.meta(0, 5);
      expect(h.receiver.status).toBe('complete');
      expect(h.receiver.takeObject().length).toBe(0);
      expect(types(h.poll(5))).toEqual([[0, MessageType.Stop]]);
    }
  });

  test.each([
    ['digest', (object: Uint8Array) => ({ digest: sha256(object).map((b, i) => (i === 0 ? b ^ 1 : b)) })],
    ['objectLength', (object: Uint8Array) => ({ objectLength: object.length + 1 })],
  ])('a META with another %s than the first fails the download: nobody is blamed (issue 31)', (_name, over) => {
    const object = makeObject(64 * 10);
    const h = new Harness(object, { sourceCount: 2 });
    h.poll(0);
    h.meta(0, 1);
    h.meta(1, 2, over(object));
    expect(h.receiver.status).toBe('failed');
    expect(h.receiver.error?.code).toBe('metadata-conflict');
    expect(h.receiver.polluters()).toEqual([]);
    const stops = h.poll(2).filter((x) => x.m.type === MessageType.Stop);
    expect(stops.map((x) => [x.source, (x.m as { reason: number }).reason])).toEqual([
      [0, StopReason.Cancelled],
      [1, StopReason.Cancelled],
    ]);
  });

  test.each([
    ['mode', { mode: 'rlnc' as Mode }],
    ['symbolSize', { symbolSize: 65 }],
    ['generationSize', { generationSize: 5 }],
  ])('a META with a different %s than asked for drops the source', (_name, over) => {
    const h = new Harness(makeObject(64 * 10), { sourceCount: 2 });
    h.poll(0);
    h.meta(0, 1);
    h.meta(1, 2, over);
    expect(h.receiver.stats().sources[1].state).toBe('dropped');
    expect(h.receiver.status).toBe('active');
    expect(h.poll(2).find((x) => x.source === 1)?.m).toMatchObject({
      type: MessageType.Stop,
      reason: StopReason.BadSource,
    });
  });

  test('a wrong digest reported by every source fails with digest-mismatch', () => {
    const object = makeObject(64 * 10);
    const h = new Harness(object, { sourceCount: 2 });
    h.poll(0);
    const wrong = new Uint8Array(32).fill(9);
    h.meta(0, 1, { digest: wrong });
    h.meta(1, 1, { digest: wrong });
    h.poll(1);
    h.deliverAll(0, 5);
    expect(h.receiver.status).toBe('failed');
    expect(h.receiver.error?.code).toBe('digest-mismatch');
    expect(() => h.receiver.takeObject()).toThrow();
    const stops = h.poll(5);
    expect(types(stops)).toEqual([
      [0, MessageType.Stop],
      [1, MessageType.Stop],
    ]);
    for (const { m } of stops) expect(m).toMatchObject({ reason: StopReason.Cancelled });
  });

  test('ERROR from every source fails with all-sources-failed', () => {
    const h = new Harness(makeObject(640), { sourceCount: 3 });
    h.poll(0);
    const error = (code: number) => encodeError({ transferId: TRANSFER, code, message: 'origin said no' });
    h.receiver.handleDatagram(0, error(ErrorCode.OriginNotFound), 10);
    h.receiver.handleDatagram(2, error(ErrorCode.Overloaded), 11);
    expect(h.receiver.status).toBe('active');
    expect(h.receiver.stats().sources.map((s) => s.state)).toEqual(['failed', 'connecting', 'failed']);
    // A failed source is asked no more; the other still is.
    expect(h.runUntil(700, 11).map((x) => x.source)).toEqual([1, 1]);
    h.receiver.handleDatagram(1, error(ErrorCode.OriginError), 800);
    expect(h.receiver.status).toBe('failed');
    expect(h.receiver.error?.code).toBe('all-sources-failed');
    expect(h.receiver.error?.message).toMatch(/origin said no/);
    expect(h.receiver.nextDeadline()).toBeNull();
  });

  test('the failure names each source as the caller does (the proxy), else by index', () => {
    const error = encodeError({ transferId: TRANSFER, code: ErrorCode.OriginNotFound, message: 'origin said no' });
    const named = new Harness(makeObject(640), { sourceCount: 2, sourceNames: ['edge-a', 'edge-b'] });
    named.poll(0);
    named.receiver.handleDatagram(0, error, 10);
    named.receiver.sourceLost(1, 'connection lost');
    expect(named.receiver.error?.message).toMatch(/\(edge-a: .*origin said no; edge-b: connection lost\)/);
    const unnamed = new Harness(makeObject(640), { sourceCount: 1 });
    unnamed.poll(0);
    unnamed.receiver.handleDatagram(0, error, 10);
    expect(unnamed.receiver.error?.message).toMatch(/\(#0: /);
  });

  test('a mix of ERROR and dropped sources also fails with all-sources-failed', () => {
    const h = new Harness(makeObject(640), { sourceCount: 2 });
    h.poll(0);
    h.meta(0, 1);
    h.meta(1, 2, { symbolSize: 128 });
    h.receiver.handleDatagram(0, encodeError({ transferId: TRANSFER, code: ErrorCode.Internal, message: '' }), 3);
    expect(h.receiver.error?.code).toBe('all-sources-failed');
  });

  test('an object over maxObjectBytes fails with object-too-large', () => {
    const h = new Harness(makeObject(1001), { sourceCount: 2, config: { maxObjectBytes: 1000 } });
    h.poll(0);
    h.meta(0, 1);
    expect(h.receiver.status).toBe('failed');
    expect(h.receiver.error?.code).toBe('object-too-large');
    // Source 1 was asked but not heard yet: it gets a STOP too.
    expect(h.poll(1)).toEqual([
      { source: 0, m: { type: MessageType.Stop, transferId: TRANSFER, reason: StopReason.Cancelled } },
      { source: 1, m: { type: MessageType.Stop, transferId: TRANSFER, reason: StopReason.Cancelled } },
    ]);
    const ok = new Harness(makeObject(1000), { config: { maxObjectBytes: 1000 } });
    ok.poll(0);
    ok.meta(0, 1);
    expect(ok.receiver.status).toBe('active');
  });

  test('no new DoF for stallTimeoutMs fails with stalled (timer restarts on progress)', () => {
    const h = new Harness(makeObject(64 * 10), { config: { stallTimeoutMs: 3000 } });
    h.poll(0);
    h.meta(0, 100);
    h.data(0, 0, 2000); // progress
    h.data(0, 0, 4000); // redundant: no progress
    h.runUntil(4999, 2000);
    expect(h.receiver.status).toBe('active');
    const last = h.runUntil(5000, 4999);
    expect(h.receiver.status).toBe('failed');
    expect(h.receiver.error?.code).toBe('stalled');
    expect(h.receiver.error?.message).toMatch(/1 of 10 DoF/);
    expect(last.map((x) => [x.at, x.source, x.m.type])).toEqual([[5000, 0, MessageType.Stop]]);
    expect(last[0].m).toMatchObject({ reason: StopReason.Cancelled });
  });

  test('a transfer that never hears from anyone stalls too', () => {
    const h = new Harness(makeObject(640), { sourceCount: 2 });
    h.poll(0);
    const sent = h.runUntil(20_000, 0);
    expect(h.receiver.status).toBe('failed');
    expect(h.receiver.error?.code).toBe('stalled');
    const requests = sent.filter((x) => x.m.type === MessageType.Request);
    expect(requests.every((x) => x.at <= DEFAULT_RECEIVER_CONFIG.stallTimeoutMs)).toBe(true);
    // Both were asked, so both are told to stop (their answers may just have been lost).
    expect(sent.slice(requests.length).map((x) => [x.source, x.m.type])).toEqual([
      [0, MessageType.Stop],
      [1, MessageType.Stop],
    ]);
  });

  test('a cancel before any META sends STOP to every source that was sent a REQUEST', () => {
    const h = new Harness(makeObject(640), { sourceCount: 3 });
    expect(types(h.poll(0))).toEqual([
      [0, MessageType.Request],
      [1, MessageType.Request],
      [2, MessageType.Request],
    ]);
    h.receiver.cancel();
    const stops = h.poll(1);
    expect(types(stops)).toEqual([
      [0, MessageType.Stop],
      [1, MessageType.Stop],
      [2, MessageType.Stop],
    ]);
    for (const { m } of stops) expect(m).toMatchObject({ transferId: TRANSFER, reason: StopReason.Cancelled });
  });

  test('a cancel before any REQUEST went out sends nothing', () => {
    const h = new Harness(makeObject(640), { sourceCount: 2 });
    h.receiver.cancel();
    expect(h.poll(0)).toEqual([]);
  });

  test('late data after completion gets STOP Complete again, at most once per 20 ms', () => {
    const h = new Harness(makeObject(64 * 4), { sourceCount: 2 });
    h.poll(0);
    h.meta(0, 1);
    h.meta(1, 1);
    h.deliverAll(0, 10);
    expect(h.receiver.status).toBe('complete');
    expect(types(h.poll(10))).toEqual([
      [0, MessageType.Stop],
      [1, MessageType.Stop],
    ]);
    h.data(1, 0, 15);
    expect(h.poll(15)).toEqual([]); // a STOP went out 5 ms ago
    h.data(1, 1, 30);
    expect(h.poll(30)).toEqual([
      { source: 1, m: { type: MessageType.Stop, transferId: TRANSFER, reason: StopReason.Complete } },
    ]);
    h.data(1, 2, 31);
    h.data(0, 2, 31);
    expect(types(h.poll(31))).toEqual([[0, MessageType.Stop]]);
    expect(h.receiver.stats().sources[1].afterComplete).toBe(3);
  });
});
