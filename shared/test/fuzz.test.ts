/**
 * Hostile input: arbitrary bytes and mutated valid messages fed to decode(), Receiver and Sender.
 * Nothing may throw, and input that a correct peer must ignore may not disturb a transfer.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import {
  decode,
  encodeDataRlnc,
  encodeDataUncoded,
  encodeError,
  encodeFeedbackRlnc,
  encodeFeedbackUncoded,
  encodeDigests,
  encodeMeta,
  encodeRequest,
  encodeStop,
  ErrorCode,
  Layout,
  MAX_DATAGRAM_BYTES,
  Message,
  MessageType,
  Mode,
  NO_SEQ,
  Receiver,
  rlncCodec,
  SchedulerName,
  seededRandom,
  Sender,
  StopReason,
  uncodedCodec,
  UNLIMITED_IN_FLIGHT,
  WireError,
  unitDigests,
  unitRoot,
} from '../src/internal';

const TRANSFER = 0x5eed1234;
const KNOWN_TYPES = new Set<number>(Object.values(MessageType));

function sha256(data: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

// ------------------------------------------------------------------ inputs

interface Params {
  mode: Mode;
  scheduler: SchedulerName;
  sources: number;
  objectLength: number;
  symbolSize: number;
  window: number;
  generationSize: number;
  seed: number;
}

const paramsArb: fc.Arbitrary<Params> = fc
  .record({
    combo: fc.constantFrom(
      { mode: 'uncoded' as Mode, scheduler: 'random' as SchedulerName },
      { mode: 'uncoded' as Mode, scheduler: 'partitioned' as SchedulerName },
      { mode: 'rlnc' as Mode, scheduler: 'rarest' as SchedulerName },
      { mode: 'rlnc' as Mode, scheduler: 'partitioned' as SchedulerName },
    ),
    sources: fc.integer({ min: 1, max: 3 }),
    objectLength: fc.integer({ min: 0, max: 3000 }),
    symbolSize: fc.integer({ min: 16, max: 128 }),
    window: fc.integer({ min: 4, max: 32 }),
    generationSize: fc.integer({ min: 1, max: 8 }),
    seed: fc.integer({ min: 0, max: 0x7fffffff }),
  })
  .map(({ combo, ...rest }) => ({ ...combo, ...rest }));

/** One valid encoding of every message type, with plausible fields for transfer `transferId`. */
function validMessages(transferId: number, p: Params = defaultParams): Uint8Array[] {
  const symbolSize = p.symbolSize;
  const payload = new Uint8Array(symbolSize).map((_, i) => i * 7);
  const common = {
    transferId,
    metaKnown: true,
    complete: false,
    largestSeq: 41,
    ackDelay: 35,
    ackBits: 0xfffffff0,
    rateBps: 250_000,
    inFlightCap: 12,
    weights: Uint8Array.of(20, 12, 0),
    wMin: 2,
  };
  return [
    encodeRequest({
      transferId,
      mode: p.mode,
      scheduler: p.scheduler,
      sourceIndex: 0,
      sourceCount: p.sources,
      window: p.window,
      generationSize: p.generationSize,
      symbolSize,
      url: 'https://origin.example/video/seg-1.m4s',
    }),
    encodeMeta({
      transferId,
      objectLength: p.objectLength,
      symbolSize,
      generationSize: p.generationSize,
      mode: p.mode,
      digest: new Uint8Array(32).fill(0xab),
      unitRoot: new Uint8Array(32).fill(0xcd),
    }),
    encodeDigests({ transferId, first: 3, digests: new Uint8Array(16 * 5).fill(0xef) }),
    encodeDataUncoded({ transferId, seq: 5, index: 1, payload }),
    encodeDataRlnc({ transferId, seq: 6, generation: 0, seed: 0x01020304, payload }),
    encodeFeedbackUncoded({ ...common, bitmap: Uint8Array.of(0b1010, 0b1), bitCount: 13 }),
    encodeFeedbackRlnc({ ...common, ranks: Uint8Array.of(3, 1, 0) }),
    encodeStop({ transferId, reason: StopReason.Complete }),
    encodeError({ transferId, code: ErrorCode.OriginError, message: 'upstream 503 – réessayer' }),
  ];
}

const defaultParams: Params = {
  mode: 'uncoded',
  scheduler: 'random',
  sources: 2,
  objectLength: 1000,
  symbolSize: 32,
  window: 16,
  generationSize: 4,
  seed: 1,
};

type Mutation =
  | { op: 'flip'; pos: number; bit: number }
  | { op: 'set'; pos: number; value: number }
  | { op: 'truncate'; len: number }
  | { op: 'extend'; bytes: Uint8Array }
  | { op: 'insert'; pos: number; value: number }
  | { op: 'delete'; pos: number };

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('flip' as const), pos: fc.nat(2000), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ op: fc.constant('set' as const), pos: fc.nat(2000), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ op: fc.constant('truncate' as const), len: fc.nat(2000) }),
  fc.record({ op: fc.constant('extend' as const), bytes: fc.uint8Array({ minLength: 1, maxLength: 40 }) }),
  fc.record({ op: fc.constant('insert' as const), pos: fc.nat(2000), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ op: fc.constant('delete' as const), pos: fc.nat(2000) }),
);

function mutate(base: Uint8Array, mutations: Mutation[]): Uint8Array {
  let b = Array.from(base);
  for (const m of mutations) {
    const at = (pos: number) => (b.length === 0 ? 0 : pos % b.length);
    switch (m.op) {
      case 'flip':
        if (b.length) b[at(m.pos)] ^= 1 << m.bit;
        break;
      case 'set':
        if (b.length) b[at(m.pos)] = m.value;
        break;
      case 'truncate':
        b = b.slice(0, m.len % (b.length + 1));
        break;
      case 'extend':
        b = b.concat(Array.from(m.bytes));
        break;
      case 'insert':
        b.splice(m.pos % (b.length + 1), 0, m.value);
        break;
      case 'delete':
        if (b.length) b.splice(at(m.pos), 1);
        break;
    }
  }
  return Uint8Array.from(b);
}

/** Bytes placed at an odd offset of a larger buffer, as a datagram view into a receive buffer. */
function atOffset(bytes: Uint8Array, offset: number): Uint8Array {
  const buf = new Uint8Array(bytes.length + offset + 3).fill(0xee);
  buf.set(bytes, offset);
  return buf.subarray(offset, offset + bytes.length);
}

/** Arbitrary bytes, or a mutated valid message (half of them with the transfer's id). */
function hostileArb(transferIds: number[], p?: Params): fc.Arbitrary<Uint8Array> {
  const bases = transferIds.flatMap((id) => validMessages(id, p));
  return fc.oneof(
    fc.uint8Array({ maxLength: 2000 }),
    fc.uint8Array({ maxLength: 40 }),
    fc
      .tuple(fc.nat(bases.length - 1), fc.array(mutationArb, { minLength: 1, maxLength: 4 }))
      .map(([i, ms]) => mutate(bases[i], ms)),
    // A few bytes changed from a valid message are the likeliest to decode.
    fc
      .tuple(fc.nat(bases.length - 1), fc.nat(2000), fc.integer({ min: 0, max: 255 }))
      .map(([i, pos, value]) => mutate(bases[i], [{ op: 'set', pos, value }])),
  );
}

// ------------------------------------------------------------------ decode

describe('decode() on hostile bytes', () => {
  function checkDecode(bytes: Uint8Array): void {
    let result: ReturnType<typeof decode>;
    try {
      result = decode(bytes);
    } catch (e) {
      throw new Error(`decode threw on ${Buffer.from(bytes).toString('hex')}: ${e}`);
    }
    if (result.ok) {
      const m: Message = result.value;
      if (!KNOWN_TYPES.has(m.type)) throw new Error(`decoded an unknown type ${m.type}`);
      if (m.transferId !== new DataView(bytes.buffer, bytes.byteOffset).getUint32(2))
        throw new Error('transferId does not come from bytes 2..5');
      // Byte fields are views into the datagram, never larger than it.
      for (const v of Object.values(m)) {
        if (v instanceof Uint8Array && (v.buffer !== bytes.buffer || v.length > bytes.length))
          throw new Error('a byte field is not a view into the datagram');
      }
    } else if (!(result.error instanceof WireError)) {
      throw new Error(`error is not a WireError: ${result.error}`);
    }
  }

  test('arbitrary byte arrays (up to 2000 bytes) never make decode throw', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), fc.integer({ min: 0, max: 7 }), (bytes, offset) => {
        checkDecode(bytes);
        checkDecode(atOffset(bytes, offset));
      }),
      { seed: 42, numRuns: 2000 },
    );
  });

  test('mutated valid messages (flipped, truncated, extended) never make decode throw', () => {
    let decodedOk = 0;
    fc.assert(
      fc.property(hostileArb([TRANSFER]), fc.integer({ min: 0, max: 7 }), (bytes, offset) => {
        checkDecode(bytes);
        checkDecode(atOffset(bytes, offset));
        if (decode(bytes).ok) decodedOk++;
      }),
      { seed: 42, numRuns: 3000 },
    );
    // The mutations must reach past the header checks often enough to mean something.
    expect(decodedOk).toBeGreaterThan(300);
  });

  test('every prefix and every single-byte change of every valid message', () => {
    for (const base of validMessages(TRANSFER)) {
      for (let len = 0; len <= base.length + 2; len++) {
        const b = new Uint8Array(len);
        b.set(base.subarray(0, Math.min(len, base.length)));
        checkDecode(b);
      }
      for (let i = 0; i < base.length; i++) {
        for (const value of [0, 1, 0x7f, 0x80, 0xfe, 0xff, base[i] ^ 0x01, base[i] ^ 0x80]) {
          const b = base.slice();
          b[i] = value;
          checkDecode(b);
        }
      }
    }
  });

  test('oversized and non-array input is rejected, not thrown on', () => {
    expect(decode(new Uint8Array(MAX_DATAGRAM_BYTES + 1)).ok).toBe(false);
    expect(decode(new Uint8Array(100_000)).ok).toBe(false);
    expect(decode([1, 2, 3] as unknown as Uint8Array).ok).toBe(false);
    expect(decode(undefined as unknown as Uint8Array).ok).toBe(false);
  });
});

// ------------------------------------------------------------------ an in-memory transfer

interface Injection {
  tick: number;
  to: 'receiver' | 'sender';
  source: number;
  bytes: Uint8Array;
}

interface Outcome {
  receiver: Receiver;
  senders: (Sender | undefined)[];
  object: Uint8Array;
  injected: number;
  /** Injected datagrams that decode as a message of this transfer. */
  injectedValid: number;
  ticks: number;
}

const DELAY_MS = 3;
const MAX_TICKS = 6000;

/** Would a correct peer ignore `bytes` (so injecting them must not change the transfer)? */
function ignorable(bytes: Uint8Array, to: 'receiver' | 'sender', source: number, p: Params): boolean {
  if (to === 'receiver' && !(Number.isInteger(source) && source >= 0 && source < p.sources)) return true;
  const d = decode(bytes);
  if (!d.ok || d.value.transferId !== TRANSFER) return true;
  const m = d.value;
  if (to === 'sender') {
    if (m.type === MessageType.Request) return true; // at most repeats META
    if (m.type === MessageType.FeedbackUncoded || m.type === MessageType.FeedbackRlnc) {
      const expected = p.mode === 'uncoded' ? MessageType.FeedbackUncoded : MessageType.FeedbackRlnc;
      return m.type !== expected || m.weights.length <= source;
    }
    return m.type !== MessageType.Stop;
  }
  const layout = new Layout(p.mode, p.objectLength, p.symbolSize, p.generationSize);
  switch (m.type) {
    case MessageType.DataUncoded:
      return (
        p.mode !== 'uncoded' || !(m.index < layout.unitCount) || m.payload.length !== layout.payloadLength(m.index)
      );
    case MessageType.DataRlnc:
      return p.mode !== 'rlnc' || !(m.generation < layout.unitCount) || m.payload.length !== p.symbolSize;
    case MessageType.Meta:
    case MessageType.Error:
      return false;
    default:
      return true; // REQUEST, FEEDBACK, STOP: client-to-source messages
  }
}

function runTransfer(p: Params, injections: Injection[], onlyIgnorable: boolean): Outcome {
  const random = seededRandom(p.seed);
  const object = Uint8Array.from({ length: p.objectLength }, () => random() & 0xff);
  const digest = sha256(object);
  const codec = p.mode === 'uncoded' ? uncodedCodec : rlncCodec;
  const receiver = new Receiver({
    transferId: TRANSFER,
    url: 'https://origin.example/object',
    mode: p.mode,
    scheduler: p.scheduler,
    sourceCount: p.sources,
    window: p.window,
    generationSize: p.generationSize,
    symbolSize: p.symbolSize,
    codec,
    now: 0,
    sha256,
    // Keeps hostile META from allocating much, and failures short.
    config: { maxObjectBytes: 64 * 1024, stallTimeoutMs: 2000 },
  });
  const senders: (Sender | undefined)[] = new Array(p.sources).fill(undefined);
  const toReceiver: { at: number; source: number; bytes: Uint8Array }[] = [];
  const toSender: { at: number; source: number; bytes: Uint8Array }[] = [];
  const byTick = new Map<number, Injection[]>();
  for (const inj of injections) byTick.set(inj.tick, [...(byTick.get(inj.tick) ?? []), inj]);
  let injected = 0;
  let injectedValid = 0;
  const count = (bytes: Uint8Array) => {
    injected++;
    const d = decode(bytes);
    if (d.ok && d.value.transferId === TRANSFER) injectedValid++;
  };

  const checkOut = (bytes: Uint8Array, from: string) => {
    const d = decode(bytes);
    if (!d.ok) throw new Error(`${from} emitted an undecodable datagram: ${d.error.message}`);
    return d.value;
  };

  let tick = 0;
  for (; tick < MAX_TICKS; tick++) {
    const now = tick;
    for (const inj of byTick.get(tick) ?? []) {
      if (inj.to === 'receiver') {
        if (onlyIgnorable && !ignorable(inj.bytes, 'receiver', inj.source, p)) continue;
        receiver.handleDatagram(inj.source, inj.bytes, now);
        count(inj.bytes);
      } else {
        const index = Math.abs(inj.source) % p.sources;
        const sender = senders[index];
        if (!sender || (onlyIgnorable && !ignorable(inj.bytes, 'sender', index, p))) continue;
        sender.handleDatagram(inj.bytes, now);
        count(inj.bytes);
      }
    }
    while (toReceiver.length && toReceiver[0].at <= now) {
      const d = toReceiver.shift()!;
      receiver.handleDatagram(d.source, d.bytes, now);
    }
    while (toSender.length && toSender[0].at <= now) {
      const d = toSender.shift()!;
      const sender = senders[d.source];
      if (sender) {
        sender.handleDatagram(d.bytes, now);
      } else {
        const m = decode(d.bytes);
        if (m.ok && m.value.type === MessageType.Request) {
          senders[d.source] = new Sender({
            request: m.value,
            object,
            digest,
            codec,
            random: seededRandom(p.seed * 31 + d.source),
            now,
            config: { idleTimeoutMs: 1000 },
          });
        }
      }
    }
    const rd = receiver.nextDeadline();
    if (rd !== null && rd <= now) receiver.handleTimeout(now);
    for (let out = receiver.pollDatagram(now); out; out = receiver.pollDatagram(now)) {
      checkOut(out.bytes, 'receiver');
      toSender.push({ at: now + DELAY_MS, source: out.source, bytes: out.bytes });
    }
    senders.forEach((sender, source) => {
      if (!sender) return;
      const sd = sender.nextDeadline();
      if (sd !== null && sd <= now) sender.handleTimeout(now);
      for (let k = 0; k < 4; k++) {
        const bytes = sender.pollDatagram(now);
        if (!bytes) break;
        const m = checkOut(bytes, `sender ${source}`);
        if (m.type === MessageType.DataUncoded || m.type === MessageType.DataRlnc) {
          const unit = m.type === MessageType.DataUncoded ? m.index : m.generation;
          if (unit < sender.windowStart || unit >= sender.windowEnd)
            throw new Error(`sender ${source} sent unit ${unit} outside [${sender.windowStart}, ${sender.windowEnd})`);
        }
        toReceiver.push({ at: now + DELAY_MS, source, bytes });
      }
    });
    receiver.stats();
    const quiet = senders.every((s) => !s || s.status !== 'active');
    if (receiver.status !== 'active' && quiet && toSender.length === 0 && tick > 400) break;
  }
  return { receiver, senders, object, injected, injectedValid, ticks: tick };
}

function describeOutcome(p: Params, o: Outcome): string {
  return (
    `params ${JSON.stringify(p)}: receiver ${o.receiver.status} ${o.receiver.error?.message ?? ''}; ` +
    `senders ${o.senders.map((s) => s?.status ?? '-').join(',')}; injected ${o.injected} ` +
    `(${o.injectedValid} valid for the transfer); ticks ${o.ticks}`
  );
}

const injectionsArb = (p: Params, minLength: number, maxLength: number) =>
  fc.array(
    fc.record({
      tick: fc.integer({ min: 0, max: 400 }),
      to: fc.constantFrom<'receiver' | 'sender'>('receiver', 'sender'),
      source: fc.oneof(
        fc.integer({ min: 0, max: p.sources - 1 }),
        fc.constantFrom(-1, p.sources, p.sources + 5, 32, 1e9, 0.5, -0, NaN, Infinity),
      ),
      bytes: hostileArb([TRANSFER, (TRANSFER ^ 0x80000000) >>> 0], p),
    }),
    { minLength, maxLength },
  );

describe('Receiver and Sender on hostile datagrams', () => {
  test('without hostile input the in-memory transfer completes (harness check)', () => {
    fc.assert(
      fc.property(paramsArb, (p) => {
        const o = runTransfer(p, [], true);
        if (o.receiver.status !== 'complete') throw new Error(describeOutcome(p, o));
        expect(Buffer.from(o.receiver.takeObject()).equals(Buffer.from(o.object))).toBe(true);
      }),
      { seed: 42, numRuns: 30 },
    );
  });

  test('nothing throws, whatever arrives (including datagrams that do change the transfer)', () => {
    const outcomes = { complete: 0, failed: 0 };
    fc.assert(
      fc.property(
        paramsArb.chain((p) => fc.tuple(fc.constant(p), injectionsArb(p, 0, 60))),
        ([p, injections]) => {
          const o = runTransfer(p, injections, false);
          // The transfer may legitimately fail (a forged STOP, META or ERROR), but it must end
          // in a clear state.
          if (o.receiver.status === 'active') throw new Error(`still active: ${describeOutcome(p, o)}`);
          if (o.receiver.status === 'failed' && !o.receiver.error)
            throw new Error(`failed without error: ${describeOutcome(p, o)}`);
          if (o.receiver.status === 'complete')
            expect(Buffer.from(o.receiver.takeObject()).equals(Buffer.from(o.object))).toBe(true);
          outcomes[o.receiver.status]++;
        },
      ),
      { seed: 42, numRuns: 60 },
    );
    // Both kinds of ending must have been exercised.
    expect(outcomes.complete).toBeGreaterThan(0);
    expect(outcomes.failed).toBeGreaterThan(0);
  });

  test('input a correct peer must ignore does not disturb the transfer: it completes byte-exact', () => {
    let injected = 0;
    let injectedValid = 0;
    fc.assert(
      fc.property(
        paramsArb.chain((p) => fc.tuple(fc.constant(p), injectionsArb(p, 20, 80))),
        ([p, injections]) => {
          const o = runTransfer(p, injections, true);
          injected += o.injected;
          injectedValid += o.injectedValid;
          if (o.receiver.status !== 'complete') throw new Error(describeOutcome(p, o));
          expect(Buffer.from(o.receiver.takeObject()).equals(Buffer.from(o.object))).toBe(true);
          for (const s of o.senders) if (s) expect(s.status).toBe('done');
        },
      ),
      { seed: 42, numRuns: 60 },
    );
    expect(injected).toBeGreaterThan(1500);
    expect(injectedValid).toBeGreaterThan(100);
  });

  test('a Receiver in every state survives arbitrary bytes for any source index', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('fresh', 'meta', 'partial', 'complete', 'failed'),
        fc.array(
          fc.tuple(
            fc.oneof(fc.integer({ min: -3, max: 40 }), fc.constantFrom(NaN, 0.5, 2 ** 40, -Infinity)),
            hostileArb([TRANSFER]),
          ),
          { minLength: 1, maxLength: 30 },
        ),
        (state, inputs) => {
          const object = new Uint8Array(500).map((_, i) => i);
          const receiver = new Receiver({
            transferId: TRANSFER,
            url: 'u',
            mode: 'uncoded',
            sourceCount: 2,
            window: 8,
            generationSize: 1,
            symbolSize: 100,
            codec: uncodedCodec,
            now: 0,
            sha256,
            // Quorum 1: source 0 alone brings it to each state (agreement is tested in wasm/test/integrity.test.ts).
            config: { maxObjectBytes: 64 * 1024, quorum: 1 },
          });
          const digests = unitDigests(object, new Layout('uncoded', 500, 100, 1), sha256);
          const meta = encodeMeta({
            transferId: TRANSFER,
            objectLength: 500,
            symbolSize: 100,
            generationSize: 1,
            mode: 'uncoded',
            digest: sha256(object),
            unitRoot: unitRoot(digests, sha256),
          });
          const data = (u: number) =>
            encodeDataUncoded({
              transferId: TRANSFER,
              seq: u,
              index: u,
              payload: object.subarray(u * 100, u * 100 + 100),
            });
          if (state !== 'fresh') {
            receiver.handleDatagram(0, meta, 1);
            receiver.handleDatagram(0, encodeDigests({ transferId: TRANSFER, first: 0, digests }), 1);
          }
          if (state === 'partial' || state === 'complete')
            for (let u = 0; u < (state === 'partial' ? 3 : 5); u++) receiver.handleDatagram(0, data(u), 2);
          if (state === 'failed') receiver.cancel();
          const before = receiver.status;
          let now = 10;
          for (const [source, bytes] of inputs) {
            receiver.handleDatagram(source, bytes, now);
            for (let out = receiver.pollDatagram(now); out; out = receiver.pollDatagram(now)) {
              if (!decode(out.bytes).ok) throw new Error('receiver emitted an undecodable datagram');
            }
            const d = receiver.nextDeadline();
            if (d !== null) receiver.handleTimeout(Math.max(now, d));
            now += 7;
          }
          receiver.stats();
          // A finished transfer stays finished.
          if (before !== 'active') expect(receiver.status).toBe(before);
          if (before === 'complete') expect(Buffer.from(receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
        },
      ),
      { seed: 42, numRuns: 500 },
    );
  });

  test('a Sender in every state survives arbitrary bytes', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<Mode>('uncoded', 'rlnc'),
        fc.constantFrom('fresh', 'sending', 'meta-acked', 'done'),
        fc.array(hostileArb([TRANSFER], { ...defaultParams, objectLength: 2000 }), { minLength: 1, maxLength: 30 }),
        (mode, state, inputs) => {
          const object = new Uint8Array(2000).map((_, i) => i * 3);
          const sender = new Sender({
            request: {
              type: MessageType.Request,
              transferId: TRANSFER,
              mode,
              scheduler: mode === 'uncoded' ? 'partitioned' : 'rarest',
              sourceIndex: 1,
              sourceCount: 3,
              window: 16,
              generationSize: 4,
              symbolSize: 32,
              url: 'u',
            },
            object,
            digest: sha256(object),
            codec: mode === 'uncoded' ? uncodedCodec : rlncCodec,
            random: seededRandom(3),
            now: 0,
          });
          const common = {
            transferId: TRANSFER,
            metaKnown: true,
            complete: false,
            largestSeq: NO_SEQ,
            ackDelay: 0,
            ackBits: 0,
            rateBps: 0,
            inFlightCap: UNLIMITED_IN_FLIGHT,
            weights: Uint8Array.of(1, 1, 1),
            wMin: 0,
          };
          if (state !== 'fresh') for (let i = 0; i < 1000 && sender.pollDatagram(1);) i++;
          if (state === 'meta-acked')
            sender.handleDatagram(
              mode === 'uncoded'
                ? encodeFeedbackUncoded({ ...common, bitmap: new Uint8Array(0), bitCount: 0 })
                : encodeFeedbackRlnc({ ...common, ranks: new Uint8Array(0) }),
              2,
            );
          if (state === 'done') sender.handleDatagram(encodeStop({ transferId: TRANSFER, reason: 0 }), 2);
          let now = 10;
          for (const bytes of inputs) {
            sender.handleDatagram(bytes, now);
            for (let i = 0; i < 200; i++) {
              const out = sender.pollDatagram(now);
              if (!out) break;
              const m = decode(out);
              if (!m.ok) throw new Error('sender emitted an undecodable datagram');
              if (m.value.type === MessageType.DataUncoded || m.value.type === MessageType.DataRlnc) {
                const unit = m.value.type === MessageType.DataUncoded ? m.value.index : m.value.generation;
                if (unit < sender.windowStart || unit >= sender.windowEnd)
                  throw new Error(`unit ${unit} outside the window`);
              }
            }
            const d = sender.nextDeadline();
            if (d !== null) {
              now = Math.max(now, d);
              sender.handleTimeout(now);
              const next = sender.nextDeadline();
              if (next !== null && !(next > now)) throw new Error(`nextDeadline ${next} not after ${now}`);
            }
            now += 3;
          }
          if (state === 'done') expect(sender.status).toBe('done');
        },
      ),
      { seed: 42, numRuns: 500 },
    );
  });
});
