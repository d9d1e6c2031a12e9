/**
 * Integrity against hostile sources (issue 9, findings 1 and 5): real Senders and one Receiver
 * wired through a deterministic in-memory network (fixed delay per source, no loss), with hostile
 * sources that speak the wire protocol: one that answers first with another object's META, one
 * with a valid META whose DATA is corrupt, one whose DIGESTS lie. A source whose data or digest
 * list contradicts its own statements is identified and excluded and the download completes
 * byte-exact from the honest ones; sources that state different objects are a conflict no count of
 * votes settles, so the download fails (the client falls back to the origin) and nobody is blamed.
 * It lives with the WebAssembly codecs because the fountain mode needs wirehair.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import { loadNodeCodecs } from '@mutp/wasm/node';
import {
  Codec,
  decode,
  encodeDigests,
  encodeSymbolDigests,
  encodeError,
  encodeMeta,
  ErrorCode,
  Layout,
  MessageType,
  MetaSigner,
  Mode,
  RequestMessage,
  unitDigests,
  unitRoot,
  UNIT_DIGEST_BYTES,
  DATA_FOUNTAIN_HEADER_BYTES,
  DATA_RLNC_HEADER_BYTES,
  DATA_UNCODED_HEADER_BYTES,
  Sender,
  SourceSigner,
} from '@mutp/shared/internal';
import {
  asSource,
  download as run,
  G,
  honest as honestFor,
  makeObject,
  NetworkHooks,
  PRODUCTION_LAYOUT,
  Run,
  sha256,
  Source,
  SYMBOL,
  TRANSFER,
} from './helpers/in-memory-transfer';

let codecs: Record<Mode, Codec>;
beforeAll(async () => {
  codecs = await loadNodeCodecs();
});

function honest(object: Uint8Array, request: RequestMessage, mode: Mode, seed: number): Sender {
  return honestFor(codecs[mode], object, request, seed);
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

function download(
  mode: Mode,
  object: Uint8Array,
  make: (request: RequestMessage, i: number) => Source,
  delays: number[],
): Run {
  return run(mode, codecs[mode], object, make, delays);
}

/** What a polluter cost one download at the production layout. */
interface PollutionCost {
  run: Run;
  /** Simulated ms from the polluter's first packet reaching the client to its exclusion. */
  excludedAfterMs: number;
  /** Its packets that reached the client before it was excluded. */
  packetsBeforeExclusion: number;
  /** DATA datagrams the honest sources sent, in all. */
  dataSent: number;
}

/** A download at the production layout from `n` sources, `polluters` corrupting every `every`-th packet. */
function pollutedDownload(
  mode: Mode,
  object: Uint8Array,
  n: number,
  polluters: number[],
  every: number,
): PollutionCost {
  let firstAt = -1;
  let excludedAt = -1;
  let before = 0;
  let dataSent = 0;
  let now = 0;
  const isData = (d: Uint8Array) => d[1] >= MessageType.DataUncoded && d[1] <= MessageType.DataFountain;
  const run = productionDownload(
    mode,
    object,
    (request, i) => {
      const sender = honest(object, request, mode, 700 + i);
      const source = polluters.includes(i) ? corruptingData(sender, every) : asSource(sender);
      return {
        ...source,
        poll(t) {
          const d = source.poll(t);
          if (d && isData(d) && !polluters.includes(i)) dataSent++;
          return d;
        },
      };
    },
    new Array<number>(n).fill(5),
    {
      step(t, control) {
        now = t;
        if (excludedAt < 0 && firstAt >= 0 && polluters.every((p) => control.receiver.stats().sources[p].polluter))
          excludedAt = t;
      },
      delivered(from, bytes) {
        if (!polluters.includes(from) || !isData(bytes) || excludedAt >= 0) return;
        if (firstAt < 0) firstAt = now;
        before++;
      },
    },
  );
  return { run, excludedAfterMs: excludedAt - firstAt, packetsBeforeExclusion: before, dataSent };
}

function productionDownload(
  mode: Mode,
  object: Uint8Array,
  make: (request: RequestMessage, i: number) => Source,
  delays: number[],
  hooks: NetworkHooks,
): Run {
  return run(mode, codecs[mode], object, make, delays, hooks, PRODUCTION_LAYOUT);
}

const MODES: Mode[] = ['uncoded', 'rlnc', 'fountain'];

describe.each(MODES)('%s', (mode) => {
  const object = makeObject(40_000 + 123, 7);

  test('a source answering first with another object is a conflict: no bytes used, nobody blamed', () => {
    const fake = makeObject(object.length, 8);
    const run = download(
      mode,
      object,
      (request, i) => asSource(honest(i === 0 ? fake : object, request, mode, 100 + i)),
      [1, 10, 10, 10],
    );
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-conflict');
    expect(run.receiver.polluters()).toEqual([]);
  });

  // The second case (issue 31, races): 3 KB, which the rogues (1 ms away) complete in a few ms;
  // the honest METAs arrive ~120 ms in, long after, but within the wait for identities (1 s).
  test.each([
    ['answering first do not outvote the honest sources (issue 31, attack 1)', 40_123, [1, 1, 10, 10]],
    ['that finish a small object before the honest sources answer are still a conflict', 3_000, [1, 1, 60, 60]],
  ])('two agreeing rogues %s', (_, length, delays) => {
    const genuine = length === object.length ? object : makeObject(length, 9);
    const fake = makeObject(length, 8);
    const run = download(
      mode,
      genuine,
      (request, i) => asSource(honest(i < 2 ? fake : genuine, request, mode, 150 + i)),
      delays,
    );
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-conflict');
    expect(run.receiver.polluters()).toEqual([]);
  });

  test('a small object from honest sources only waits for the slowest one that is still to answer', () => {
    const small = makeObject(3_000, 9);
    const run = download(mode, small, (request, i) => asSource(honest(small, request, mode, 165 + i)), [1, 1, 60, 60]);
    const completedAt = run.receiver.stats().completedAt ?? -1;
    expect(run.receiver.status).toBe('complete');
    expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(small))).toBe(true);
    // Held until the slow sources' METAs (2 x 60 ms one way), not the whole 1 s wait.
    expect(completedAt).toBeGreaterThanOrEqual(120);
    expect(completedAt).toBeLessThan(400);
  });

  test('a rogue alone after the honest sources were refused (Overloaded) is unconfirmed (issue 31, attack 2)', () => {
    const fake = makeObject(object.length, 8);
    const refusing: Source = (() => {
      const refusals: Uint8Array[] = [];
      return {
        handle: () => {
          refusals.push(encodeError({ transferId: TRANSFER, code: ErrorCode.Overloaded, message: 'memory budget' }));
        },
        tick: () => undefined,
        poll: () => refusals.shift() ?? null,
      };
    })();
    const run = download(
      mode,
      object,
      (request, i) => (i === 0 ? asSource(honest(fake, request, mode, 170)) : refusing),
      [5, 1, 1],
    );
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-unconfirmed');
    expect(run.receiver.progress().dof).toBe(0);
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

  test('two sources corrupting the same check units are both identified and the download completes (issue 31)', () => {
    const run = download(
      mode,
      object,
      (request, i) => {
        const s = honest(object, request, mode, 250 + i);
        return i === 1 || i === 2 ? corruptingData(s, 2) : asSource(s);
      },
      [5, 5, 5, 5, 5],
    );
    expect(run.receiver.error).toBeUndefined();
    expect(run.receiver.status).toBe('complete');
    expect(Buffer.from(run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(
      run.receiver
        .polluters()
        .map((p) => p.source)
        .sort(),
    ).toEqual([1, 2]);
    for (const i of [0, 3, 4]) expect(run.receiver.stats().sources[i].polluter).toBe(false);
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

describe.each(MODES)('%s at the production layout (issue 31, attack 5)', (mode) => {
  const object = makeObject(2 * 1024 * 1024 + 333, 31);
  const packets = Math.ceil(object.length / PRODUCTION_LAYOUT.symbolSize);

  test.each([
    ['one polluter', [2]],
    ['two polluters', [1, 2]],
  ])('%s among four sources: caught within 200 ms, reported, the download completes', (_, polluters) => {
    const cost = pollutedDownload(mode, object, 4 + polluters.length - 1, polluters, 3);
    const receiver = cost.run.receiver;
    console.log(
      `${mode} ${polluters.length} polluter(s): excluded after ${cost.excludedAfterMs} ms, ` +
        `${cost.packetsBeforeExclusion} packets; ${cost.dataSent} DATA sent for ${packets} packets`,
    );
    expect(receiver.error).toBeUndefined();
    expect(receiver.status).toBe('complete');
    expect(Buffer.from(receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(
      receiver
        .polluters()
        .map((p) => p.source)
        .sort(),
    ).toEqual(polluters);
    expect(cost.excludedAfterMs).toBeGreaterThanOrEqual(0);
    if (mode === 'fountain') {
      // A fountain check unit is a whole source block (this object is one): nothing can be
      // judged before the block decodes, so the bound is the unit, not the time.
      expect(cost.packetsBeforeExclusion).toBeLessThanOrEqual(packets);
    } else {
      expect(cost.excludedAfterMs).toBeLessThanOrEqual(200);
    }
    // No flood of repeats (uncoded sent 60,000 datagrams per source here before symbol digests).
    expect(cost.dataSent).toBeLessThanOrEqual(1.5 * packets);
  });
});

describe('uncoded symbol digests (issue 31, attack 5)', () => {
  const object = makeObject(600_000 + 17, 35);

  /** A corrupting source that also answers every SYMBOL_DIGESTS_REQUEST with digests it made up. */
  function lyingAnswers(sender: Sender): Source {
    const corrupt = corruptingData(sender, 2);
    const lies: Uint8Array[] = [];
    return {
      handle(bytes, now) {
        const m = decode(bytes);
        if (m.ok && m.value.type === MessageType.SymbolDigestsRequest) {
          const digests = new Uint8Array(PRODUCTION_LAYOUT.generationSize * UNIT_DIGEST_BYTES).fill(0x42);
          lies.push(encodeSymbolDigests({ transferId: TRANSFER, check: m.value.check, first: 0, digests }));
          return;
        }
        corrupt.handle(bytes, now);
      },
      tick: (now) => corrupt.tick(now),
      poll: (now) => lies.shift() ?? corrupt.poll(now),
    };
  }

  test('a polluter that answers first with made-up symbol digests is proven a liar; the honest answer still judges', () => {
    const cost = productionDownload(
      'uncoded',
      object,
      (request, i) => {
        const s = honest(object, request, 'uncoded', 800 + i);
        return i === 0 ? lyingAnswers(s) : asSource(s);
      },
      // The liar is nearest: its answer arrives before any honest one.
      [1, 5, 5, 5],
      {},
    );
    expect(cost.receiver.status).toBe('complete');
    expect(Buffer.from(cost.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    const polluters = cost.receiver.polluters();
    expect(polluters.map((p) => p.source)).toEqual([0]);
    expect(polluters[0].reason).toMatch(/symbol digests that do not hash/);
    for (const i of [1, 2, 3]) expect(cost.receiver.stats().sources[i].polluter).toBe(false);
  });

  test('three polluters in the same check units are all proven at once', () => {
    const cost = pollutedDownload('uncoded', object, 6, [1, 2, 4], 2);
    expect(cost.run.receiver.status).toBe('complete');
    expect(Buffer.from(cost.run.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(
      cost.run.receiver
        .polluters()
        .map((p) => p.source)
        .sort(),
    ).toEqual([1, 2, 4]);
    expect(cost.excludedAfterMs).toBeLessThanOrEqual(200);
    for (const i of [0, 3, 5]) expect(cost.run.receiver.stats().sources[i].polluter).toBe(false);
  });

  test('a polluter that never answers costs nothing more: the others answer', () => {
    const cost = productionDownload(
      'uncoded',
      object,
      (request, i) => {
        const s = honest(object, request, 'uncoded', 900 + i);
        if (i !== 3) return asSource(s);
        const corrupt = corruptingData(s, 2);
        return {
          ...corrupt,
          handle(bytes, now) {
            const m = decode(bytes);
            if (!(m.ok && m.value.type === MessageType.SymbolDigestsRequest)) corrupt.handle(bytes, now);
          },
        };
      },
      [5, 5, 5, 5],
      {},
    );
    expect(cost.receiver.status).toBe('complete');
    expect(cost.receiver.polluters().map((p) => p.source)).toEqual([3]);
  });
});

describe.each(MODES)('%s with keys origo published (issue 31, signed METAs)', (mode) => {
  const object = makeObject(30_000 + 11, 12);
  const keys = [0, 1, 2, 3].map(() => generateKeyPairSync('ed25519'));
  const signerOf = (i: number): MetaSigner => ({
    proxyId: `edge-${i}`,
    sign: (m) => new Uint8Array(sign(null, m, keys[i].privateKey)),
  });
  const published: SourceSigner[] = keys.map((k, i) => ({
    proxyId: `edge-${i}`,
    publicKey: new Uint8Array(Buffer.from(k.publicKey.export({ format: 'jwk' }).x as string, 'base64url')),
  }));
  const signedDownload = (make: (request: RequestMessage, i: number) => Source, delays: number[]) =>
    run(mode, codecs[mode], object, make, delays, {}, undefined, published.slice(0, delays.length));

  test('signed sources agree and complete', () => {
    const r = signedDownload(
      (request, i) => asSource(honestFor(codecs[mode], object, request, 60 + i, signerOf(i))),
      [5, 5, 5],
    );
    expect(r.receiver.status).toBe('complete');
    expect(Buffer.from(r.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
  });

  test('a rogue that does not sign its other object cannot fail the download: it is dropped, not reported', () => {
    const fake = makeObject(object.length, 13);
    const r = signedDownload(
      (request, i) =>
        asSource(
          i === 0 ? honest(fake, request, mode, 70) : honestFor(codecs[mode], object, request, 70 + i, signerOf(i)),
        ),
      // It answers first, before and after the others agree.
      [1, 5, 5, 5],
    );
    expect(r.receiver.status).toBe('complete');
    expect(Buffer.from(r.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    expect(r.receiver.stats().sources[0]).toMatchObject({ state: 'dropped', polluter: false });
    expect(r.receiver.stats().sources[0].error).toMatch(/not signed by the key origo published/);
    expect(r.receiver.polluters()).toEqual([]);
  });

  test('a META signed with another proxy key does not count either', () => {
    const r = signedDownload(
      (request, i) => asSource(honestFor(codecs[mode], object, request, 80 + i, signerOf(i === 2 ? 0 : i))),
      [5, 5, 1],
    );
    expect(r.receiver.status).toBe('complete');
    expect(r.receiver.stats().sources[2].state).toBe('dropped');
  });

  test('a rogue that signs its other object still fails the download: its lie is now signed evidence', () => {
    const fake = makeObject(object.length, 14);
    const r = signedDownload(
      (request, i) => asSource(honestFor(codecs[mode], i === 0 ? fake : object, request, 90 + i, signerOf(i))),
      [1, 5, 5, 5],
    );
    expect(r.receiver.status).toBe('failed');
    expect(r.receiver.error?.code).toBe('metadata-conflict');
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

  test('a rogue answering alone while the honest sources are slow is unconfirmed, never used', () => {
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
    expect(run.receiver.error?.code).toBe('metadata-unconfirmed');
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

  test.each(['uncoded', 'rlnc', 'fountain'] as const)(
    '%s: the unchecked baseline (what bench:e2e --integrity-baseline compares with) checks nothing',
    (mode) => {
      // Its figures mean something only if it really skips every check: a polluter's bytes get
      // through and nobody is blamed, where the checked receiver excludes it (tests above).
      const object = makeObject(40_000, 6);
      const make = (request: RequestMessage, i: number) => {
        const s = honest(object, request, mode, 600 + i);
        return i === 1 ? corruptingData(s, 2) : asSource(s);
      };
      const unchecked = run(mode, codecs[mode], object, make, [5, 5, 5], {}, undefined, undefined, {
        integrity: 'unchecked',
      });
      expect(unchecked.receiver.status).toBe('complete');
      expect(Buffer.from(unchecked.receiver.takeObject()).equals(Buffer.from(object))).toBe(false);
      expect(unchecked.receiver.polluters()).toEqual([]);
      const checked = download(mode, object, make, [5, 5, 5]);
      expect(checked.receiver.status).toBe('complete');
      expect(Buffer.from(checked.receiver.takeObject()).equals(Buffer.from(object))).toBe(true);
    },
  );

  test('one source is trusted alone when it is the only one (documented)', () => {
    const object = makeObject(5000, 3);
    const run = download('rlnc', object, (request, i) => asSource(honest(object, request, 'rlnc', i)), [5]);
    expect(run.receiver.status).toBe('complete');
  });

  test('a hand-built META + DIGESTS for a forged object, sent first, does not win (a conflict)', () => {
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
    expect(run.receiver.status).toBe('failed');
    expect(run.receiver.error?.code).toBe('metadata-conflict');
    expect(run.receiver.polluters()).toEqual([]);
  });
});
