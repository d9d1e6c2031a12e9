/**
 * The source endpoint: routing, admission by slots and bytes, STOP at any stage, refusals, shared
 * encoders, codec failures contained in one transfer, idle peers. Driven with real Receivers
 * (the client side of the core) and the TypeScript codecs.
 */
import { sha256 } from '@noble/hashes/sha256';
import {
  Admission,
  Codec,
  CONNECTION_TRANSFER_ID,
  decode,
  encodeRequest,
  encodeStop,
  ErrorCode,
  Layout,
  MessageType,
  objectLayout,
  Receiver,
  refusedLayout,
  RequestMessage,
  rlncCodec,
  SharedEncoders,
  SourceEndpoint,
  SourceEndpointOptions,
  SourceObject,
  StopReason,
  uncodedCodec,
  DEFAULT_SENDER_CONFIG,
} from '../src/internal';
import type { EndpointEvent } from '../src';

const OBJECT = makeObject(50_000, 3);
const DIGEST = sha256(OBJECT);

function makeObject(n: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

function request(over: Partial<RequestMessage> = {}): Uint8Array {
  return encodeRequest({
    transferId: 1,
    mode: 'rlnc',
    scheduler: 'partitioned',
    sourceIndex: 0,
    sourceCount: 1,
    window: 240,
    generationSize: 24,
    symbolSize: 1120,
    url: 'https://cdn.example/seg.ts',
    ...over,
  });
}

function endpoint(
  admission = new Admission({ maxTransfers: 64, maxPerClient: 4, memoryBytes: 64 << 20 }),
  over: Partial<SourceEndpointOptions> = {},
): { ep: SourceEndpoint; admission: Admission } {
  const ep = new SourceEndpoint({
    clientKey: 'client-1',
    codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
    admission,
    seed: () => 7,
    now: 0,
    ...over,
  });
  return { ep, admission };
}

function events(ep: SourceEndpoint): EndpointEvent[] {
  const out: EndpointEvent[] = [];
  for (let e = ep.pollEvent(); e; e = ep.pollEvent()) out.push(e);
  return out;
}

function controls(ep: SourceEndpoint): ReturnType<typeof decode>[] {
  const out = [];
  for (let d = ep.pollControl(); d; d = ep.pollControl()) out.push(decode(d));
  return out;
}

function objectFor(admission: Admission, bytes = OBJECT): SourceObject {
  return { bytes, digest: sha256(bytes), encoders: new SharedEncoders(bytes, admission.memory), cached: true };
}

/** Runs a receiver against the endpoint (no loss, 1 ms steps) until it completes; returns its status. */
function download(ep: SourceEndpoint, rx: Receiver, onStep?: (t: number) => void): string {
  for (let t = 0; t < 20_000 && rx.status === 'active'; t++) {
    for (let out = rx.pollDatagram(t); out; out = rx.pollDatagram(t)) ep.handleDatagram(out.bytes, t);
    onStep?.(t);
    const due = ep.nextDeadline();
    if (due !== null && due <= t) ep.handleTimeout(t);
    for (let i = 0; i < 64; i++) {
      const d = ep.pollDatagram(t);
      if (!d) break;
      rx.handleDatagram(0, d, t);
    }
    const rxDue = rx.nextDeadline();
    if (rxDue !== null && rxDue <= t) rx.handleTimeout(t);
  }
  // The final feedback (complete) ends the source's transfer.
  for (let out = rx.pollDatagram(20_000); out; out = rx.pollDatagram(20_000)) ep.handleDatagram(out.bytes, 20_000);
  return rx.status;
}

function receiver(transferId = 1, codec: Codec = rlncCodec): Receiver {
  return new Receiver({
    transferId,
    url: 'https://cdn.example/seg.ts',
    mode: codec.mode,
    sourceCount: 1,
    window: 240,
    generationSize: codec.mode === 'uncoded' ? 1 : 24,
    symbolSize: 1120,
    codec,
    now: 0,
  });
}

describe('SourceEndpoint', () => {
  test('a REQUEST asks for the object, then serves it to completion and gives every byte back', () => {
    const { ep, admission } = endpoint();
    const rx = receiver();
    const status = download(ep, rx, () => {
      for (const e of events(ep))
        if (e.type === 'fetch') {
          expect(e).toMatchObject({ transferId: 1, url: 'https://cdn.example/seg.ts', mode: 'rlnc' });
          ep.objectReady(e.transferId, objectFor(admission), 1);
        }
    });
    expect(status).toBe('complete');
    expect(rx.takeObject()).toEqual(OBJECT);
    const ended = events(ep).find((e) => e.type === 'ended');
    expect(ended).toMatchObject({ type: 'ended', outcome: 'done' });
    expect(admission.activeTransfers).toBe(0);
    expect(admission.memory.used).toBe(0);
    expect(ep.stats()).toMatchObject({ transfersStarted: 1, transfersActive: 0, transfersPending: 0 });
  });

  test('going away: the client hears it once for the connection; the transfer under way completes, later REQUESTs are refused', () => {
    const { ep, admission } = endpoint();
    const rx = receiver();
    const sent: ReturnType<typeof decode>[] = [];
    const status = download(ep, rx, (t) => {
      for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission), t);
      if (t === 1) {
        expect(ep.stats().transfersActive).toBe(1);
        ep.goAway('proxy draining: shutting down');
        ep.goAway('said twice');
        ep.handleDatagram(request({ transferId: 2 }), t);
      }
      sent.push(...controls(ep));
    });
    expect(status).toBe('complete');
    expect(rx.takeObject()).toEqual(OBJECT);
    const errors = sent.map((d) => (d.ok && d.value.type === MessageType.Error ? d.value : undefined));
    expect(errors).toEqual([
      {
        type: MessageType.Error,
        transferId: CONNECTION_TRANSFER_ID,
        code: ErrorCode.GoingAway,
        message: 'proxy draining: shutting down',
      },
      { type: MessageType.Error, transferId: 2, code: ErrorCode.GoingAway, message: 'proxy draining: shutting down' },
    ]);
    expect(ep.goingAway).toBe(true);
    expect(ep.stats()).toMatchObject({ transfersStarted: 1, transfersActive: 0, transfersPending: 0 });
    expect(admission.activeTransfers).toBe(0);
  });

  test('a REQUEST naming the connection (transferId 0) is refused, not started', () => {
    const { ep } = endpoint();
    ep.handleDatagram(request({ transferId: CONNECTION_TRANSFER_ID }), 0);
    const [error] = controls(ep);
    expect(error.ok && error.value.type === MessageType.Error && error.value.code).toBe(ErrorCode.BadRequest);
    expect(events(ep).some((e) => e.type === 'fetch')).toBe(false);
  });

  test('the next transfer on the connection starts from the path the last one measured, not from the initial window', () => {
    const { ep, admission } = endpoint();
    // Big enough for the client to measure and report a rate.
    const object = makeObject(500_000, 5);
    const serve = (t: number) => {
      for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission, object), t);
    };
    // A path with 10 ms each way, so the sender gets RTT samples and the client's rate reports.
    const rx = receiver(1);
    const inFlight: { at: number; toSource: boolean; bytes: Uint8Array }[] = [];
    let t = 0;
    for (; t < 20_000 && rx.status === 'active'; t++) {
      for (let out = rx.pollDatagram(t); out; out = rx.pollDatagram(t))
        inFlight.push({ at: t + 10, toSource: true, bytes: out.bytes });
      for (const d of inFlight.filter((x) => x.at <= t)) {
        inFlight.splice(inFlight.indexOf(d), 1);
        if (d.toSource) ep.handleDatagram(d.bytes, t);
        else rx.handleDatagram(0, d.bytes, t);
      }
      serve(t);
      if ((ep.nextDeadline() ?? Infinity) <= t) ep.handleTimeout(t);
      // One datagram per ms: a paced source, whose packet spacing the client's rate estimate reads.
      const d = ep.pollDatagram(t);
      if (d) inFlight.push({ at: t + 10, toSource: false, bytes: d });
      if ((rx.nextDeadline() ?? Infinity) <= t) rx.handleTimeout(t);
    }
    expect(rx.status).toBe('complete');
    for (let out = rx.pollDatagram(t); out; out = rx.pollDatagram(t)) ep.handleDatagram(out.bytes, t + 10);
    expect(events(ep).some((e) => e.type === 'ended')).toBe(true);
    expect(ep.stats().warmStarts).toBe(0);
    // A second REQUEST 1 s later: its sender starts with the measured path's window.
    ep.handleDatagram(request({ transferId: 2 }), t + 1000);
    serve(t + 1000);
    expect(ep.stats().warmStarts).toBe(1);
    expect(ep.sender(2)!.inFlightLimit).toBeGreaterThan(DEFAULT_SENDER_CONFIG.initialWindowPackets);
  });

  test('a source that knows its upload capacity starts at it; a remembered path still comes first', () => {
    const { ep, admission } = endpoint(undefined, { uploadCapBps: 1792 * 1024 });
    ep.handleDatagram(request({ transferId: 1 }), 0);
    for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission), 0);
    // One initial RTT (100 ms) at 1792 KB/s, with the sender's gain: far above the cold 16 packets.
    expect(ep.sender(1)!.inFlightLimit).toBeGreaterThan(4 * DEFAULT_SENDER_CONFIG.initialWindowPackets);
    expect(ep.stats()).toMatchObject({ capStarts: 1, warmStarts: 0 });
    const cold = endpoint().ep;
    cold.handleDatagram(request({ transferId: 1 }), 0);
    for (const e of events(cold)) if (e.type === 'fetch') cold.objectReady(e.transferId, objectFor(admission), 0);
    expect(cold.sender(1)!.inFlightLimit).toBe(DEFAULT_SENDER_CONFIG.initialWindowPackets);
    expect(cold.stats()).toMatchObject({ capStarts: 0, warmStarts: 0 });
    ep.rememberPath({ rateBps: 100_000, minRttMs: 40 }, 1);
    ep.handleDatagram(request({ transferId: 2 }), 2);
    for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission), 2);
    expect(ep.stats()).toMatchObject({ capStarts: 1, warmStarts: 1 });
  });

  test('a path estimate older than pathMemoryMs is not used', () => {
    const { ep, admission } = endpoint(undefined, { limits: { pathMemoryMs: 5000 } });
    ep.rememberPath({ rateBps: 2_000_000, minRttMs: 40 }, 0);
    ep.handleDatagram(request({ transferId: 1 }), 5001);
    for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission), 5001);
    expect(ep.stats().warmStarts).toBe(0);
    expect(ep.sender(1)!.inFlightLimit).toBe(DEFAULT_SENDER_CONFIG.initialWindowPackets);
    ep.rememberPath({ rateBps: 2_000_000, minRttMs: 40 }, 6000);
    ep.handleDatagram(request({ transferId: 2, sourceIndex: 0 }), 6001);
    for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission), 6001);
    expect(ep.stats().warmStarts).toBe(1);
  });

  test('a STOP while the object is fetched frees the slot at once and withdraws the fetch', () => {
    const { ep, admission } = endpoint();
    ep.handleDatagram(request(), 0);
    expect(events(ep)).toEqual([{ type: 'fetch', transferId: 1, url: 'https://cdn.example/seg.ts', mode: 'rlnc' }]);
    expect(admission.activeTransfers).toBe(1);
    ep.handleDatagram(encodeStop({ transferId: 1, reason: StopReason.Cancelled }), 1);
    expect(events(ep)).toEqual([{ type: 'cancel-fetch', transferId: 1 }]);
    expect(admission.activeTransfers).toBe(0);
    expect(admission.memory.used).toBe(0);
    // The object arriving later starts nothing.
    ep.objectReady(1, objectFor(admission), 2);
    expect(events(ep)).toEqual([]);
    expect(ep.pollDatagram(2)).toBeNull();
  });

  test('a REQUEST/STOP storm never holds more than the per-client limit of fetches', () => {
    const { ep, admission } = endpoint();
    let fetching = 0;
    let most = 0;
    for (let id = 1; id <= 1000; id++) {
      ep.handleDatagram(request({ transferId: id, url: `https://cdn.example/${id}.ts` }), id);
      // An attacker that sometimes lets requests pile up before stopping them.
      if (id % 7 !== 0) ep.handleDatagram(encodeStop({ transferId: id, reason: StopReason.Cancelled }), id);
      for (const e of events(ep)) fetching += e.type === 'fetch' ? 1 : e.type === 'cancel-fetch' ? -1 : 0;
      most = Math.max(most, fetching);
    }
    expect(most).toBeLessThanOrEqual(4);
    expect(admission.activeTransfers).toBe(fetching);
    // Refused ones got an ERROR Overloaded, and stay bounded in the control queue.
    const errors = controls(ep);
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.length).toBeLessThanOrEqual(64);
    expect(errors.every((d) => d.ok && d.value.type === MessageType.Error)).toBe(true);
    ep.close(2000);
    expect(events(ep).filter((e) => e.type === 'cancel-fetch')).toHaveLength(fetching);
    expect(admission.activeTransfers).toBe(0);
    expect(admission.memory.used).toBe(0);
  });

  test.each([
    [{ symbolSize: 16 }, ErrorCode.Unsupported, /symbol size 16 is below/],
    [{ mode: 'fountain' as const }, ErrorCode.Unsupported, /mode fountain is not served/],
    [{ mode: 'uncoded' as const, scheduler: 'rarest' as const }, ErrorCode.Unsupported, /scheduler rarest/],
  ])('refuses %j with ERROR %d and keeps no state', (over, code, message) => {
    const { ep, admission } = endpoint();
    ep.handleDatagram(request(over), 0);
    const [error] = controls(ep);
    expect(error.ok && error.value.type === MessageType.Error && error.value.code).toBe(code);
    expect(error.ok && error.value.type === MessageType.Error && error.value.message).toMatch(message);
    expect(admission.activeTransfers).toBe(0);
    expect(events(ep).map((e) => e.type)).toEqual(['refused']);
  });

  test('client ids of one network hold at most its share: a victim elsewhere is still served (issue 31, attack 2)', () => {
    // 8 MiB of transfer memory shared by at least 8 networks: 1 MiB and 8 transfers each.
    const admission = new Admission({ maxTransfers: 64, maxPerClient: 16, memoryBytes: 8 << 20, minNetworks: 8 });
    const attackers = ['free-id-1', 'free-id-2'].map(
      (id) => endpoint(admission, { clientKey: id, networkKey: '198.51.100.0/24' }).ep,
    );
    let refused = 0;
    for (const [a, ep] of attackers.entries()) {
      for (let id = 1; id <= 16; id++)
        ep.handleDatagram(request({ transferId: id, url: `https://x.example/${a}/${id}` }), 0);
      // Every admitted REQUEST gets a 512 KiB object the cache does not hold: the transfer pays for it.
      for (const e of events(ep))
        if (e.type === 'fetch')
          ep.objectReady(
            e.transferId,
            { ...objectFor(admission, makeObject(512 << 10, e.transferId)), cached: false },
            1,
          );
      refused += controls(ep).filter(
        (d) => d.ok && d.value.type === MessageType.Error && d.value.code === ErrorCode.Overloaded,
      ).length;
    }
    // The network holds at most 1 MiB and 8 transfers of the proxy, whatever its ids did.
    expect(admission.memory.used).toBeLessThanOrEqual(1 << 20);
    expect(admission.activeTransfers).toBeLessThanOrEqual(8);
    expect(refused).toBeGreaterThanOrEqual(24);
    const victim = endpoint(admission, { clientKey: 'victim', networkKey: '203.0.113.0/24' }).ep;
    const rx = receiver();
    const status = download(victim, rx, () => {
      for (const e of events(victim)) if (e.type === 'fetch') victim.objectReady(e.transferId, objectFor(admission), 1);
    });
    expect(status).toBe('complete');
    expect(rx.takeObject()).toEqual(OBJECT);
  });

  test('an object too big for the memory budget is refused with Overloaded and charges nothing', () => {
    const admission = new Admission({ maxTransfers: 8, maxPerClient: 8, memoryBytes: 200 * 1024 });
    const { ep } = endpoint(admission);
    ep.handleDatagram(request(), 0);
    events(ep);
    // Not cached: the transfer would have to pay for the 2 MB itself.
    const big = makeObject(2 << 20, 5);
    ep.objectReady(1, { ...objectFor(admission, big), cached: false }, 1);
    const [error] = controls(ep);
    expect(error.ok && error.value.type === MessageType.Error && error.value.code).toBe(ErrorCode.Overloaded);
    expect(admission.memory.used).toBe(0);
    expect(admission.activeTransfers).toBe(0);
  });

  test('transfers of one object share one encoder, freed when the last one ends', () => {
    const admission = new Admission({ maxTransfers: 8, maxPerClient: 8, memoryBytes: 64 << 20 });
    const encoders = new SharedEncoders(OBJECT, admission.memory);
    const object: SourceObject = { bytes: OBJECT, digest: DIGEST, encoders, cached: true };
    const a = endpoint(admission).ep;
    const b = endpoint(admission, { clientKey: 'client-2' }).ep;
    a.handleDatagram(request(), 0);
    b.handleDatagram(request(), 0);
    a.objectReady(1, object, 0);
    b.objectReady(1, object, 0);
    expect(a.pollDatagram(0)).not.toBeNull();
    expect(b.pollDatagram(0)).not.toBeNull();
    expect(encoders.size).toBe(1);
    a.handleDatagram(encodeStop({ transferId: 1, reason: StopReason.Complete }), 1);
    expect(encoders.size).toBe(1);
    b.close(2);
    expect(encoders.size).toBe(0);
    expect(admission.memory.used).toBe(0);
  });

  test('a codec that fails mid-transfer ends that transfer with an ERROR; the others complete', () => {
    const admission = new Admission({ maxTransfers: 8, maxPerClient: 8, memoryBytes: 64 << 20 });
    // Fault injection at the codec boundary: an encoder that runs out of memory after 5 packets,
    // as wirehair does when its heap is full.
    let encoded = 0;
    const exhausting: Codec = {
      ...rlncCodec,
      name: 'rlnc-exhausting',
      createEncoder: (object, layout) => {
        const inner = rlncCodec.createEncoder(object, layout);
        return {
          mode: inner.mode,
          encodeInto: (unit, key, out) => {
            if (++encoded > 5) throw new Error('out-of-memory: cannot allocate in the wasm heap');
            inner.encodeInto(unit, key, out);
          },
          free: () => inner.free(),
        };
      },
    };
    const { ep } = endpoint(admission, { codecs: { rlnc: exhausting, uncoded: uncodedCodec } });
    const broken = receiver(1);
    const healthy = receiver(2, uncodedCodec);
    ep.handleDatagram(request({ transferId: 1 }), 0);
    ep.handleDatagram(request({ transferId: 2, mode: 'uncoded', scheduler: 'partitioned', generationSize: 1 }), 0);
    for (const e of events(ep)) if (e.type === 'fetch') ep.objectReady(e.transferId, objectFor(admission), 0);
    let brokenError: string | undefined;
    for (let t = 0; t < 20_000 && healthy.status === 'active'; t++) {
      for (const rx of [broken, healthy])
        for (let out = rx.pollDatagram(t); out; out = rx.pollDatagram(t)) ep.handleDatagram(out.bytes, t);
      for (let d = ep.pollControl(); d; d = ep.pollControl()) {
        const m = decode(d);
        if (m.ok && m.value.type === MessageType.Error) brokenError = m.value.message;
        broken.handleDatagram(0, d, t);
      }
      for (let d = ep.pollDatagram(t); d; d = ep.pollDatagram(t)) {
        const m = decode(d);
        (m.ok && m.value.transferId === 2 ? healthy : broken).handleDatagram(0, d, t);
      }
      const due = ep.nextDeadline();
      if (due !== null && due <= t) ep.handleTimeout(t);
      for (const rx of [broken, healthy]) {
        const d = rx.nextDeadline();
        if (d !== null && d <= t) rx.handleTimeout(t);
      }
    }
    expect(healthy.status).toBe('complete');
    expect(healthy.takeObject()).toEqual(OBJECT);
    expect(brokenError).toMatch(/transfer failed at the proxy: out-of-memory/);
    expect(broken.status).toBe('failed');
    expect(ep.stats().codecFailures).toBe(1);
    expect(events(ep).some((e) => e.type === 'ended' && e.outcome === 'codec-error')).toBe(true);
  });

  test('a peer with no transfer and no datagram is reported idle once', () => {
    const { ep, admission } = endpoint(undefined, { limits: { idleTimeoutMs: 1000 } });
    expect(ep.nextDeadline()).toBe(1000);
    ep.handleDatagram(request(), 500);
    events(ep);
    // A transfer waiting for its object is not idle.
    expect(ep.nextDeadline()).toBeNull();
    ep.objectFailed(1, ErrorCode.OriginNotFound, 'origin answered 404', 600);
    expect(admission.activeTransfers).toBe(0);
    expect(ep.nextDeadline()).toBe(1600);
    ep.handleTimeout(1599);
    expect(events(ep).map((e) => e.type)).toEqual(['refused']);
    ep.handleTimeout(1600);
    expect(events(ep)).toEqual([{ type: 'idle' }]);
    expect(ep.nextDeadline()).toBeNull();
  });

  test('malformed datagrams and datagrams of unknown transfers are counted and dropped', () => {
    const { ep } = endpoint();
    ep.handleDatagram(new Uint8Array([1, 2, 3]), 0);
    ep.handleDatagram(encodeStop({ transferId: 99, reason: StopReason.Cancelled }), 0);
    expect(ep.stats()).toMatchObject({ malformed: 1, unknownTransfer: 1, transfersStarted: 0 });
    expect(events(ep)).toEqual([]);
  });

  test('a repeated REQUEST while fetching starts no second fetch; a refused one is answered from memory', () => {
    const { ep } = endpoint();
    ep.handleDatagram(request(), 0);
    ep.handleDatagram(request(), 1);
    expect(events(ep).filter((e) => e.type === 'fetch')).toHaveLength(1);
    ep.objectFailed(1, ErrorCode.OriginNotFound, 'origin answered 404', 2);
    controls(ep);
    events(ep);
    ep.handleDatagram(request(), 3);
    expect(events(ep)).toEqual([]);
    const [again] = controls(ep);
    expect(again.ok && again.value.type === MessageType.Error && again.value.code).toBe(ErrorCode.OriginNotFound);
  });
  test.each(['rlnc', 'uncoded'] as const)(
    'reusing datagram memory (%s): each datagram is the one a fresh array carries, DATA built in one buffer',
    (mode) => {
      const codec = mode === 'rlnc' ? rlncCodec : uncodedCodec;
      const plain = endpoint();
      const reusing = endpoint();
      reusing.ep.reuseDatagramMemory(true);
      const rx = receiver(1, codec);
      const generationSize = mode === 'rlnc' ? 24 : 1;
      for (const x of [plain, reusing]) x.ep.handleDatagram(request({ mode, generationSize }), 0);
      const dataBuffers = new Set<ArrayBufferLike>();
      let datagrams = 0;
      for (let t = 1; t < 20_000 && rx.status === 'active'; t++) {
        for (const x of [plain, reusing])
          for (const e of events(x.ep))
            if (e.type === 'fetch') x.ep.objectReady(e.transferId, objectFor(x.admission), t);
        for (let out = rx.pollDatagram(t); out; out = rx.pollDatagram(t))
          for (const x of [plain, reusing]) x.ep.handleDatagram(out.bytes, t);
        for (const x of [plain, reusing]) {
          const due = x.ep.nextDeadline();
          if (due !== null && due <= t) x.ep.handleTimeout(t);
        }
        for (let i = 0; i < 64; i++) {
          const a = plain.ep.pollDatagram(t);
          const b = reusing.ep.pollDatagram(t);
          if (!a || !b) {
            expect(b).toBe(a);
            break;
          }
          expect(Buffer.from(b).equals(Buffer.from(a))).toBe(true);
          const type = decode(b);
          if (type.ok && type.value.type === (mode === 'rlnc' ? MessageType.DataRlnc : MessageType.DataUncoded))
            dataBuffers.add(b.buffer);
          datagrams++;
          // The receiver keeps what it is given: a copy (the next poll overwrites the buffer).
          rx.handleDatagram(0, b.slice(), t);
        }
        const rxDue = rx.nextDeadline();
        if (rxDue !== null && rxDue <= t) rx.handleTimeout(t);
      }
      expect(rx.status).toBe('complete');
      expect(rx.takeObject()).toEqual(OBJECT);
      expect(datagrams).toBeGreaterThan(OBJECT.length / 1120);
      expect(dataBuffers.size).toBe(1);
    },
  );
});

describe('layout rules (a REQUEST and a staging hint meet the same)', () => {
  const rules = { codecs: { rlnc: rlncCodec }, minSymbolSize: 256 };

  test('a mode with no codec, a scheduler of another mode, a symbol below the smallest: refused, in that order', () => {
    const unsupported = (message: string) => ({ code: ErrorCode.Unsupported, message });
    expect(refusedLayout(rules, { mode: 'uncoded', scheduler: 'rarest', symbolSize: 16 })).toEqual(
      unsupported('mode uncoded is not served by this proxy'),
    );
    expect(refusedLayout(rules, { mode: 'rlnc', scheduler: 'random', symbolSize: 16 })).toEqual(
      unsupported('scheduler random does not support mode rlnc'),
    );
    expect(refusedLayout(rules, { mode: 'rlnc', scheduler: 'rarest', symbolSize: 16 })).toEqual(
      unsupported("symbol size 16 is below this proxy's minimum of 256"),
    );
    // A staging hint names no scheduler: only the rest is checked.
    expect(refusedLayout(rules, { mode: 'rlnc', symbolSize: 256 })).toBeUndefined();
  });

  test('objectLayout lays out a served layout as the Layout of the object, and refuses the others', () => {
    const layout = objectLayout(rules, { mode: 'rlnc', symbolSize: 1000, generationSize: 24 }, 50_000);
    expect(layout).toBeInstanceOf(Layout);
    expect(layout).toMatchObject({ mode: 'rlnc', symbolCount: 50, symbolsPerUnit: 24, unitCount: 3 });
    expect(objectLayout(rules, { mode: 'rlnc', symbolSize: 128, generationSize: 24 }, 50_000)).toEqual({
      code: ErrorCode.Unsupported,
      message: "symbol size 128 is below this proxy's minimum of 256",
    });
  });
});
