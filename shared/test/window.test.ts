/**
 * Unit tests of the MUTP Sender driven by hand-built feedback: strict moving window, monotonic
 * acknowledged state, in-transit expiry, META repetition, in-flight cap, STOP, idle timeout and
 * the deadline contract.
 */
import fc from 'fast-check';
import {
  DATA_RLNC_HEADER_BYTES,
  decode,
  encodeFeedbackRlnc,
  encodeFeedbackUncoded,
  encodeMeta,
  encodeRequest,
  encodeStop,
  Layout,
  Message,
  MessageType,
  Mode,
  NO_SEQ,
  Partition,
  RequestMessage,
  RequestResume,
  rlncCodec,
  SchedulerName,
  seededRandom,
  Sender,
  PathEstimate,
  SenderConfig,
  StopReason,
  uncodedCodec,
  UNLIMITED_IN_FLIGHT,
  unitDigests,
  unitRoot,
} from '../src/internal';

const TRANSFER = 0x1234abcd;
const DIGEST = new Uint8Array(32).fill(7);
/** Timeout before any RTT sample: max(100 + 4 * 50, 1.25 * 100) + 25 ms slack. */
const INITIAL_TIMEOUT = 325;

interface SenderSetup {
  mode?: Mode;
  scheduler?: SchedulerName;
  window?: number;
  generationSize?: number;
  symbolSize?: number;
  objectLength?: number;
  sourceIndex?: number;
  sourceCount?: number;
  config?: Partial<SenderConfig>;
  seed?: number;
  now?: number;
  warmStart?: PathEstimate;
  /** The REQUEST's initial weights. */
  weights?: number[];
  resume?: RequestResume;
}

function makeSender(o: SenderSetup = {}): Sender {
  const mode = o.mode ?? 'uncoded';
  const request: RequestMessage = {
    type: MessageType.Request,
    transferId: TRANSFER,
    mode,
    scheduler: o.scheduler ?? (mode === 'uncoded' ? 'random' : 'rarest'),
    sourceIndex: o.sourceIndex ?? 0,
    sourceCount: o.sourceCount ?? 1,
    window: o.window ?? 8,
    generationSize: o.generationSize ?? 4,
    symbolSize: o.symbolSize ?? 16,
    url: 'test://object',
    ...(o.weights ? { weights: Uint8Array.from(o.weights) } : {}),
    ...(o.resume ? { resume: o.resume } : {}),
  };
  const object = new Uint8Array(o.objectLength ?? 16 * 40);
  for (let i = 0; i < object.length; i++) object[i] = (i * 31 + 7) & 0xff;
  return new Sender({
    request,
    object,
    digest: DIGEST,
    codec: mode === 'uncoded' ? uncodedCodec : rlncCodec,
    random: seededRandom(o.seed ?? 1),
    now: o.now ?? 0,
    // No rate-based limit unless a test asks for one.
    config: { initialWindowPackets: 10_000, ...o.config },
    warmStart: o.warmStart,
  });
}

interface Feedback {
  /** The client discarded a failed check unit: lower ranks / wMin are to be taken (newest only). */
  rewind?: boolean;
  wMin?: number;
  /** uncoded: absolute unit indices the client has. */
  received?: number[];
  /** rlnc: ranks from wMin on. */
  ranks?: number[];
  count?: number;
  /** Data seqs the client received (largestSeq and ackBits are derived from them). */
  seqs?: number[];
  largestSeq?: number;
  ackBits?: number;
  ackDelay?: number;
  inFlightCap?: number;
  metaKnown?: boolean;
  complete?: boolean;
  rateBps?: number;
  weights?: number[];
  transferId?: number;
}

/** largestSeq and ackBits as the client computes them for a set of received seqs. */
function ackFor(seqs: number[]): { largestSeq: number; ackBits: number } {
  if (seqs.length === 0) return { largestSeq: NO_SEQ, ackBits: 0 };
  const largest = Math.max(...seqs);
  const set = new Set(seqs);
  let bits = 0;
  for (let i = 0; i < 32; i++) if (set.has(largest - 1 - i)) bits |= 1 << i;
  return { largestSeq: largest, ackBits: bits >>> 0 };
}

function feedback(mode: Mode, f: Feedback): Uint8Array {
  const ack = f.seqs ? ackFor(f.seqs) : { largestSeq: NO_SEQ, ackBits: 0 };
  const common = {
    transferId: f.transferId ?? TRANSFER,
    metaKnown: f.metaKnown ?? true,
    complete: f.complete ?? false,
    largestSeq: f.largestSeq ?? ack.largestSeq,
    ackDelay: f.ackDelay ?? 0,
    ackBits: f.ackBits ?? ack.ackBits,
    rateBps: f.rateBps ?? 0,
    inFlightCap: f.inFlightCap ?? UNLIMITED_IN_FLIGHT,
    rewind: f.rewind,
    weights: Uint8Array.from(f.weights ?? [1]),
    wMin: f.wMin ?? 0,
  };
  if (mode === 'uncoded') {
    const wMin = common.wMin;
    const count = f.count ?? Math.max(0, ...(f.received ?? []).map((u) => u - wMin + 1));
    const bitmap = new Uint8Array((count + 7) >> 3);
    for (const u of f.received ?? [])
      if (u >= wMin && u < wMin + count) bitmap[(u - wMin) >> 3] |= 1 << ((u - wMin) & 7);
    return encodeFeedbackUncoded({ ...common, bitmap, bitCount: count });
  }
  return encodeFeedbackRlnc({ ...common, ranks: Uint8Array.from(f.ranks ?? []) });
}

interface Sent {
  seq: number;
  unit: number;
}

function decodeOrThrow(bytes: Uint8Array): Message {
  const d = decode(bytes);
  if (!d.ok) throw new Error(`sender emitted an undecodable datagram: ${d.error.message}`);
  return d.value;
}

/** Polls until the sender has nothing more; checks the window rule on every data packet. */
function drain(sender: Sender, now: number, max = 10_000): { data: Sent[]; metas: number } {
  const data: Sent[] = [];
  let metas = 0;
  for (let i = 0; i < max; i++) {
    const bytes = sender.pollDatagram(now);
    if (!bytes) return { data, metas };
    const m = decodeOrThrow(bytes);
    if (m.type === MessageType.Meta) {
      metas++;
      continue;
    }
    if (m.type === MessageType.Digests) continue; // follows every META (wasm/test/integrity.test.ts)
    if (m.type !== MessageType.DataUncoded && m.type !== MessageType.DataRlnc)
      throw new Error(`unexpected message type ${m.type}`);
    const unit = m.type === MessageType.DataUncoded ? m.index : m.generation;
    if (unit < sender.windowStart || unit >= sender.windowEnd)
      throw new Error(`unit ${unit} sent outside the window [${sender.windowStart}, ${sender.windowEnd})`);
    data.push({ seq: m.seq, unit });
  }
  throw new Error(`sender did not run dry after ${max} datagrams`);
}

function units(sent: Sent[]): number[] {
  return sent.map((s) => s.unit).sort((a, b) => a - b);
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

// ------------------------------------------------------------------ META

describe('META', () => {
  test('is the first datagram, describes the object, and data may follow at once (after its DIGESTS)', () => {
    const sender = makeSender({ objectLength: 100, symbolSize: 32, generationSize: 3 });
    const object = new Uint8Array(100);
    for (let i = 0; i < object.length; i++) object[i] = (i * 31 + 7) & 0xff;
    const digests = unitDigests(object, new Layout('uncoded', 100, 32, 3));
    const first = decodeOrThrow(sender.pollDatagram(0)!);
    expect(first).toEqual(
      decodeOrThrow(
        encodeMeta({
          transferId: TRANSFER,
          objectLength: 100,
          symbolSize: 32,
          generationSize: 3,
          mode: 'uncoded',
          digest: DIGEST,
          unitRoot: unitRoot(digests),
        }),
      ),
    );
    expect(decodeOrThrow(sender.pollDatagram(0)!)).toEqual({
      type: MessageType.Digests,
      transferId: TRANSFER,
      first: 0,
      digests,
    });
    const second = decodeOrThrow(sender.pollDatagram(0)!);
    expect(second.type).toBe(MessageType.DataUncoded);
    expect(sender.stats.metaSent).toBe(1);
  });

  test('is repeated every timeout until a feedback says metaKnown', () => {
    const sender = makeSender({ window: 4 });
    let now = 0;
    expect(drain(sender, now).metas).toBe(1);
    for (let round = 0; round < 3; round++) {
      const deadline = sender.nextDeadline()!;
      expect(deadline).toBeGreaterThan(now);
      now = deadline;
      sender.handleTimeout(now);
      expect(drain(sender, now).metas).toBe(1);
      // A feedback without metaKnown does not stop the repetition.
      sender.handleDatagram(feedback('uncoded', { metaKnown: false }), now);
    }
    expect(sender.stats.metaSent).toBe(4);
    sender.handleDatagram(feedback('uncoded', { metaKnown: true }), now);
    for (let round = 0; round < 5; round++) {
      now = sender.nextDeadline()!;
      sender.handleTimeout(now);
      sender.handleDatagram(feedback('uncoded', {}), now); // keep it from idling out
      expect(drain(sender, now).metas).toBe(0);
    }
    expect(sender.stats.metaSent).toBe(4);
  });

  test('a repeated REQUEST brings META back, at most once per round trip and only while it is unacknowledged', () => {
    const request = encodeRequest({
      transferId: TRANSFER,
      mode: 'uncoded',
      scheduler: 'random',
      sourceIndex: 0,
      sourceCount: 1,
      window: 8,
      generationSize: 4,
      symbolSize: 16,
      url: 'test://object',
    });
    const sender = makeSender();
    expect(drain(sender, 0).metas).toBe(1);
    // Before any RTT sample a round trip counts as 100 ms.
    sender.handleDatagram(request, 10);
    expect(drain(sender, 10).metas).toBe(0);
    sender.handleDatagram(request, 100);
    expect(drain(sender, 100).metas).toBe(1);
    sender.handleDatagram(request, 150);
    expect(drain(sender, 150).metas).toBe(0);
    sender.handleDatagram(feedback('uncoded', { metaKnown: true }), 160);
    sender.handleDatagram(request, 300);
    expect(drain(sender, 300).metas).toBe(0);
    expect(sender.stats.metaSent).toBe(2);
  });

  test('comes back once data sent after it has arrived without it, at most once per round trip', () => {
    const sender = makeSender({ window: 4 });
    const first = drain(sender, 0);
    expect(first.metas).toBe(1);
    const seqs = first.data.map((d) => d.seq);
    // The client has data sent after the META but not the META: it was lost. RTT sample: 40 ms.
    sender.handleDatagram(feedback('uncoded', { metaKnown: false, seqs, received: [] }), 40);
    expect(sender.pollDatagram(40)).not.toBeNull();
    expect(sender.stats.metaSent).toBe(2);
    // The next feedback, sooner than a round trip later, does not repeat it again.
    sender.handleDatagram(feedback('uncoded', { metaKnown: false, seqs, received: [] }), 50);
    drain(sender, 50);
    expect(sender.stats.metaSent).toBe(2);
    // Nor does one that acknowledges only data sent before the repeated META, however late.
    sender.handleDatagram(feedback('uncoded', { metaKnown: false, seqs, received: [] }), 200);
    drain(sender, 40);
    expect(sender.stats.metaSent).toBe(2);
  });

  test('a feedback acknowledging nothing sent after the META does not bring it back early', () => {
    const sender = makeSender({ window: 4 });
    drain(sender, 0);
    sender.handleDatagram(feedback('uncoded', { metaKnown: false }), 60);
    drain(sender, 60);
    expect(sender.stats.metaSent).toBe(1);
  });
});

// ------------------------------------------------------------------ initial weights

describe('initial weights', () => {
  test("the REQUEST's weights set the slot partition until the first feedback", () => {
    const sender = makeSender({ sourceIndex: 1, sourceCount: 3, weights: [1, 2, 5] });
    expect(sender.partition.share(0)).toBeCloseTo(1 / 8, 6);
    expect(sender.partition.share(1)).toBeCloseTo(2 / 8, 6);
    expect(sender.partition.share(2)).toBeCloseTo(5 / 8, 6);
    sender.handleDatagram(feedback('uncoded', { weights: [1, 1, 1] }), 10);
    expect(sender.partition.share(1)).toBeCloseTo(1 / 3, 6);
  });

  test('without weights the sources start from equal shares', () => {
    const sender = makeSender({ sourceIndex: 0, sourceCount: 4 });
    expect(sender.partition.share(0)).toBeCloseTo(1 / 4, 6);
  });
});

// ------------------------------------------------------------------ slot ownership across new weights

describe('new weights and slots already begun', () => {
  // Source 0 of 2; two generations of 4 DoF; it starts from equal weights.
  const G = 4;
  const owned = (weights: number[], generation: number) => {
    const p = new Partition(weights);
    return range(0, G).filter((t) => p.owner(generation * G + t) === 0).length;
  };
  const start = (requestCarriesWeights = true) => {
    const before = owned([1, 1], 0);
    const sender = makeSender({
      mode: 'rlnc',
      scheduler: 'partitioned',
      sourceIndex: 0,
      sourceCount: 2,
      weights: requestCarriesWeights ? [1, 1] : undefined,
      generationSize: G,
      symbolSize: 16,
      objectLength: 16 * 2 * G,
      window: 2 * G,
      // Room for generation 0's own slots only: generation 1 stays untouched.
      config: { initialWindowPackets: before },
    });
    const first = drain(sender, 0).data;
    return { sender, first, before };
  };

  test('a generation this source began keeps its owners; an untouched one takes the new weights', () => {
    const { sender, first, before } = start();
    // The partition fixture must leave both sources slots in generation 0 under equal weights.
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(G);
    expect(units(first)).toEqual(new Array<number>(before).fill(0));
    // Everything arrived; the client now weights source 0 far above source 1.
    const weights = [255, 1];
    sender.handleDatagram(
      feedback('rlnc', { seqs: first.map((x) => x.seq), ranks: [before, 0], weights, rateBps: 1e9 }),
      40,
    );
    const next = drain(sender, 40).data;
    // Generation 0's remaining slots are still source 1's (it may have them in flight already);
    // generation 1 follows the new weights.
    expect(units(next)).toEqual(new Array<number>(owned(weights, 1)).fill(1));
  });

  test('from equal shares (no weights in the REQUEST) the first measured weights re-own begun generations too', () => {
    const { sender, first, before } = start(false);
    const weights = [255, 1];
    sender.handleDatagram(
      feedback('rlnc', { seqs: first.map((x) => x.seq), ranks: [before, 0], weights, rateBps: 1e9 }),
      40,
    );
    const next = drain(sender, 40).data;
    expect(units(next)).toEqual([
      ...new Array<number>(owned(weights, 0) - before).fill(0),
      ...new Array<number>(owned(weights, 1)).fill(1),
    ]);
  });

  test('weights that change on many feedbacks keep begun generations pinned', () => {
    const { sender, first, before } = start();
    const seqs = first.map((x) => x.seq);
    for (let i = 0; i < 20; i++)
      sender.handleDatagram(feedback('rlnc', { seqs, ranks: [before, 0], weights: [200 + (i % 2), 1] }), 40);
    sender.handleDatagram(feedback('rlnc', { seqs, ranks: [before, 0], weights: [255, 1], rateBps: 1e9 }), 40);
    expect(units(drain(sender, 40).data).filter((u) => u === 0)).toEqual([]);
  });

  test('a client that changes the weights on every feedback costs pins, not memory: past 64 partitions every pin is dropped', () => {
    const { sender, first, before } = start();
    const seqs = first.map((x) => x.seq);
    for (let i = 0; i < 100; i++)
      sender.handleDatagram(feedback('rlnc', { seqs, ranks: [before, 0], weights: [200 + (i % 2), 1] }), 40);
    sender.handleDatagram(feedback('rlnc', { seqs, ranks: [before, 0], weights: [255, 1], rateBps: 1e9 }), 40);
    expect(units(drain(sender, 40).data).filter((u) => u === 0)).toEqual(
      new Array<number>(owned([255, 1], 0) - before).fill(0),
    );
  });

  test('a source whose weight drops to 0 hands its slots of begun generations over at once', () => {
    const { sender, first, before } = start();
    sender.handleDatagram(
      feedback('rlnc', { seqs: first.map((x) => x.seq), ranks: [before, 0], weights: [1, 0], rateBps: 1e9 }),
      40,
    );
    const next = drain(sender, 40).data;
    expect(units(next)).toEqual([...new Array<number>(G - before).fill(0), ...new Array<number>(G).fill(1)]);
  });
});

// ------------------------------------------------------------------ redundancy

describe('coded redundancy', () => {
  // 100 generations of 4 symbols of 16 bytes; one source.
  const setup = (window: number) =>
    makeSender({
      mode: 'rlnc',
      scheduler: 'partitioned',
      generationSize: 4,
      symbolSize: 16,
      objectLength: 16 * 400,
      window,
    });

  /** Sends one window, then reports 1 of every 5 packets lost, a rate and a 40 ms RTT sample. */
  function lossy(sender: Sender, rateBps: number): void {
    const sent = drain(sender, 0).data.map((d) => d.seq);
    const seqs = sent.filter((seq) => seq % 5 !== 0);
    sender.handleDatagram(feedback('rlnc', { seqs, rateBps, ranks: [] }), 40);
    expect(sender.stats.lost).toBeGreaterThan(0);
  }

  test('none before any loss', () => {
    expect(setup(400).redundancy(0)).toBe(0);
  });

  test('a window that hides a repair round trip: only the tail of the object gets extra packets', () => {
    // 1000 datagrams of 34 bytes per second x 40 ms: a BDP of 40 packets, so the tail is the last
    // 1.5 BDPs (15 generations) and the window (400 packets) spans more than 4 BDPs.
    const sender = setup(400);
    lossy(sender, 34 * 1000);
    expect(sender.redundancy(0)).toBe(0);
    expect(sender.redundancy(84)).toBe(0);
    expect(sender.redundancy(85)).toBeGreaterThan(0);
    expect(sender.redundancy(99)).toBeGreaterThan(0);
  });

  test('a window too small to hide one: every generation gets extra packets', () => {
    // 3400 packets/s: a BDP of about 136 packets, and the window covers 8.
    const sender = setup(8);
    lossy(sender, 3400 * 34);
    expect(sender.redundancy(0)).toBeGreaterThan(0);
    expect(sender.redundancy(50)).toBeGreaterThan(0);
  });
});

// ------------------------------------------------------------------ strict window

describe('strict moving window', () => {
  test('uncoded: only units in [wMin, wMin + w), each once while in transit', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    expect([sender.windowStart, sender.windowEnd]).toEqual([0, 8]);
    const first = drain(sender, 0).data;
    expect(units(first)).toEqual(range(0, 8));
    expect(sender.packetsInFlight).toBe(8);
    expect(drain(sender, 1).data).toEqual([]);
  });

  test('uncoded: the window advances only when the lowest unit is complete', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    const sent = drain(sender, 0).data;
    // Everything but unit 0 arrived (in the bitmap; the seqs acknowledge all but unit 0's).
    const gotSeqs = sent.filter((s) => s.unit !== 0).map((s) => s.seq);
    sender.handleDatagram(feedback('uncoded', { received: range(1, 8), count: 8, seqs: gotSeqs }), 50);
    expect([sender.windowStart, sender.windowEnd]).toEqual([0, 8]);
    for (const u of range(1, 8)) expect(sender.rank(u)).toBe(1);
    expect(sender.rank(0)).toBe(0);
    // Only unit 0 may be sent (if its packet already counts as lost), nothing beyond the window.
    const again = drain(sender, 50).data;
    expect(again.every((s) => s.unit === 0)).toBe(true);
    // Unit 0 arrives: the window jumps past everything known complete.
    sender.handleDatagram(feedback('uncoded', { wMin: 0, received: range(0, 8), count: 8 }), 60);
    expect([sender.windowStart, sender.windowEnd]).toEqual([8, 16]);
    expect(units(drain(sender, 60).data)).toEqual(range(8, 16));
  });

  test('uncoded: a feedback wMin marks every unit below it complete', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    drain(sender, 0);
    sender.handleDatagram(feedback('uncoded', { wMin: 5, received: [6, 9], count: 8 }), 10);
    for (const u of range(0, 5)) expect(sender.rank(u)).toBe(1);
    expect(sender.rank(5)).toBe(0);
    expect([sender.windowStart, sender.windowEnd]).toEqual([5, 13]);
    const sent = units(drain(sender, 10).data);
    // Units 5..7 are still in transit from the first round; 6 and 9 are acknowledged.
    expect(sent).toEqual([8, 10, 11, 12]);
  });

  test('uncoded: the window stops at the last unit', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 10 - 5 });
    drain(sender, 0);
    sender.handleDatagram(feedback('uncoded', { wMin: 6, count: 4 }), 10);
    expect([sender.windowStart, sender.windowEnd]).toEqual([6, 10]);
    expect(units(drain(sender, 10).data)).toEqual([8, 9]);
    sender.handleDatagram(feedback('uncoded', { wMin: 6, received: range(6, 10), count: 4 }), 20);
    expect([sender.windowStart, sender.windowEnd]).toEqual([10, 10]);
    expect(drain(sender, 20).data).toEqual([]);
  });

  test('rlnc: floor(w / g) generations, each up to its size in flight', () => {
    // 6 generations of 4 symbols; w = 10 packets = 2 generations.
    const sender = makeSender({ mode: 'rlnc', window: 10, generationSize: 4, objectLength: 16 * 24 });
    expect([sender.windowStart, sender.windowEnd]).toEqual([0, 2]);
    const sent = drain(sender, 0).data;
    expect(units(sent)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    // Generation 0 complete, generation 1 at rank 1 (its packets acknowledged).
    sender.handleDatagram(feedback('rlnc', { ranks: [4, 1], seqs: sent.map((s) => s.seq) }), 40);
    expect([sender.windowStart, sender.windowEnd]).toEqual([1, 3]);
    const next = drain(sender, 40).data;
    expect(units(next)).toEqual([1, 1, 1, 2, 2, 2, 2]);
    // Stale ranks never lower what is known; rank above the generation size is clamped.
    sender.handleDatagram(feedback('rlnc', { ranks: [0, 0], seqs: [0] }), 41);
    expect(sender.rank(0)).toBe(4);
    expect(sender.rank(1)).toBe(1);
    sender.handleDatagram(feedback('rlnc', { wMin: 1, ranks: [200, 3] }), 42);
    expect(sender.rank(1)).toBe(4);
    expect([sender.windowStart, sender.windowEnd]).toEqual([2, 4]);
  });

  test('rlnc: a window smaller than a generation still covers one generation', () => {
    const sender = makeSender({ mode: 'rlnc', window: 3, generationSize: 8, objectLength: 16 * 20 });
    expect([sender.windowStart, sender.windowEnd]).toEqual([0, 1]);
    expect(units(drain(sender, 0).data)).toEqual(new Array(8).fill(0));
  });

  test('rlnc: the short last generation needs only its own size', () => {
    // 10 symbols, g = 4: generations of 4, 4 and 2.
    const sender = makeSender({ mode: 'rlnc', window: 12, generationSize: 4, objectLength: 16 * 10 - 3 });
    expect([sender.windowStart, sender.windowEnd]).toEqual([0, 3]);
    expect(units(drain(sender, 0).data)).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
  });

  test('every data packet stays in the window, whatever feedback arrives (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Mode>('uncoded', 'rlnc'),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(
          fc.record({
            wMin: fc.integer({ min: 0, max: 60 }),
            bits: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 6 }),
            dt: fc.integer({ min: 0, max: 400 }),
          }),
          { maxLength: 25 },
        ),
        fc.integer({ min: 0, max: 1000 }),
        (mode, window, g, feedbacks, seed) => {
          const sender = makeSender({ mode, window, generationSize: g, objectLength: 16 * 50 - 1, seed });
          let now = 0;
          let lastStart = 0;
          const known = new Uint8Array(sender.layout.unitCount);
          for (const f of feedbacks) {
            drain(sender, now); // throws on a packet outside the window
            now += f.dt;
            const bytes =
              mode === 'uncoded'
                ? encodeFeedbackUncoded({
                    ...common(f.wMin),
                    bitmap: Uint8Array.from(f.bits),
                    bitCount: f.bits.length * 8,
                  })
                : encodeFeedbackRlnc({ ...common(f.wMin), ranks: Uint8Array.from(f.bits) });
            sender.handleDatagram(bytes, now);
            // Reference: what the sender must know after merging this feedback.
            const n = known.length;
            for (let u = 0; u < Math.min(f.wMin, n); u++) known[u] = sender.layout.unitSize(u);
            if (mode === 'uncoded') {
              for (let i = 0; i < f.bits.length * 8 && f.wMin + i < n; i++)
                if (f.bits[i >> 3] & (1 << (i & 7))) known[f.wMin + i] = 1;
            } else {
              for (let i = 0; i < f.bits.length && f.wMin + i < n; i++)
                known[f.wMin + i] = Math.max(
                  known[f.wMin + i],
                  Math.min(f.bits[i], sender.layout.unitSize(f.wMin + i)),
                );
            }
            let expectedStart = 0;
            while (expectedStart < n && known[expectedStart] >= sender.layout.unitSize(expectedStart)) expectedStart++;
            expect(sender.windowStart).toBe(expectedStart);
            expect(sender.windowStart).toBeGreaterThanOrEqual(lastStart);
            expect(sender.windowEnd).toBe(Math.min(n, expectedStart + sender.layout.windowUnits(window)));
            for (let u = 0; u < n; u++) expect(sender.rank(u)).toBe(known[u]);
            lastStart = sender.windowStart;
          }
          drain(sender, now);
        },
      ),
      { seed: 42, numRuns: 150 },
    );

    function common(wMin: number) {
      return {
        transferId: TRANSFER,
        metaKnown: true,
        complete: false,
        largestSeq: NO_SEQ,
        ackDelay: 0,
        ackBits: 0,
        rateBps: 0,
        inFlightCap: UNLIMITED_IN_FLIGHT,
        weights: Uint8Array.of(1),
        wMin,
      };
    }
  });
});

// ------------------------------------------------------------------ monotonic state

describe('a resuming REQUEST', () => {
  test('units below fromUnit are complete: the window starts there', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40, resume: { fromUnit: 12, blockRound: 0 } });
    expect([sender.windowStart, sender.windowEnd]).toEqual([12, 20]);
    for (const u of range(0, 12)) expect(sender.rank(u)).toBe(1);
  });

  test('no DATA before the first FEEDBACK, which says what else the client has', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40, resume: { fromUnit: 12, blockRound: 0 } });
    expect(drain(sender, 0)).toEqual({ data: [], metas: 1 });
    sender.handleDatagram(feedback('uncoded', { wMin: 12, received: [12, 13, 15], count: 4 }), 40);
    // 12 and 13 complete: the window is [14, 22); 15 is there too.
    expect(units(drain(sender, 40).data)).toEqual([14, ...range(16, 22)]);
  });

  test("without a FEEDBACK, DATA begins at the deadline it set (META's first timeout)", () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40, resume: { fromUnit: 30, blockRound: 0 } });
    expect(drain(sender, 0).data).toEqual([]);
    const deadline = sender.nextDeadline()!;
    expect(deadline).toBeLessThanOrEqual(INITIAL_TIMEOUT);
    expect(drain(sender, deadline - 1).data).toEqual([]);
    sender.handleTimeout(deadline);
    expect(units(drain(sender, deadline).data)).toEqual(range(30, 38));
  });

  test('fromUnit past the last unit: the object is complete, nothing is sent', () => {
    const sender = makeSender({ objectLength: 16 * 40, resume: { fromUnit: 2 ** 32 - 1, blockRound: 0 } });
    sender.handleTimeout(INITIAL_TIMEOUT);
    expect(drain(sender, INITIAL_TIMEOUT).data).toEqual([]);
    expect(sender.windowStart).toBe(40);
  });
});

describe('acknowledged state only grows', () => {
  test('an older, reordered feedback with a lower wMin and fewer bits does not regress', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    const sent = drain(sender, 0).data;
    const seqs = sent.map((s) => s.seq);
    sender.handleDatagram(feedback('uncoded', { wMin: 3, received: [5, 6], count: 8, seqs }), 50);
    expect([sender.windowStart, sender.windowEnd]).toEqual([3, 11]);
    // The older feedback (smaller largestSeq) arrives late.
    sender.handleDatagram(feedback('uncoded', { wMin: 1, received: [], count: 8, seqs: seqs.slice(0, 2) }), 51);
    expect([sender.windowStart, sender.windowEnd]).toEqual([3, 11]);
    expect([0, 1, 2, 5, 6].map((u) => sender.rank(u))).toEqual([1, 1, 1, 1, 1]);
    expect([3, 4, 7].map((u) => sender.rank(u))).toEqual([0, 0, 0]);
    // A stale feedback from before any data (NO_SEQ, wMin 0) changes nothing either.
    sender.handleDatagram(feedback('uncoded', { wMin: 0, count: 0 }), 52);
    expect(sender.windowStart).toBe(3);
  });

  test('rlnc ranks are merged with max, and wMin beyond the object is clamped', () => {
    const sender = makeSender({ mode: 'rlnc', window: 16, generationSize: 4, objectLength: 16 * 24 });
    drain(sender, 0);
    sender.handleDatagram(feedback('rlnc', { ranks: [3, 2, 1, 0] }), 10);
    sender.handleDatagram(feedback('rlnc', { ranks: [1, 3, 0, 0] }), 11);
    expect([0, 1, 2, 3].map((u) => sender.rank(u))).toEqual([3, 3, 1, 0]);
    expect(sender.windowStart).toBe(0);
    sender.handleDatagram(feedback('rlnc', { wMin: 0xffffffff, ranks: [] }), 12);
    expect(sender.windowStart).toBe(sender.layout.unitCount);
    expect(drain(sender, 12).data).toEqual([]);
  });

  test('only the newest feedback with the rewind flag lowers ranks and wMin, and the unit is sent again', () => {
    const sender = makeSender({ mode: 'uncoded', window: 8, objectLength: 16 * 12, scheduler: 'partitioned' });
    const first = drain(sender, 0).data;
    expect(units(first)).toEqual(range(0, 8));
    const seqs = first.map((d) => d.seq);
    sender.handleDatagram(feedback('uncoded', { seqs, wMin: 8, received: [] }), 10);
    expect(sender.windowStart).toBe(8);
    // Without the flag a lower report changes nothing.
    sender.handleDatagram(feedback('uncoded', { seqs, wMin: 2, received: [3, 4, 5, 6, 7] }), 11);
    expect(sender.windowStart).toBe(8);
    // An older feedback (lower largestSeq) with the flag changes nothing either.
    sender.handleDatagram(feedback('uncoded', { seqs: seqs.slice(0, 4), rewind: true, wMin: 0, received: [] }), 12);
    expect(sender.windowStart).toBe(8);
    // The newest with the flag: packets 2 and 3 were discarded, the window goes back and they go again.
    drain(sender, 13);
    sender.handleDatagram(feedback('uncoded', { seqs, rewind: true, wMin: 2, received: [4, 5, 6, 7, 8, 9] }), 14);
    expect(sender.windowStart).toBe(2);
    expect([2, 3, 4].map((u) => sender.rank(u))).toEqual([0, 0, 1]);
    expect(units(drain(sender, 14).data)).toEqual(expect.arrayContaining([2, 3]));
  });
});

// ------------------------------------------------------------------ in transit

describe('in-transit accounting', () => {
  test('packets expire after the RTT-based timeout and their units become sendable again', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    const first = drain(sender, 0).data;
    expect(units(first)).toEqual(range(0, 8));
    for (const u of range(0, 8)) expect(sender.inTransit(u)).toBe(1);
    expect(sender.nextDeadline()).toBe(INITIAL_TIMEOUT);
    // Just before the timeout nothing expires.
    sender.handleTimeout(INITIAL_TIMEOUT - 1);
    expect(sender.stats.expired).toBe(0);
    expect(drain(sender, INITIAL_TIMEOUT - 1).data).toEqual([]);
    sender.handleTimeout(INITIAL_TIMEOUT);
    expect(sender.stats.expired).toBe(8);
    expect(sender.packetsInFlight).toBe(0);
    for (const u of range(0, 8)) expect(sender.inTransit(u)).toBe(0);
    const again = drain(sender, INITIAL_TIMEOUT);
    expect(units(again.data)).toEqual(range(0, 8));
    expect(again.metas).toBe(1); // META was not acknowledged either
  });

  test('the timeout follows the measured RTT', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    const first = drain(sender, 0).data;
    // One packet acknowledged 40 ms after it left (ackDelay 0): srtt 40, rttvar 20.
    const seq = first[0].seq;
    sender.handleDatagram(feedback('uncoded', { seqs: [seq], received: [first[0].unit], count: 8 }), 40);
    expect(sender.rtt.smoothed).toBeCloseTo(40);
    const timeout = Math.max(40 + 4 * 20, 1.25 * 40) + 25;
    drain(sender, 40);
    // The oldest live packet left at 0: it expires at 0 + timeout (META is acknowledged).
    expect(sender.nextDeadline()).toBeCloseTo(timeout);
  });

  test('ackDelay is subtracted from the RTT sample', () => {
    const sender = makeSender({ window: 8 });
    const first = drain(sender, 0).data;
    // Feedback 60 ms after sending, of which the client held it 15 ms (150 units of 100 µs).
    sender.handleDatagram(feedback('uncoded', { seqs: [first[0].seq], ackDelay: 150 }), 60);
    expect(sender.rtt.smoothed).toBeCloseTo(45);
  });

  test('a packet 3 below the largest acknowledged one counts as lost at once', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    const sent = drain(sender, 0).data;
    const bySeq = [...sent].sort((a, b) => a.seq - b.seq);
    // Seqs 0..7; all but seq 2 arrive.
    const arrived = bySeq.filter((s) => s.seq !== bySeq[2].seq);
    sender.handleDatagram(
      feedback('uncoded', { seqs: arrived.map((s) => s.seq), received: arrived.map((s) => s.unit), count: 8 }),
      30,
    );
    expect(sender.packetsInFlight).toBe(0);
    expect(sender.deliveredOwn(bySeq[0].unit)).toBe(1);
    const missing = bySeq[2].unit;
    expect(sender.deliveredOwn(missing)).toBe(0);
    // The window now starts at the missing unit: it is sendable again, as are the new units.
    expect(sender.windowStart).toBe(missing);
    expect(units(drain(sender, 30).data)).toEqual([missing, ...range(8, missing + 8)]);
  });

  test('a packet fewer than 3 below the largest acknowledged one stays in transit (reordering)', () => {
    const sender = makeSender({ window: 8, objectLength: 16 * 40 });
    const sent = drain(sender, 0).data;
    const bySeq = [...sent].sort((a, b) => a.seq - b.seq);
    const arrived = bySeq.filter((s) => s.seq !== 6);
    sender.handleDatagram(
      feedback('uncoded', { seqs: arrived.map((s) => s.seq), received: arrived.map((s) => s.unit), count: 8 }),
      30,
    );
    const late = bySeq[6].unit;
    expect(sender.packetsInFlight).toBe(1);
    expect(sender.inTransit(late)).toBe(1);
    expect(sender.windowStart).toBe(late);
    // Only new units go out; the late packet's unit is not sent again.
    expect(units(drain(sender, 30).data)).toEqual(range(8, late + 8));
  });
});

// ------------------------------------------------------------------ in-flight limits

describe('in-flight limits', () => {
  test('never more packets in flight than the inFlightCap of the newest feedback', () => {
    const sender = makeSender({ window: 64, objectLength: 16 * 200 });
    sender.handleDatagram(feedback('uncoded', { inFlightCap: 3 }), 0);
    const sent = drain(sender, 0).data;
    expect(sent.length).toBe(3);
    expect(sender.packetsInFlight).toBe(3);
    // The cap rises with a newer feedback (it acknowledges seq 0).
    sender.handleDatagram(feedback('uncoded', { inFlightCap: 5, seqs: [0], received: [sent[0].unit], count: 64 }), 10);
    drain(sender, 10);
    expect(sender.packetsInFlight).toBe(5);
    // An older feedback (no seqs) with a larger cap is ignored for the cap.
    sender.handleDatagram(feedback('uncoded', { inFlightCap: 50 }), 11);
    drain(sender, 11);
    expect(sender.packetsInFlight).toBe(5);
    // A cap of 0 stops new data entirely (the feedback acknowledges seqs 0 and 1).
    sender.handleDatagram(feedback('uncoded', { inFlightCap: 0, seqs: [0, 1] }), 12);
    expect(sender.packetsInFlight).toBe(4);
    expect(drain(sender, 12).data).toEqual([]);
  });

  test('in flight never exceeds the cap under random acknowledgements (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Mode>('uncoded', 'rlnc'),
        fc.array(
          fc.record({
            cap: fc.integer({ min: 0, max: 20 }),
            ackFraction: fc.double({ min: 0, max: 1, noNaN: true }),
            dt: fc.integer({ min: 1, max: 150 }),
          }),
          { minLength: 1, maxLength: 30 },
        ),
        (mode, steps) => {
          const sender = makeSender({ mode, window: 64, generationSize: 8, objectLength: 16 * 400 });
          let now = 0;
          let cap = UNLIMITED_IN_FLIGHT;
          const delivered: number[] = [];
          const all: Sent[] = [];
          for (const step of steps) {
            const before = sender.packetsInFlight;
            for (const s of drain(sender, now).data) {
              all.push(s);
              const limit = Math.max(cap === UNLIMITED_IN_FLIGHT ? 10_000 : cap, before);
              if (sender.packetsInFlight > limit)
                throw new Error(`${sender.packetsInFlight} in flight, cap ${cap} (was ${before})`);
            }
            now += step.dt;
            const cut = Math.floor(all.length * step.ackFraction);
            for (const s of all.slice(delivered.length, cut)) delivered.push(s.seq);
            cap = step.cap;
            const seqs = delivered.length > 0 ? delivered : undefined;
            // Feedback only counts for the cap when it is the newest; with no seqs yet, it is.
            sender.handleDatagram(feedback(mode, { inFlightCap: cap, seqs, received: [], count: 0 }), now);
            const after = drain(sender, now).data;
            all.push(...after);
            if (after.length > 0 && sender.packetsInFlight > cap)
              throw new Error(`sent up to ${sender.packetsInFlight} in flight with cap ${cap}`);
          }
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });

  test('before a rate is known, initialWindowPackets bounds what is in flight', () => {
    const sender = makeSender({ window: 64, objectLength: 16 * 200, config: { initialWindowPackets: 6 } });
    expect(drain(sender, 0).data.length).toBe(6);
  });

  test('with a reported rate, the limit is gain x rate x base RTT / datagram size + headroom', () => {
    const symbolSize = 100;
    const sender = makeSender({
      window: 500,
      symbolSize,
      objectLength: symbolSize * 1000,
      config: { initialWindowPackets: 1 },
    });
    const sent = drain(sender, 0).data;
    expect(sent.length).toBe(1);
    // RTT sample 50 ms at 100 000 B/s: BDP 5 000 B = 5000 / (100 + 18) datagrams
    // -> ceil(1.5 x 42.4) + 16 = 80 (the reference divides by the 18-byte DATA_RLNC header size).
    sender.handleDatagram(feedback('uncoded', { seqs: [sent[0].seq], rateBps: 100_000 }), 50);
    const expected = Math.ceil((1.5 * (100_000 * 50)) / 1000 / (symbolSize + DATA_RLNC_HEADER_BYTES)) + 16;
    expect(expected).toBe(80);
    expect(sender.inFlightLimit).toBe(expected);
    drain(sender, 50);
    expect(sender.packetsInFlight).toBe(expected);
    // A cap below the rate-based limit wins.
    sender.handleDatagram(feedback('uncoded', { seqs: [sent[0].seq, 1], rateBps: 100_000, inFlightCap: 10 }), 60);
    expect(sender.inFlightLimit).toBe(10);
  });

  test("inFlightRtt 'smoothed' (QUIC sessions) sizes the limit by the smoothed RTT, a standing queue included", () => {
    const symbolSize = 100;
    const setup = { window: 500, symbolSize, objectLength: symbolSize * 1000, config: { initialWindowPackets: 1 } };
    const limits: Record<string, number> = {};
    for (const inFlightRtt of ['min', 'smoothed'] as const) {
      const sender = makeSender({ ...setup, config: { ...setup.config, inFlightRtt } });
      const first = drain(sender, 0).data;
      // A 50 ms path, then another flow's queue holds every later sample at 150 ms.
      sender.handleDatagram(feedback('uncoded', { seqs: [first[0].seq], rateBps: 100_000 }), 50);
      const sent = drain(sender, 50).data;
      for (const [i, at] of [200, 200.5, 201, 201.5, 202, 202.5, 203, 203.5].entries())
        sender.handleDatagram(
          feedback('uncoded', { seqs: [first[0].seq, ...sent.slice(0, i + 1).map((d) => d.seq)], rateBps: 100_000 }),
          at,
        );
      limits[inFlightRtt] = sender.inFlightLimit;
    }
    // min: 1.5 x 100 000 B/s x 50 ms over 118-byte datagrams + 16 = 80, whatever the queue.
    expect(limits.min).toBe(80);
    // smoothed: the smoothed RTT (most of the way to 150 ms) over the gain, above the 50 ms minimum.
    expect(limits.smoothed).toBeGreaterThan(100);
  });

  test('a warm start sizes the first window from the previous transfer, and hands its own estimate on', () => {
    const symbolSize = 100;
    const setup = { window: 500, symbolSize, objectLength: symbolSize * 1000, config: { initialWindowPackets: 1 } };
    const cold = makeSender(setup);
    expect(cold.pathEstimate()).toBeUndefined();
    expect(drain(cold, 0).data.length).toBe(1);
    // The estimate a previous transfer left: 100 000 B/s over a 50 ms path, as in the test above.
    const warm = makeSender({ ...setup, warmStart: { rateBps: 100_000, minRttMs: 50 } });
    expect(warm.inFlightLimit).toBe(80);
    const sent = drain(warm, 0).data;
    expect(sent.length).toBe(80);
    // Before its own RTT sample it has no estimate to pass on; after feedback it has its own.
    expect(warm.pathEstimate()).toBeUndefined();
    warm.handleDatagram(feedback('uncoded', { seqs: [sent[0].seq], rateBps: 200_000 }), 30);
    expect(warm.pathEstimate()).toEqual({ rateBps: 200_000, minRttMs: 30 });
  });

  test("a client's inflated estimate cannot warm-start past maxInFlightPackets", () => {
    const setup = { window: 10_000, objectLength: 16 * 20_000, config: { maxInFlightPackets: 300 } };
    const sender = makeSender({ ...setup, warmStart: { rateBps: 1e15, minRttMs: 1e6 } });
    expect(sender.inFlightLimit).toBe(300);
    expect(drain(sender, 0).data.length).toBeLessThanOrEqual(300);
  });

  test('a warm start with a nonsensical estimate is ignored', () => {
    const setup = { window: 64, objectLength: 16 * 200, config: { initialWindowPackets: 6 } };
    for (const warmStart of [
      { rateBps: 0, minRttMs: 50 },
      { rateBps: 100_000, minRttMs: 0 },
      { rateBps: 100_000, minRttMs: Infinity },
      { rateBps: NaN, minRttMs: 50 },
    ])
      expect(drain(makeSender({ ...setup, warmStart }), 0).data.length).toBe(6);
  });
});

// ------------------------------------------------------------------ end of transfer

describe('end of transfer', () => {
  test('STOP Complete ends the sender: nothing more to send, no deadline', () => {
    const sender = makeSender();
    drain(sender, 0);
    sender.handleDatagram(encodeStop({ transferId: TRANSFER, reason: StopReason.Complete }), 10);
    expect(sender.status).toBe('done');
    expect(sender.error).toBeUndefined();
    expect(sender.pollDatagram(10)).toBeNull();
    expect(sender.nextDeadline()).toBeNull();
    sender.handleTimeout(100_000);
    sender.handleDatagram(feedback('uncoded', {}), 20);
    expect(sender.status).toBe('done');
  });

  test.each([
    ['Cancelled', StopReason.Cancelled],
    ['BadSource', StopReason.BadSource],
  ])('STOP %s fails the sender with a cancelled error', (_name, reason) => {
    const sender = makeSender();
    drain(sender, 0);
    sender.handleDatagram(encodeStop({ transferId: TRANSFER, reason }), 10);
    expect(sender.status).toBe('failed');
    expect(sender.error?.code).toBe('cancelled');
    expect(sender.pollDatagram(10)).toBeNull();
    expect(sender.nextDeadline()).toBeNull();
  });

  test('STOP for another transfer is ignored', () => {
    const sender = makeSender();
    sender.handleDatagram(encodeStop({ transferId: TRANSFER + 1, reason: StopReason.Complete }), 10);
    expect(sender.status).toBe('active');
    expect(sender.stats.malformedReceived).toBe(1);
  });

  test('a feedback with the complete flag ends the sender like STOP Complete', () => {
    const sender = makeSender();
    drain(sender, 0);
    sender.handleDatagram(feedback('uncoded', { complete: true }), 10);
    expect(sender.status).toBe('done');
    expect(sender.pollDatagram(10)).toBeNull();
  });

  test('idle timeout: no word from the client for 5 s fails the sender', () => {
    const sender = makeSender({ config: { idleTimeoutMs: 5000 } });
    drain(sender, 0);
    let now = 0;
    for (let i = 0; i < 100 && sender.status === 'active'; i++) {
      now = sender.nextDeadline()!;
      sender.handleTimeout(now);
      drain(sender, now);
    }
    expect(sender.status).toBe('failed');
    expect(sender.error?.code).toBe('idle-timeout');
    expect(now).toBe(5000);
    expect(sender.nextDeadline()).toBeNull();
    expect(sender.pollDatagram(now)).toBeNull();
  });

  test('any valid message from the client resets the idle timer; garbage does not', () => {
    const sender = makeSender({ config: { idleTimeoutMs: 5000 } });
    drain(sender, 0);
    sender.handleDatagram(feedback('uncoded', {}), 3000);
    sender.handleDatagram(Uint8Array.of(1, 2, 3), 4000);
    sender.handleDatagram(feedback('uncoded', { transferId: TRANSFER ^ 1 }), 4500);
    sender.handleTimeout(7999);
    expect(sender.status).toBe('active');
    sender.handleTimeout(8000);
    expect(sender.status).toBe('failed');
    expect(sender.error?.code).toBe('idle-timeout');
  });
});

// ------------------------------------------------------------------ deadlines

describe('deadline contract', () => {
  type Op =
    | { kind: 'poll'; dt: number }
    | { kind: 'timeout-at-deadline' }
    | { kind: 'timeout'; dt: number }
    | { kind: 'feedback'; dt: number; ackFraction: number; metaKnown: boolean; cap: number };

  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('poll' as const), dt: fc.integer({ min: 0, max: 300 }) }),
    fc.record({ kind: fc.constant('timeout-at-deadline' as const) }),
    fc.record({ kind: fc.constant('timeout' as const), dt: fc.double({ min: 0, max: 2000, noNaN: true }) }),
    fc.record({
      kind: fc.constant('feedback' as const),
      dt: fc.integer({ min: 0, max: 300 }),
      ackFraction: fc.double({ min: 0, max: 1, noNaN: true }),
      metaKnown: fc.boolean(),
      cap: fc.integer({ min: 0, max: 40 }),
    }),
  );

  test('after handleTimeout(now), nextDeadline() is null or later than now', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Mode>('uncoded', 'rlnc'),
        fc.array(opArb, { minLength: 1, maxLength: 60 }),
        (mode, ops) => {
          const sender = makeSender({ mode, window: 32, generationSize: 4, objectLength: 16 * 100 });
          let now = 0;
          const seqs: number[] = [];
          for (const op of ops) {
            if (op.kind === 'poll') {
              now += op.dt;
              for (const s of drain(sender, now).data) seqs.push(s.seq);
            } else if (op.kind === 'feedback') {
              now += op.dt;
              const acked = seqs.slice(0, Math.floor(seqs.length * op.ackFraction));
              sender.handleDatagram(
                feedback(mode, {
                  seqs: acked.length ? acked : undefined,
                  metaKnown: op.metaKnown,
                  inFlightCap: op.cap,
                }),
                now,
              );
            } else {
              const deadline = sender.nextDeadline();
              if (deadline === null) break;
              now = op.kind === 'timeout-at-deadline' ? Math.max(now, deadline) : now + op.dt;
              sender.handleTimeout(now);
              const next = sender.nextDeadline();
              if (next !== null && !(next > now))
                throw new Error(`after handleTimeout(${now}) nextDeadline() = ${next} (status ${sender.status})`);
            }
          }
        },
      ),
      { seed: 42, numRuns: 200 },
    );
  });
});

describe('datagram buffer', () => {
  /** The DATA datagrams one sender emits at time 0, as polled (not copied). */
  function dataPolled(sender: Sender): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (let bytes = sender.pollDatagram(0); bytes; bytes = sender.pollDatagram(0)) {
      const type = decodeOrThrow(bytes).type;
      if (type === MessageType.DataRlnc || type === MessageType.DataUncoded) out.push(bytes);
    }
    return out;
  }

  test.each(['rlnc', 'uncoded'] as const)(
    '%s: DATA is built in the buffer, each datagram the bytes a fresh array would carry',
    (mode) => {
      const fresh = makeSender({ mode, objectLength: 16 * 40 - 5 });
      const expected = dataPolled(fresh).map((d) => d.slice());
      const reusing = makeSender({ mode, objectLength: 16 * 40 - 5 });
      const buffer = new Uint8Array(64);
      reusing.datagramBuffer = buffer;
      const got: Uint8Array[] = [];
      for (let bytes = reusing.pollDatagram(0); bytes; bytes = reusing.pollDatagram(0)) {
        const type = decodeOrThrow(bytes).type;
        if (type !== MessageType.DataRlnc && type !== MessageType.DataUncoded) continue;
        expect(bytes.buffer).toBe(buffer.buffer);
        got.push(bytes.slice());
      }
      expect(got.length).toBeGreaterThan(0);
      expect(got).toEqual(expected);
    },
  );

  test('a datagram longer than the buffer gets an array of its own', () => {
    const sender = makeSender({ mode: 'rlnc' });
    const small = new Uint8Array(DATA_RLNC_HEADER_BYTES + 8);
    sender.datagramBuffer = small;
    const data = dataPolled(sender);
    expect(data.length).toBeGreaterThan(0);
    for (const d of data) {
      expect(d.buffer).not.toBe(small.buffer);
      expect(d.length).toBe(DATA_RLNC_HEADER_BYTES + 16);
    }
  });
});
