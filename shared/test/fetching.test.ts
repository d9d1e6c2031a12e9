/**
 * FETCHING (docs/protocol.md §4.2c; issue 31, races): a source still getting the object from the
 * origin says so, signed, and the client waits for its META past agreementWaitMs, within a bound.
 * The downloads here run the real SourceEndpoint (the proxy's side) and the real Receiver over an
 * in-memory network with fake time; only the origin is scripted (when each source's fetch ends).
 */
import { generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import fc from 'fast-check';
import {
  Admission,
  ALL_CAPABILITIES,
  AssertedRequest,
  DEFAULT_ENDPOINT_LIMITS,
  decode,
  encode,
  encodeFetching,
  Feature,
  FETCHING_BYTES,
  fetchingAssertionMessage,
  FetchingMessage,
  LEGACY_CAPABILITIES,
  hasFeature,
  MAX_DATAGRAM_BYTES,
  MessageType,
  Mode,
  Receiver,
  rlncCodec,
  SourceEndpoint,
  uncodedCodec,
  verifyEd25519,
  verifyFetching,
  WireError,
  withoutFeatures,
} from '../src/internal';
import { DEFAULT_RECEIVER_CONFIG } from '../src/receiver/config';
import { DEFAULT_FETCHING_WAIT_MS } from '../src/receiver/config';
import { IdentityQuorum } from '../src/receiver/quorum';
import { Source } from '../src/receiver/source';
import { objectOf } from './helpers/fake-host';
import { runOverNetwork } from './helpers/endpoint-network';

const URL_ = 'https://cdn.example/v/seg-1.ts';
const TRANSFER = 9;
const ONE_WAY_MS = 5;
/** Past the 5 s bound a FETCHING buys (DEFAULT_FETCHING_WAIT_MS), with room to spare. */
const RUN_LIMIT_MS = 12_000;

interface Key {
  proxyId: string;
  publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

function makeKey(proxyId: string): Key {
  const pair = generateKeyPairSync('ed25519');
  const jwk = pair.publicKey.export({ format: 'jwk' });
  const privateKey: KeyObject = pair.privateKey;
  return {
    proxyId,
    publicKey: new Uint8Array(Buffer.from(jwk.x as string, 'base64url')),
    sign: (message) => new Uint8Array(sign(null, message, privateKey)),
  };
}

/** One proxy: which bytes its origin fetch yields and after how long (never: it never ends). */
interface ProxySpec {
  object: Uint8Array;
  fetchMs: number | 'never';
  /** Its endpoint's own features switched off (a proxy one release behind). */
  disabled?: Feature[];
  /** Signs with this key instead of its own (the key origo published stays its own). */
  signWith?: Key;
}

interface RunResult {
  receiver: Receiver;
  endpoints: SourceEndpoint[];
  /** When the receiver stopped being active (complete or failed). */
  endedAt: number;
  /** FETCHING datagrams that reached the client, per source. */
  fetchingSeen: number[];
  /** Ed25519 verifications the client made (METAs and FETCHINGs). */
  verifications: number;
}

/** A download of `proxies[i]`'s objects by one Receiver, every datagram ONE_WAY_MS away. */
function run(
  mode: Mode,
  proxies: ProxySpec[],
  client: { disabled?: Feature[]; fetchingWaitMs?: number } = {},
): RunResult {
  const keys = proxies.map((_, i) => makeKey(`edge-${i}`));
  let verifications = 0;
  const receiver = new Receiver({
    verifySignature: (signature, message, publicKey) => {
      verifications++;
      return verifyEd25519(signature, message, publicKey);
    },
    transferId: TRANSFER,
    url: URL_,
    mode,
    sourceCount: proxies.length,
    window: 64,
    generationSize: 8,
    symbolSize: 256,
    codec: mode === 'rlnc' ? rlncCodec : uncodedCodec,
    now: 0,
    signers: keys.map(({ proxyId, publicKey }) => ({ proxyId, publicKey })),
    sourceCapabilities: proxies.map((p) => withoutFeatures(p.disabled)),
    capabilities: withoutFeatures(client.disabled),
    ...(client.fetchingWaitMs !== undefined ? { config: { fetchingWaitMs: client.fetchingWaitMs } } : {}),
  });
  const admissions = proxies.map(() => new Admission({ maxTransfers: 8, maxPerClient: 8, memoryBytes: 64 << 20 }));
  const endpoints = proxies.map(
    (p, i) =>
      new SourceEndpoint({
        clientKey: 'client-1',
        codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
        admission: admissions[i],
        seed: () => 11 + i,
        now: 0,
        signer: p.signWith ?? keys[i],
        disabledFeatures: p.disabled,
      }),
  );
  const fetchingSeen = proxies.map(() => 0);
  const endedAt = runOverNetwork(
    receiver,
    proxies.map((p, i) => ({ endpoint: endpoints[i], admission: admissions[i], object: p.object, fetchMs: p.fetchMs })),
    {
      transferId: TRANSFER,
      oneWayMs: ONE_WAY_MS,
      limitMs: RUN_LIMIT_MS,
      toClient: (source, bytes) => {
        if (bytes[1] === MessageType.Fetching) fetchingSeen[source]++;
      },
    },
  );
  return { receiver, endpoints, endedAt, fetchingSeen, verifications };
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

describe.each<Mode>(['rlnc', 'uncoded'])('%s', (mode) => {
  // 3 KB: the rogues (5 ms away, answering from memory) complete it in a few tens of ms.
  const genuine = objectOf(3_000, 21);
  const fake = objectOf(3_000, 22);

  test('two agreeing rogues finish a small object while the honest fetch takes 2 s: a conflict, never their object', () => {
    const r = run(mode, [
      { object: fake, fetchMs: 0 },
      { object: fake, fetchMs: 0 },
      { object: genuine, fetchMs: 2_000 },
    ]);
    // The honest proxy told the client it was fetching (answering the REQUESTs it repeated).
    expect(r.endpoints[2].stats().fetchingSent).toBeGreaterThan(0);
    expect(r.fetchingSeen[2]).toBeGreaterThan(0);
    // Before FETCHING the hold ended 1 s after the first META and the rogues' object was taken.
    expect(r.receiver.status).toBe('failed');
    expect(r.receiver.error?.code).toBe('metadata-conflict');
    // Decided by the honest META (fetch 2 s + a round trip), not by a timer.
    expect(r.endedAt).toBeGreaterThanOrEqual(2_000);
    expect(r.endedAt).toBeLessThan(2_100);
    // Both sides signed: the client holds the evidence origo judges against the origin.
    expect(
      r.receiver
        .conflictEvidence()
        .map((e) => e.source)
        .sort(),
    ).toEqual([0, 1, 2]);
    expect(r.receiver.polluters()).toEqual([]);
  });

  test('honest sources with one slow fetch: the object, once the slow META agrees', () => {
    const r = run(mode, [
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 2_000 },
    ]);
    expect(r.receiver.status).toBe('complete');
    expect(sameBytes(r.receiver.takeObject(), genuine)).toBe(true);
    // The cost: held until the slow source's META (about 2 s), where the 1 s wait used to end it.
    expect(r.endedAt).toBeGreaterThanOrEqual(2_000);
    expect(r.endedAt).toBeLessThan(2_100);
  });

  test('a FETCHING that never resolves: the decision comes within the bound (5 s after the first META)', () => {
    const r = run(mode, [
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 'never' },
    ]);
    expect(r.fetchingSeen[2]).toBeGreaterThan(0);
    expect(r.receiver.status).toBe('complete');
    expect(sameBytes(r.receiver.takeObject(), genuine)).toBe(true);
    // First META after one round trip (10 ms); released at its 5 s bound, not at the stall timeout.
    expect(r.endedAt).toBeGreaterThanOrEqual(5_000);
    expect(r.endedAt).toBeLessThanOrEqual(5_000 + 2 * ONE_WAY_MS + 1);
  });

  test('the bound is the receiver’s fetchingWaitMs: 3 s when configured so', () => {
    const r = run(
      mode,
      [
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 'never' },
      ],
      { fetchingWaitMs: 3_000 },
    );
    expect(r.fetchingSeen[2]).toBeGreaterThan(0);
    expect(r.receiver.status).toBe('complete');
    expect(r.endedAt).toBeGreaterThanOrEqual(3_000);
    expect(r.endedAt).toBeLessThanOrEqual(3_000 + 2 * ONE_WAY_MS + 1);
  });

  test('a FETCHING its source’s published key did not sign buys nothing: decided at the usual 1 s', () => {
    const r = run(mode, [
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 0 },
      // Signs with another proxy's key: what a rogue forging an honest proxy's "wait for me" has.
      { object: genuine, fetchMs: 'never', signWith: makeKey('edge-2') },
    ]);
    expect(r.fetchingSeen[2]).toBeGreaterThan(0);
    expect(r.receiver.status).toBe('complete');
    expect(r.endedAt).toBeLessThan(1_000 + 2 * ONE_WAY_MS + 2);
    // Every one of its FETCHINGs refused, at the cost of one verification (two more for the METAs).
    expect(r.fetchingSeen[2]).toBeGreaterThan(1);
    expect(r.receiver.stats().sources[2].invalid).toBe(r.fetchingSeen[2]);
    expect(r.verifications).toBe(3);
  });

  test('an older client (fetching off) is sent no FETCHING: decided at 1 s as before', () => {
    const r = run(
      mode,
      [
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 'never' },
      ],
      { disabled: ['fetching'] },
    );
    expect(r.endpoints.map((ep) => ep.stats().fetchingSent)).toEqual([0, 0, 0]);
    expect(r.receiver.status).toBe('complete');
    expect(r.endedAt).toBeLessThan(1_000 + 2 * ONE_WAY_MS + 2);
  });

  test('an older proxy (fetching off) never sends it: decided at 1 s as before', () => {
    const r = run(mode, [
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 0 },
      { object: genuine, fetchMs: 'never', disabled: ['fetching'] },
    ]);
    expect(r.fetchingSeen).toEqual([0, 0, 0]);
    expect(r.receiver.status).toBe('complete');
    expect(r.endedAt).toBeLessThan(1_000 + 2 * ONE_WAY_MS + 2);
  });
});

describe('IdentityQuorum: the wait a FETCHING buys', () => {
  const identity = (n: number) => ({
    objectLength: n,
    digest: new Uint8Array(32).fill(n),
    unitRoot: new Uint8Array(32),
  });
  const setup = () => {
    const q = new IdentityQuorum(
      3,
      () => 0,
      (d) => d.slice(0, 32),
      2,
      1000,
    );
    const sources = Array.from({ length: 3 }, () => new Source(0, DEFAULT_RECEIVER_CONFIG));
    q.onMeta(0, identity(1), 100);
    q.onMeta(1, identity(1), 100);
    expect(q.evaluate(sources, 100)).toBe('agreed');
    return { q, sources };
  };

  test('its own time, capped at the bound from the first META however late it came or however much it asked', () => {
    const { q, sources } = setup();
    q.onFetching(2, 1500, 50);
    expect(q.votesPending(sources, 1549)).toBe(true);
    expect(q.holdDeadline).toBe(1550);
    expect(q.votesPending(sources, 1550)).toBe(false);
    const late = setup();
    late.q.onFetching(2, 0xffffffff, 1099);
    expect(late.q.votesPending(late.sources, 100 + DEFAULT_FETCHING_WAIT_MS - 1)).toBe(true);
    expect(late.q.holdDeadline).toBe(100 + DEFAULT_FETCHING_WAIT_MS);
    expect(late.q.votesPending(late.sources, late.q.holdDeadline)).toBe(false);
  });

  test('only the first counts (repeating cannot push it further), none after the source stated its identity', () => {
    const { q, sources } = setup();
    q.onFetching(2, 500, 200);
    expect(q.takesFetching(2)).toBe(false);
    q.onFetching(2, 4000, 600);
    expect(q.votesPending(sources, 700)).toBe(true);
    expect(q.votesPending(sources, 1100)).toBe(false);
    const stated = setup();
    stated.q.onMeta(2, identity(1), 150);
    expect(stated.q.takesFetching(2)).toBe(false);
  });

  test('before agreement a fetching source is not written off as silent: unconfirmed only at the end of its wait', () => {
    const q = new IdentityQuorum(
      2,
      () => 0,
      (d) => d.slice(0, 32),
      2,
      1000,
    );
    const sources = Array.from({ length: 2 }, () => new Source(0, DEFAULT_RECEIVER_CONFIG));
    q.onMeta(0, identity(1), 0);
    q.onFetching(1, 3000, 10);
    expect(q.nextDeadline()).toBe(1000);
    q.noteTimedCheck(1000);
    expect(q.evaluate(sources, 1000)).toBe('waiting');
    expect(q.nextDeadline()).toBe(3010);
    expect(q.evaluate(sources, 3010)).toBe('unconfirmed');
  });
});

describe('FETCHING on the wire', () => {
  const asked: AssertedRequest = { url: URL_, range: { start: 1000, length: 5000 } };

  test('signed and unsigned round-trip; the decoder rejects reserved flags and wrong lengths', () => {
    const signature = new Uint8Array(64).fill(3);
    for (const m of [
      { transferId: 7, answerWithinMs: 60_000 },
      { transferId: 7, answerWithinMs: 0xffffffff, signature },
    ]) {
      const bytes = encodeFetching(m);
      expect(bytes.length).toBe(FETCHING_BYTES + (m.signature ? 64 : 0));
      const r = decode(bytes);
      if (!r.ok) throw new Error(r.error.message);
      expect(r.value).toEqual({ type: MessageType.Fetching, ...m });
      expect(encode(r.value)).toEqual(bytes);
    }
    const signed = encodeFetching({ transferId: 7, answerWithinMs: 1, signature });
    const errorOf = (b: Uint8Array) => {
      const r = decode(b);
      return r.ok ? 'decoded' : r.error.code;
    };
    expect(errorOf(signed.subarray(0, FETCHING_BYTES - 1))).toBe('truncated');
    expect(errorOf(signed.subarray(0, signed.length - 1))).toBe('truncated');
    expect(errorOf(new Uint8Array([...encodeFetching({ transferId: 7, answerWithinMs: 1 }), 0]))).toBe(
      'trailing-bytes',
    );
    const reserved = signed.slice();
    reserved[6] |= 0x02;
    expect(errorOf(reserved)).toBe('out-of-range');
    expect(() => encodeFetching({ transferId: 7, answerWithinMs: -1 })).toThrow(RangeError);
    expect(() => encodeFetching({ transferId: 7, answerWithinMs: 1, signature: new Uint8Array(63) })).toThrow(
      RangeError,
    );
  });

  test('mutated FETCHINGs decode canonically (signature a view into the datagram) or fail with a WireError', () => {
    const u32 = fc.oneof(fc.nat(), fc.constantFrom(0, 1, 0x7fffffff, 0xffffffff));
    const message = fc
      .record({ transferId: u32, answerWithinMs: u32, signed: fc.boolean(), fill: fc.nat(255) })
      .map(({ signed, fill, ...m }) =>
        encodeFetching({ ...m, ...(signed ? { signature: new Uint8Array(64).fill(fill) } : {}) }),
      );
    const edit = fc.oneof(
      fc.record({ at: fc.nat(), value: fc.nat(255) }).map(({ at, value }) => (b: Uint8Array) => {
        const c = b.slice();
        c[at % c.length] = value;
        return c;
      }),
      fc.nat().map((cut) => (b: Uint8Array) => b.slice(0, cut % (b.length + 1))),
      fc.uint8Array({ minLength: 1, maxLength: 70 }).map((tail) => (b: Uint8Array) => Uint8Array.from([...b, ...tail])),
    );
    let accepted = 0;
    fc.assert(
      fc.property(message, fc.array(edit, { maxLength: 3 }), fc.nat(7), (bytes, edits, offset) => {
        const input = edits.reduce((b, f) => (b.length ? f(b) : b), bytes);
        if (input.length > MAX_DATAGRAM_BYTES) return;
        const buffer = new Uint8Array(input.length + offset + 2).fill(0xee);
        buffer.set(input, offset);
        const result = decode(buffer.subarray(offset, offset + input.length));
        if (edits.length === 0) expect(result.ok).toBe(true);
        if (!result.ok) {
          expect(result.error).toBeInstanceOf(WireError);
          return;
        }
        accepted++;
        expect(Buffer.from(encode(result.value)).equals(Buffer.from(input))).toBe(true);
        if (result.value.type === MessageType.Fetching && result.value.signature)
          expect(result.value.signature.buffer).toBe(buffer.buffer);
      }),
      { seed: 31, numRuns: 2000 },
    );
    expect(accepted).toBeGreaterThan(500);
  });

  test('the signature names the proxy, the URL, the range and the promised time', () => {
    const key = makeKey('edge-1');
    const m: FetchingMessage = {
      type: MessageType.Fetching,
      transferId: 7,
      answerWithinMs: 4000,
      signature: key.sign(fetchingAssertionMessage(4000, asked, 'edge-1')),
    };
    expect(verifyFetching(m, asked, 'edge-1', key.publicKey)).toBe(true);
    expect(verifyFetching({ ...m, answerWithinMs: 4001 }, asked, 'edge-1', key.publicKey)).toBe(false);
    expect(verifyFetching(m, { url: URL_ }, 'edge-1', key.publicKey)).toBe(false);
    expect(verifyFetching(m, asked, 'edge-2', key.publicKey)).toBe(false);
    expect(verifyFetching(m, asked, 'edge-1', makeKey('edge-1').publicKey)).toBe(false);
    expect(verifyFetching({ ...m, signature: undefined }, asked, 'edge-1', key.publicKey)).toBe(false);
  });

  test('fetching is a feature of its own, never assumed of a peer that declares nothing', () => {
    expect(hasFeature(ALL_CAPABILITIES, 'fetching')).toBe(true);
    expect(hasFeature(LEGACY_CAPABILITIES, 'fetching')).toBe(false);
  });
});

describe('the source endpoint', () => {
  function pending(now = 0) {
    const ep = new SourceEndpoint({
      clientKey: 'client-1',
      codecs: { rlnc: rlncCodec },
      admission: new Admission({ maxTransfers: 8, maxPerClient: 8, memoryBytes: 64 << 20 }),
      seed: () => 1,
      now,
    });
    return ep;
  }
  const requestBytes = (extensions = true) =>
    encode({
      type: MessageType.Request,
      transferId: TRANSFER,
      mode: 'rlnc',
      scheduler: 'rarest',
      sourceIndex: 0,
      sourceCount: 2,
      window: 64,
      generationSize: 8,
      symbolSize: 256,
      url: URL_,
      // The client's own set, as its REQUEST declares it (capabilityExtension of everything).
      ...(extensions ? { extensions: new Uint8Array([1, 2, 0xff, 0x01]) } : {}),
    });
  const controls = (ep: SourceEndpoint) => {
    const out: Uint8Array[] = [];
    for (let d = ep.pollControl(); d; d = ep.pollControl()) out.push(d);
    return out;
  };

  test('answers a REQUEST repeated while fetching, at most once per interval, the same datagram each time', () => {
    const ep = pending();
    ep.handleDatagram(requestBytes(), 0);
    // The first REQUEST is not answered: a cached object's META follows at once.
    expect(controls(ep)).toEqual([]);
    const answers: Uint8Array[] = [];
    for (let t = 1; t <= 200; t++) {
      ep.handleDatagram(requestBytes(), t);
      answers.push(...controls(ep));
    }
    const interval = DEFAULT_ENDPOINT_LIMITS.fetchingMinIntervalMs;
    expect(answers.length).toBe(Math.ceil(200 / interval));
    const first = decode(answers[0]);
    expect(first.ok && first.value).toEqual({
      type: MessageType.Fetching,
      transferId: TRANSFER,
      answerWithinMs: DEFAULT_ENDPOINT_LIMITS.fetchingAnswerWithinMs,
    });
    for (const a of answers) expect(a).toBe(answers[0]);
    expect(ep.stats().fetchingSent).toBe(answers.length);
  });

  test('a client that declared nothing (legacy) is never sent one', () => {
    const ep = pending();
    for (let t = 0; t <= 500; t += 100) ep.handleDatagram(requestBytes(false), t);
    expect(controls(ep)).toEqual([]);
    expect(ep.stats().fetchingSent).toBe(0);
  });
});
