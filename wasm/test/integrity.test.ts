/**
 * Integrity against hostile sources (issue 9, findings 1 and 5): real Senders and one Receiver
 * wired through a deterministic in-memory network (fixed delay per source, no loss), with hostile
 * sources that speak the wire protocol: one that answers first with another object's META, one
 * with a valid META whose DATA is corrupt, one whose DIGESTS lie. In every mode the hostile source
 * is identified and excluded and the download completes byte-exact from the honest ones.
 * It lives with the WebAssembly codecs because the fountain mode needs wirehair.
 */
import { createHash } from 'node:crypto';
import { loadNodeCodecs } from '@mutp/wasm/node';
import {
  Codec,
  decode,
  encodeDigests,
  encodeMeta,
  Layout,
  MessageType,
  Mode,
  Receiver,
  RequestMessage,
  seededRandom,
  Sender,
  unitDigests,
  unitRoot,
  UNIT_DIGEST_BYTES,
  DATA_FOUNTAIN_HEADER_BYTES,
  DATA_RLNC_HEADER_BYTES,
  DATA_UNCODED_HEADER_BYTES,
} from '@mutp/shared';

const TRANSFER = 0x1a7e0001;
const SYMBOL = 256;
const G = 8;

let codecs: Record<Mode, Codec>;
beforeAll(async () => {
  codecs = await loadNodeCodecs();
});

const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());

function makeObject(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  return Uint8Array.from({ length }, () => random() & 0xff);
}

/** A source as the network sees it: takes client datagrams, yields datagrams to send. */
interface Source {
  handle(bytes: Uint8Array, now: number): void;
  poll(now: number): Uint8Array | null;
  tick(now: number): void;
}

function honest(object: Uint8Array, request: RequestMessage, mode: Mode, seed: number): Sender {
  return new Sender({
    request,
    object,
    digest: sha256(object),
    codec: codecs[mode],
    random: seededRandom(seed),
    now: 0,
    sha256,
  });
}

function asSource(sender: Sender): Source {
  return {
    handle: (b, now) => sender.handleDatagram(b, now),
    poll: (now) => sender.pollDatagram(now),
    tick: (now) => {
      const d = sender.nextDeadline();
      if (d !== null && d <= now) sender.handleTimeout(now);
    },
  };
}

/** An honest sender whose DATA payloads are altered (valid META and DIGESTS). */
function corruptingData(sender: Sender, every: number): Source {
  let n = 0;
  return {
    ...asSource(sender),
    poll(now) {
      const d = sender.pollDatagram(now);
      if (!d) return d;
      const header = { 3: DATA_UNCODED_HEADER_BYTES, 4: DATA_RLNC_HEADER_BYTES, 5: DATA_FOUNTAIN_HEADER_BYTES }[d[1]];
      if (header !== undefined && n++ % every === 0) {
        const bad = d.slice();
        bad[header + (n % (bad.length - header))] ^= 0x5a;
        return bad;
      }
      return d;
    },
  };
}

interface Run {
  receiver: Receiver;
  object: Uint8Array;
}

/**
 * Runs a download: `sources[i]` is reached with a one-way delay of delays[i] ms, each sends at
 * most `perMs` datagrams per ms. Returns when the receiver is done (or fails the test after 60 s
 * of simulated time).
 */
function download(
  mode: Mode,
  object: Uint8Array,
  make: (request: RequestMessage, i: number) => Source,
  delays: number[],
): Run {
  const n = delays.length;
  const receiver = new Receiver({
    transferId: TRANSFER,
    url: 'https://origin.example/seg',
    mode,
    sourceCount: n,
    window: 64,
    generationSize: G,
    symbolSize: SYMBOL,
    codec: codecs[mode],
    now: 0,
    sha256,
  });
  const sources: (Source | undefined)[] = new Array(n);
  // In flight: [deliverAt, to (-1 = receiver, else source), from, bytes]
  let queue: [number, number, number, Uint8Array][] = [];
  for (let now = 0; now < 60_000; now++) {
    const due = queue.filter((q) => q[0] <= now);
    queue = queue.filter((q) => q[0] > now);
    for (const [, to, from, bytes] of due) {
      if (to < 0) receiver.handleDatagram(from, bytes, now);
      else {
        if (!sources[to]) {
          const m = decode(bytes);
          if (m.ok && m.value.type === MessageType.Request) sources[to] = make(m.value, to);
        }
        sources[to]?.handle(bytes, now);
      }
    }
    const deadline = receiver.nextDeadline();
    if (deadline !== null && deadline <= now) receiver.handleTimeout(now);
    for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now))
      queue.push([now + delays[d.source], d.source, -1, d.bytes]);
    if (receiver.status !== 'active') return { receiver, object };
    sources.forEach((s, i) => {
      if (!s) return;
      s.tick(now);
      for (let k = 0; k < 4; k++) {
        const b = s.poll(now);
        if (!b) break;
        queue.push([now + delays[i], -1, i, b]);
      }
    });
  }
  throw new Error(`download did not end in 60 s of simulated time: ${JSON.stringify(receiver.stats().sources)}`);
}

const MODES: Mode[] = ['uncoded', 'rlnc', 'fountain'];

describe.each(MODES)('%s', (mode) => {
  const object = makeObject(40_000 + 123, 7);

  test('a source answering first with another object loses to the agreeing sources', () => {
    const fake = makeObject(object.length, 8);
    const run = download(
      mode,
      object,
      (request, i) => asSource(honest(i === 0 ? fake : object, request, mode, 100 + i)),
      [1, 10, 10, 10],
    );
    expect(run.receiver.error).toBeUndefined();
    expect(run.receiver.status).toBe('complete');
    expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(run.receiver.polluters().map((p) => p.source)).toEqual([0]);
    expect(run.receiver.stats().sources[0].state).toBe('dropped');
  });

  test('a source with a valid META and corrupt DATA is identified, excluded, and the download completes', () => {
    const run = download(
      mode,
      object,
      (request, i) => {
        const s = honest(object, request, mode, 200 + i);
        return i === 2 ? corruptingData(s, 3) : asSource(s);
      },
      [5, 5, 5, 5],
    );
    expect(run.receiver.error).toBeUndefined();
    expect(run.receiver.status).toBe('complete');
    expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(run.receiver.polluters().map((p) => p.source)).toEqual([2]);
    expect(run.receiver.polluters()[0].reason).toMatch(/unit digest/);
    // Nobody honest was blamed.
    for (const i of [0, 1, 3]) expect(run.receiver.stats().sources[i].polluter).toBe(false);
  });

  test('a source whose DIGESTS do not hash to its unit root is excluded', () => {
    const run = download(
      mode,
      object,
      (request, i) => {
        const s = honest(object, request, mode, 300 + i);
        if (i !== 1) return asSource(s);
        const src = asSource(s);
        return {
          ...src,
          poll(now) {
            const d = s.pollDatagram(now);
            if (d && d[1] === MessageType.Digests) {
              const bad = d.slice();
              bad[bad.length - 1] ^= 1;
              return bad;
            }
            return d;
          },
        };
      },
      // It answers first, so its list is complete before anyone else's.
      [5, 1, 5],
    );
    expect(run.receiver.status).toBe('complete');
    expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(run.receiver.polluters().map((p) => p.source)).toEqual([1]);
  });

  test('two sources that disagree (nobody else to ask) fail with metadata-conflict instead of trusting one', () => {
    const fake = makeObject(object.length, 9);
    const run = download(
      mode,
      object,
      (request, i) => asSource(honest(i === 0 ? fake : object, request, mode, 400 + i)),
      [1, 5],
    );
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-conflict');
  });
});

describe('quorum', () => {
  test('a source that never answers stops counting after agreementWaitMs: the others complete', () => {
    const object = makeObject(20_000, 6);
    const silent: Source = { handle: () => undefined, tick: () => undefined, poll: () => null };
    const run = download(
      'rlnc',
      object,
      (request, i) => (i === 2 ? silent : asSource(honest(object, request, 'rlnc', 600 + i))),
      [5, 5, 5],
    );
    expect(run.receiver.status).toBe('complete');
    expect(run.receiver.polluters()).toEqual([]);
  });

  test('an identity accepted alone (the others silent) fails when a late honest source disagrees', () => {
    const object = makeObject(200_000, 6);
    const fake = makeObject(200_000, 7);
    // The honest sources answer only after agreementWaitMs (as while fetching a cold object).
    const late = (s: Source, from: number): Source => ({
      handle: (b, now) => (now >= from ? s.handle(b, now) : undefined),
      tick: (now) => (now >= from ? s.tick(now) : undefined),
      poll: (now) => (now >= from ? s.poll(now) : null),
    });
    const run = download(
      'rlnc',
      object,
      (request, i) => {
        if (i === 0) {
          // Slow enough that the download is not over when the honest ones answer.
          const rogue = asSource(honest(fake, request, 'rlnc', 800));
          return { ...rogue, poll: (now) => (now % 4 === 0 ? rogue.poll(now) : null) };
        }
        return late(asSource(honest(object, request, 'rlnc', 800 + i)), 1200);
      },
      [1, 5, 5],
    );
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-conflict');
  });

  test('with the only other source silent, a lone first-META attacker still cannot win against an honest one', () => {
    const object = makeObject(20_000, 6);
    const fake = makeObject(20_000, 7);
    const silent: Source = { handle: () => undefined, tick: () => undefined, poll: () => null };
    const run = download(
      'rlnc',
      object,
      (request, i) => (i === 2 ? silent : asSource(honest(i === 0 ? fake : object, request, 'rlnc', 700 + i))),
      [1, 5, 5],
    );
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-conflict');
  });

  test('one source is trusted alone when it is the only one (documented)', () => {
    const object = makeObject(5000, 3);
    const run = download('rlnc', object, (request, i) => asSource(honest(object, request, 'rlnc', i)), [5]);
    expect(run.receiver.status).toBe('complete');
  });

  test('a hand-built META + DIGESTS for a forged object, sent first, does not win', () => {
    const object = makeObject(20_000, 4);
    const forged = makeObject(20_000, 5);
    const layout = new Layout('rlnc', forged.length, SYMBOL, G);
    const digests = unitDigests(forged, layout, sha256);
    // A hostile source that never sends data: only the forged identity, as fast as it can.
    const forger: Source = {
      handle: () => undefined,
      tick: () => undefined,
      poll: (() => {
        let sent = false;
        return () => {
          if (sent) return null;
          sent = true;
          return encodeMeta({
            transferId: TRANSFER,
            objectLength: forged.length,
            symbolSize: SYMBOL,
            generationSize: G,
            mode: 'rlnc',
            digest: sha256(forged),
            unitRoot: unitRoot(digests, sha256),
          });
        };
      })(),
    };
    expect(digests.length / UNIT_DIGEST_BYTES).toBeLessThan(64);
    encodeDigests({ transferId: TRANSFER, first: 0, digests }); // well-formed, never needed
    const run = download(
      'rlnc',
      object,
      (request, i) => (i === 0 ? forger : asSource(honest(object, request, 'rlnc', 500 + i))),
      [1, 5, 5],
    );
    expect(run.receiver.status).toBe('complete');
    expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(run.receiver.polluters().map((p) => p.source)).toEqual([0]);
  });
});
