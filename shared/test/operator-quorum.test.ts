/**
 * Independence by operator (issue 31): sources that agree must span min(quorum, distinct
 * operators among a download's sources) operators, so an operator running two of a download's
 * three proxies does not meet the quorum of two alone. The download runs the real SourceEndpoint
 * (the proxy's side) and the real Receiver over an in-memory network with fake time; the honest
 * proxy of another operator is one whose origin fetch has not ended yet, as an older proxy that
 * sends no FETCHING: silent past the agreement wait.
 */
import {
  Admission,
  Feature,
  Mode,
  Receiver,
  ReceiverOptions,
  rlncCodec,
  SourceEndpoint,
  uncodedCodec,
  withoutFeatures,
} from '../src/internal';
import { DEFAULT_RECEIVER_CONFIG } from '../src/receiver/config';
import { IdentityQuorum, SourceOperatorOptions } from '../src/receiver/quorum';
import { Source } from '../src/receiver/source';
import { objectOf } from './helpers/fake-host';
import { runOverNetwork } from './helpers/endpoint-network';

const TRANSFER = 5;
const ONE_WAY_MS = 5;
const RUN_LIMIT_MS = 8_000;
/** A proxy one release behind: it tells no client it is still fetching. */
const OLDER: Feature[] = ['fetching'];

interface ProxySpec {
  object: Uint8Array;
  /** When its origin fetch ends. */
  fetchMs: number;
}

/** A download of each proxy's object by one Receiver told each source's operator (or none). */
function run(mode: Mode, proxies: ProxySpec[], operators?: (string | undefined)[]) {
  const options: ReceiverOptions & SourceOperatorOptions = {
    transferId: TRANSFER,
    url: 'https://cdn.example/v/seg-7.ts',
    mode,
    sourceCount: proxies.length,
    window: 64,
    generationSize: 8,
    symbolSize: 256,
    codec: mode === 'rlnc' ? rlncCodec : uncodedCodec,
    now: 0,
    sourceCapabilities: proxies.map(() => withoutFeatures(OLDER)),
    ...(operators !== undefined ? { sourceOperators: operators } : {}),
  };
  const receiver = new Receiver(options);
  const admissions = proxies.map(() => new Admission({ maxTransfers: 4, maxPerClient: 4, memoryBytes: 16 << 20 }));
  const endpoints = proxies.map(
    (_, i) =>
      new SourceEndpoint({
        clientKey: 'client-1',
        codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
        admission: admissions[i],
        seed: () => 31 + i,
        now: 0,
        disabledFeatures: OLDER,
      }),
  );
  const endedAt = runOverNetwork(
    receiver,
    proxies.map((p, i) => ({ endpoint: endpoints[i], admission: admissions[i], object: p.object, fetchMs: p.fetchMs })),
    { transferId: TRANSFER, oneWayMs: ONE_WAY_MS, limitMs: RUN_LIMIT_MS },
  );
  if (endedAt < 0) throw new Error(`the download did not end within ${RUN_LIMIT_MS} ms of fake time`);
  return { receiver, endedAt };
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));

describe.each<Mode>(['rlnc', 'uncoded'])('%s', (mode) => {
  const genuine = objectOf(3_000, 41);
  const fake = objectOf(3_000, 42);
  // Operator X's two rogues answer from memory; operator Y's honest proxy fetches for 3 s.
  const attack: ProxySpec[] = [
    { object: fake, fetchMs: 0 },
    { object: fake, fetchMs: 0 },
    { object: genuine, fetchMs: 3_000 },
  ];

  test('without operators (an older origo): the two agreeing rogues’ object is taken at the 1 s wait', () => {
    const r = run(mode, attack);
    expect(r.receiver.status).toBe('complete');
    expect(sameBytes(r.receiver.takeObject(), fake)).toBe(true);
  });

  test('two rogues of one operator and a slower honest proxy of another: never the rogues’ object', () => {
    const r = run(mode, attack, ['X', 'X', 'Y']);
    expect(r.receiver.status).toBe('failed');
    // Y was written off at the wait: X alone cannot span two operators (the origin is fetched).
    expect(r.receiver.error?.code).toBe('metadata-unconfirmed');
    expect(r.endedAt).toBeLessThan(DEFAULT_RECEIVER_CONFIG.agreementWaitMs + 100);
  });

  test('the same rogues as two operators’ proxies still meet the quorum (what operators cannot stop)', () => {
    const r = run(mode, attack, ['X', 'Z', 'Y']);
    expect(r.receiver.status).toBe('complete');
    expect(sameBytes(r.receiver.takeObject(), fake)).toBe(true);
  });

  test('honest proxies of one operator and one of another agree: the object, without waiting for a third', () => {
    const r = run(
      mode,
      [
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 20 },
      ],
      ['X', 'X', 'Y'],
    );
    expect(r.receiver.status).toBe('complete');
    expect(sameBytes(r.receiver.takeObject(), genuine)).toBe(true);
  });

  test('every source of one operator (origo had no other): agreement by count, as before', () => {
    const r = run(
      mode,
      [
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 0 },
        { object: genuine, fetchMs: 3_000 },
      ],
      ['X', 'X', 'X'],
    );
    expect(r.receiver.status).toBe('complete');
    expect(sameBytes(r.receiver.takeObject(), genuine)).toBe(true);
  });
});

describe('IdentityQuorum: the operators agreeing sources span', () => {
  const identity = (n: number) => ({
    objectLength: n,
    digest: new Uint8Array(32).fill(n),
    unitRoot: new Uint8Array(32),
  });
  const quorumOf = (operators?: (string | undefined)[]) => {
    const q = new IdentityQuorum(
      3,
      () => 0,
      (d) => d.slice(0, 32),
      2,
      1000,
      5000,
      operators,
    );
    const sources = Array.from({ length: 3 }, () => new Source(0, DEFAULT_RECEIVER_CONFIG));
    sources.forEach((s) => (s.stats.state = 'active'));
    return { q, sources };
  };

  test('one operator’s two agreeing votes wait for the other operator’s, then are unconfirmed', () => {
    const { q, sources } = quorumOf(['X', 'X', 'Y']);
    q.onMeta(0, identity(1), 100);
    q.onMeta(1, identity(1), 100);
    sources[0].heard = sources[1].heard = true;
    expect(q.evaluate(sources, 200)).toBe('waiting');
    expect(q.evaluate(sources, 1100)).toBe('unconfirmed');
  });

  test('the other operator disagreeing is a conflict; agreeing is agreement', () => {
    const a = quorumOf(['X', 'X', 'Y']);
    a.q.onMeta(0, identity(1), 100);
    a.q.onMeta(1, identity(1), 100);
    a.q.onMeta(2, identity(2), 150);
    expect(a.q.evaluate(a.sources, 200)).toBe('conflict');
    const b = quorumOf(['X', 'X', 'Y']);
    b.q.onMeta(0, identity(1), 100);
    b.q.onMeta(2, identity(1), 150);
    expect(b.q.evaluate(b.sources, 200)).toBe('agreed');
  });

  test('unnamed operators are each their own: two agreeing votes agree', () => {
    for (const operators of [undefined, ['X', undefined, undefined]]) {
      const { q, sources } = quorumOf(operators);
      q.onMeta(1, identity(1), 100);
      q.onMeta(2, identity(1), 100);
      expect(q.evaluate(sources, 200)).toBe('agreed');
    }
  });
});
