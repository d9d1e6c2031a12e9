/**
 * Uncoded symbol digests (issue 31, attack 5): what a source answers and at what cost, whom the
 * client asks and when, and how the checked decoder judges packets by a proven answer.
 */
import { createHash } from 'node:crypto';
import {
  CheckLayout,
  decode,
  Layout,
  MessageType,
  seededRandom,
  symbolDigests,
  unitDigest,
  unitDigests,
  UNIT_DIGEST_BYTES,
  uncodedCodec,
  rlncCodec,
} from '../src/internal';
import { CheckedDecoder } from '../src/receiver/check-units';
import { SymbolAsks } from '../src/receiver/symbol-asks';
import { SymbolDigestAnswers } from '../src/sender/symbol-digest-answers';

const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());
const SYMBOL = 100;
const G = 4;

function object(length: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  return Uint8Array.from({ length }, () => random() & 0xff);
}

function drain(answers: SymbolDigestAnswers): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let d = answers.next(); d; d = answers.next()) out.push(d);
  return out;
}

describe('a source answering SYMBOL_DIGESTS_REQUEST', () => {
  const bytes = object(10 * SYMBOL + 37, 1); // 11 symbols, 3 check units, the last short
  const layout = new Layout('uncoded', bytes.length, SYMBOL, G);

  test('answers with digests that hash to the unit digest every source lists', () => {
    const answers = new SymbolDigestAnswers(layout, bytes, 7, sha256);
    const listed = unitDigests(bytes, layout, sha256);
    for (const check of [0, 2]) {
      answers.ask(check);
      const [datagram] = drain(answers);
      const m = decode(datagram);
      if (!m.ok || m.value.type !== MessageType.SymbolDigests) throw new Error('not SYMBOL_DIGESTS');
      expect(m.value).toMatchObject({ transferId: 7, check, first: 0 });
      expect(m.value.digests.length).toBe(new CheckLayout(layout).unitsIn(check) * UNIT_DIGEST_BYTES);
      expect(unitDigest(m.value.digests, sha256)).toEqual(listed.subarray(check * 16, check * 16 + 16));
    }
  });

  test('answers each unit at most three times, nothing out of range, nothing in coded modes', () => {
    const answers = new SymbolDigestAnswers(layout, bytes, 7, sha256);
    for (let i = 0; i < 10; i++) answers.ask(1);
    answers.ask(3);
    answers.ask(0xffffffff);
    expect(drain(answers)).toHaveLength(3);
    expect(answers.refused).toBe(9);
    const coded = new SymbolDigestAnswers(new Layout('rlnc', bytes.length, SYMBOL, G), bytes, 7, sha256);
    coded.ask(0);
    expect(drain(coded)).toHaveLength(0);
    expect(coded.refused).toBe(1);
  });

  test('keeps at most 64 answers waiting however fast it is asked', () => {
    const big = object(400 * SYMBOL, 2);
    const answers = new SymbolDigestAnswers(new Layout('uncoded', big.length, SYMBOL, G), big, 7, sha256);
    for (let check = 0; check < 100; check++) answers.ask(check);
    expect(drain(answers)).toHaveLength(64);
    expect(answers.refused).toBe(36);
  });

  test('splits a generation of 255 symbols into datagrams of at most 64 digests', () => {
    const big = object(255 * SYMBOL, 3);
    const answers = new SymbolDigestAnswers(new Layout('uncoded', big.length, SYMBOL, 255), big, 7, sha256);
    answers.ask(0);
    const parts = drain(answers).map((d) => decode(d));
    expect(parts.map((m) => (m.ok && m.value.type === MessageType.SymbolDigests ? m.value.first : -1))).toEqual([
      0, 64, 128, 192,
    ]);
  });
});

describe('whom the client asks', () => {
  test('every source once per round, again after the retry delay, at most three rounds', () => {
    const asks = new SymbolAsks(250);
    asks.want(4, 0);
    expect([0, 1, 2].map((s) => asks.takeFor(s, 0))).toEqual([4, 4, 4]);
    expect(asks.takeFor(1, 100)).toBe(-1);
    expect(asks.nextDeadline()).toBe(250);
    expect(asks.takeFor(1, 250)).toBe(4);
    expect(asks.takeFor(1, 500)).toBe(4);
    expect(asks.nextDeadline()).toBeNull();
    expect(asks.takeFor(1, 10_000)).toBe(-1);
    asks.settle(4);
    expect(asks.size).toBe(0);
  });
});

describe('the checked decoder in uncoded mode', () => {
  const bytes = object(8 * SYMBOL, 4); // two check units of four symbols
  const layout = new Layout('uncoded', bytes.length, SYMBOL, G);
  const symbol = (i: number) => bytes.subarray(i * SYMBOL, (i + 1) * SYMBOL);
  const make = () => new CheckedDecoder(layout, uncodedCodec, unitDigests(bytes, layout, sha256), sha256, 1 << 20);
  const bad = (i: number) => symbol(i).map((b) => b ^ 1);

  test('a failed unit of several sources asks; the proven answer names exactly the wrong senders', () => {
    const d = make();
    expect(d.add(0, 0, 0, symbol(0)).polluters).toEqual([]);
    d.add(1, 1, 0, bad(1));
    d.add(2, 2, 0, symbol(2));
    const failed = d.add(2, 3, 0, symbol(3));
    expect(failed).toMatchObject({ verified: false, polluters: [], askSymbolDigests: 0 });
    // Answers for a unit that did not ask, or that do not hash to its digest, are not used.
    expect(d.symbolDigests(0, 1, 0, symbolDigests(bytes.subarray(4 * SYMBOL), SYMBOL, sha256))).toMatchObject({
      polluters: [],
    });
    expect(d.symbolDigests(3, 0, 0, new Uint8Array(4 * UNIT_DIGEST_BYTES))).toMatchObject({ liars: [3] });
    expect(d.symbolDigests(3, 0, 2, new Uint8Array(3 * UNIT_DIGEST_BYTES))).toMatchObject({ liars: [3] });
    const answer = symbolDigests(bytes.subarray(0, 4 * SYMBOL), SYMBOL, sha256);
    // In two parts: nothing is decided on half an answer.
    const half = d.symbolDigests(0, 0, 0, answer.subarray(0, 32));
    expect(half.polluters).toEqual([]);
    expect(half.symbolsKnown).toBeUndefined();
    const judged = d.symbolDigests(0, 0, 2, answer.subarray(32));
    expect(judged).toMatchObject({ polluters: [1], verified: false, symbolsKnown: 0 });
    expect(d.rank(1)).toBe(0);
    // From now on each packet of the unit is judged as it comes.
    expect(d.add(3, 1, 0, bad(1))).toMatchObject({ result: 'invalid', polluters: [3] });
    expect(d.add(0, 1, 0, symbol(1))).toMatchObject({ verified: true, polluters: [] });
    expect(d.isVerified(0)).toBe(true);
  });

  test('a unit one source made up alone proves it without asking', () => {
    const d = make();
    for (let i = 0; i < 3; i++) d.add(5, i, 0, symbol(i));
    const proven = d.add(5, 3, 0, bad(3));
    expect(proven.polluters).toEqual([5]);
    expect(proven.askSymbolDigests).toBeUndefined();
  });

  test('coded modes never ask', () => {
    const rlnc = new Layout('rlnc', bytes.length, SYMBOL, G);
    const d = new CheckedDecoder(rlnc, rlncCodec, unitDigests(bytes, rlnc, sha256), sha256, 1 << 20);
    expect(d.symbolDigests(0, 0, 0, new Uint8Array(4 * UNIT_DIGEST_BYTES))).toMatchObject({ polluters: [] });
  });
});
