/**
 * Conflict verdicts (issue 31, evidence): a proxy is withdrawn only when the origin contradicts
 * its own signed statement, never on a count, a stale version or an inconsistent origin. The
 * judge with a scripted origin, then the whole path: a real origo, a loopback origin, signed
 * METAs from registered keys, a client handing in the conflict and a bystander told.
 */
import { OriginValidator } from '@mutp/shared';
import { ConflictJudge, ConflictPolicy, DEFAULT_CONFLICT_POLICY, OriginAnswer, Statement } from '../src/conflicts';
import { barrier, closeAll, connectClient, registerMessage, requestProxies, startOrigo, TestPeer } from './helpers';
import {
  bytesOf,
  conflictAbout,
  ETAG,
  FAKE_BYTES,
  Key,
  newKey,
  startOrigin,
  statement,
  TRUE_BYTES,
  URL_,
} from './signed-statements';

afterEach(closeAll);

describe('ConflictJudge', () => {
  const a = newKey();
  const b = newKey();
  const c = newKey();

  function judge(answer: () => Promise<OriginAnswer>, policy: Partial<ConflictPolicy> = {}, now = () => 0) {
    let fetches = 0;
    const j = new ConflictJudge(
      () => {
        fetches++;
        return answer();
      },
      now,
      { ...DEFAULT_CONFLICT_POLICY, ...policy },
    );
    return { j, fetches: () => fetches };
  }
  const st = (s: ReturnType<typeof statement>): Statement => ({ proxyId: s.proxyId, meta: s.meta });

  test("a statement naming the origin's current ETag with other bytes is proven false", async () => {
    const { j } = judge(async () => ({ bytes: TRUE_BYTES, etag: '"v1"' }));
    const verdict = await j.judge('net-1', URL_, undefined, [
      st(statement('honest', a, TRUE_BYTES, ETAG)),
      st(statement('rogue', b, FAKE_BYTES, ETAG)),
    ]);
    expect(verdict).toEqual({
      outcome: 'judged',
      results: [
        { proxyId: 'honest', result: 'matches-origin' },
        { proxyId: 'rogue', result: 'proven-false' },
      ],
    });
  });

  test.each<[string, OriginAnswer, OriginValidator | undefined]>([
    [
      'another validator (the origin may have changed since)',
      { bytes: TRUE_BYTES, etag: '"v1"' },
      { kind: 'etag', value: '"v0"' },
    ],
    ['no validator', { bytes: TRUE_BYTES, etag: '"v1"' }, undefined],
    ['a weak ETag at the origin (no promise of these bytes)', { bytes: TRUE_BYTES, etag: 'W/"v1"' }, ETAG],
  ])('a statement with %s is inconclusive', async (_, answer, validator) => {
    const { j } = judge(async () => answer);
    const verdict = await j.judge('net-1', URL_, undefined, [
      st(statement('honest', a, TRUE_BYTES, answer.etag?.startsWith('W/') ? ETAG : { kind: 'etag', value: '"v1"' })),
      st(statement('rogue', b, FAKE_BYTES, validator)),
    ]);
    expect(verdict.outcome === 'judged' && verdict.results[1].result).toBe('inconclusive');
  });

  test('an origin that matches nobody under the validator they name proves nobody false', async () => {
    const { j } = judge(async () => ({ bytes: bytesOf('a third object, served under the same ETag'), etag: '"v1"' }));
    const verdict = await j.judge('net-1', URL_, undefined, [
      st(statement('a', a, TRUE_BYTES, ETAG)),
      st(statement('b', b, FAKE_BYTES, ETAG)),
    ]);
    expect(verdict).toEqual({
      outcome: 'judged',
      results: [
        { proxyId: 'a', result: 'inconclusive' },
        { proxyId: 'b', result: 'inconclusive' },
      ],
    });
  });

  test('statements of one identity are no conflict: the origin is not asked', async () => {
    const { j, fetches } = judge(async () => ({ bytes: TRUE_BYTES }));
    const verdict = await j.judge('net-1', URL_, undefined, [
      st(statement('a', a, TRUE_BYTES, ETAG)),
      st(statement('b', b, TRUE_BYTES, ETAG)),
    ]);
    expect(verdict).toEqual({ outcome: 'no-conflict' });
    expect(fetches()).toBe(0);
  });

  test('one origin fetch serves every conflict about a URL for a minute; each network has a budget', async () => {
    let now = 0;
    const { j, fetches } = judge(
      async () => ({ bytes: TRUE_BYTES, etag: '"v1"' }),
      { perNetwork: 2 },
      () => now,
    );
    const conflict = [st(statement('a', a, TRUE_BYTES, ETAG)), st(statement('c', c, FAKE_BYTES, ETAG))];
    for (let i = 0; i < 5; i++) expect((await j.judge('net-1', URL_, undefined, conflict)).outcome).toBe('judged');
    expect(fetches()).toBe(1);
    now = 61_000;
    expect((await j.judge('net-1', URL_, undefined, conflict)).outcome).toBe('judged');
    now = 122_000;
    expect(await j.judge('net-1', URL_, undefined, conflict)).toMatchObject({ outcome: 'refused' });
    expect((await j.judge('net-2', URL_, undefined, conflict)).outcome).toBe('judged');
    expect(fetches()).toBe(3);
  });

  test('at most maxConcurrent origin fetches run at once; an origin failure judges nobody', async () => {
    let release: () => void = () => undefined;
    const { j } = judge(
      () => new Promise<OriginAnswer>((_, reject) => (release = () => reject(new Error('origin timed out')))),
      { maxConcurrent: 1 },
    );
    const conflict = (url: string) => [
      st(statement('a', a, TRUE_BYTES, ETAG, url)),
      st(statement('c', c, FAKE_BYTES, ETAG, url)),
    ];
    const first = j.judge('net-1', `${URL_}?1`, undefined, conflict(`${URL_}?1`));
    expect(await j.judge('net-2', `${URL_}?2`, undefined, conflict(`${URL_}?2`))).toMatchObject({ outcome: 'refused' });
    release();
    expect(await first).toEqual({ outcome: 'origin-failed', reason: 'origin timed out' });
  });
});

describe('a conflict handed to origo', () => {
  let originUrl: string;

  beforeEach(async () => {
    originUrl = await startOrigin();
  });

  /** A honest and a rogue proxy registered with their keys, and a victim offered both. */
  async function scene(allowPrivateOrigins: boolean) {
    const { port, logs } = await startOrigo({ allowPrivateOrigins });
    const keys = { honest: newKey(), rogue: newKey() };
    const peers: Record<string, TestPeer> = {};
    for (const [proxyId, key] of Object.entries(keys)) {
      const peer = await TestPeer.open(port, '/v1/proxy', proxyId);
      peer.send({ ...registerMessage({ proxyId, name: proxyId }), assertionKey: key.text });
      await peer.next('registered');
      peers[proxyId] = peer;
    }
    const victim = await connectClient(port, 'victim', '127.0.0.7');
    await requestProxies(victim, 2);
    return { port, logs, keys, victim, peers };
  }

  /** The conflict a client hands in: the honest proxy's true statement and the rogue's lie. */
  const conflict = (honest: Key, rogue: Key) =>
    conflictAbout(originUrl, { proxyId: 'honest', key: honest }, { proxyId: 'rogue', key: rogue });

  async function logged(logs: { msg?: unknown }[], msg: string, count = 1): Promise<void> {
    for (let i = 0; i < 100 && logs.filter((l) => l.msg === msg).length < count; i++)
      await new Promise((r) => setTimeout(r, 20));
  }

  test('a rogue whose signed META the origin contradicts is withdrawn and no longer offered; the honest one stays', async () => {
    const { port, logs, keys, victim, peers } = await scene(true);
    const bystander = await connectClient(port, 'bystander', '127.0.0.9');
    expect((await requestProxies(bystander, 2)).sort()).toEqual(['honest', 'rogue']);
    victim.send(conflict(keys.honest, keys.rogue));
    expect(await bystander.next('withdrawn')).toEqual({ type: 'withdrawn', proxyId: 'rogue', reason: 'proven-false' });
    expect(await requestProxies(bystander, 2)).toEqual(['honest']);
    // Its registration ends at once, with the reason (it would be refused if it registered now).
    expect(await peers.rogue.next('error')).toMatchObject({
      code: 'unauthorized',
      message: expect.stringContaining('proven false'),
    });
    expect((await peers.rogue.closed()).code).toBe(4001);
    // The honest one got the verdict that its bytes are the origin's: nothing.
    expect(peers.honest.received.filter((m) => m.type === 'error' || m.type === 'stale')).toEqual([]);
    expect(logs.find((l) => l.msg === 'conflict judged')).toMatchObject({ outcome: 'judged', signed: 2 });
  });

  test('statements not signed by the registered key, or about proxies never offered, are not judged', async () => {
    const { port, logs, keys, victim } = await scene(true);
    // The rogue's statement signed with a key it did not register: it proves nothing about it.
    victim.send(conflict(keys.honest, newKey()));
    // A client offered nothing speaks about nobody.
    const stranger = await connectClient(port, 'stranger', '127.0.0.8');
    stranger.send(conflict(keys.honest, keys.rogue));
    await barrier(victim);
    await barrier(stranger);
    await logged(logs, 'conflict not judged', 2);
    expect(logs.filter((l) => l.msg === 'conflict not judged').map((l) => [l.clientId, l.signed, l.outcome])).toEqual([
      [victim.id, 1, 'no-conflict'],
      [stranger.id, 0, 'no-conflict'],
    ]);
    expect((await requestProxies(victim, 2)).sort()).toEqual(['honest', 'rogue']);
  });

  test('without --allow-private-origins origo does not fetch a loopback origin', async () => {
    const { logs, keys, victim } = await scene(false);
    victim.send(conflict(keys.honest, keys.rogue));
    await logged(logs, 'conflict not judged');
    const line = logs.find((l) => l.msg === 'conflict not judged');
    expect(line).toMatchObject({ outcome: 'origin-failed' });
    expect(String(line?.reason)).toMatch(/loopback|not allowed/);
  });
});
