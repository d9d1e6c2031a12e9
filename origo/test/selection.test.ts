import { seededRandom } from '@mutp/shared';
import { ProxyLoad, selectProxies, SelectableMode } from '../src/selection';
import {
  closeAll,
  connectClient,
  connectProxy,
  heartbeat,
  proxyBarrier,
  requestProxies,
  startOrigo,
  TEST_ASSERTION_KEY,
} from './helpers';

afterEach(closeAll);

const ALL: SelectableMode[] = ['uncoded', 'rlnc', 'fountain'];

function proxy(proxyId: string, o: Partial<Omit<ProxyLoad, 'modes'>> & { modes?: SelectableMode[] } = {}): ProxyLoad {
  return {
    proxyId,
    modes: new Set(o.modes ?? ALL),
    capacityBps: o.capacityBps ?? 1_000_000,
    uploadBps: o.uploadBps ?? 0,
    activeTransfers: o.activeTransfers ?? 0,
    maxTransfers: o.maxTransfers ?? 10,
    ...(o.measuredBps !== undefined ? { measuredBps: o.measuredBps } : {}),
  };
}

const ids = (ps: ProxyLoad[]) => ps.map((p) => p.proxyId);

describe('selection policy (pure)', () => {
  const random = seededRandom(7);

  test('honours count, exclude and mode; full proxies are skipped', () => {
    const proxies = [
      proxy('a'),
      proxy('b', { modes: ['uncoded'] }),
      proxy('c', { activeTransfers: 10, maxTransfers: 10 }),
      proxy('d'),
      proxy('e'),
    ];
    expect(selectProxies(proxies, { count: 2 }, random)).toHaveLength(2);
    expect(ids(selectProxies(proxies, { count: 32 }, random)).sort()).toEqual(['a', 'b', 'd', 'e']);
    expect(ids(selectProxies(proxies, { count: 32, mode: 'rlnc' }, random)).sort()).toEqual(['a', 'd', 'e']);
    expect(ids(selectProxies(proxies, { count: 32, mode: 'uncoded', exclude: ['a', 'e'] }, random)).sort()).toEqual([
      'b',
      'd',
    ]);
    expect(selectProxies(proxies, { count: 3, exclude: ['a', 'b', 'd', 'e'] }, random)).toEqual([]);
  });

  test('prefers free upload capacity, then fewer transfers', () => {
    const proxies = [
      proxy('busy', { capacityBps: 1_000_000, uploadBps: 900_000 }),
      proxy('idle', { capacityBps: 1_000_000, uploadBps: 0 }),
      proxy('half', { capacityBps: 1_000_000, uploadBps: 500_000 }),
      proxy('crowded', { capacityBps: 1_000_000, uploadBps: 0, activeTransfers: 3 }),
    ];
    expect(ids(selectProxies(proxies, { count: 4 }, random))).toEqual(['idle', 'half', 'crowded', 'busy']);
  });

  test('measured throughput wins over a claim; an unmeasured claim is capped at the median measured', () => {
    const proxies = [
      proxy('liar', { capacityBps: 1e12 }),
      proxy('slow', { capacityBps: 50_000_000, measuredBps: 100_000 }),
      proxy('fast', { capacityBps: 1_000_000, measuredBps: 3_000_000 }),
      proxy('mid', { capacityBps: 1_000_000, measuredBps: 1_000_000 }),
    ];
    // Median measured is 1 M: the liar ties with 'mid' at most, and never beats 'fast'.
    for (let i = 0; i < 20; i++) {
      const order = ids(selectProxies(proxies, { count: 4 }, random));
      expect(order[0]).toBe('fast');
      expect(order.slice(1, 3).sort()).toEqual(['liar', 'mid']);
      expect(order[3]).toBe('slow');
    }
  });

  test('an unknown capacity ranks as the median', () => {
    const proxies = [
      proxy('low', { capacityBps: 100_000 }),
      proxy('unknown', { capacityBps: 0 }),
      proxy('mid', { capacityBps: 1_000_000 }),
      proxy('high', { capacityBps: 10_000_000 }),
    ];
    // Median of the known free capacities (100 k, 1 M, 10 M) is 1 M: 'unknown' ties with 'mid'.
    const order = ids(selectProxies(proxies, { count: 4 }, random));
    expect(order[0]).toBe('high');
    expect(order.slice(1, 3).sort()).toEqual(['mid', 'unknown']);
    expect(order[3]).toBe('low');
  });

  test('near-equals (within 10 %) are shuffled, a clearly better proxy always comes first', () => {
    const proxies = [
      proxy('best', { capacityBps: 2_000_000 }),
      proxy('n1', { capacityBps: 1_000_000 }),
      proxy('n2', { capacityBps: 950_000 }),
      proxy('n3', { capacityBps: 920_000 }),
    ];
    const firstOfRest = new Set<string>();
    const seeded = seededRandom(42);
    for (let i = 0; i < 200; i++) {
      const order = ids(selectProxies(proxies, { count: 4 }, seeded));
      expect(order[0]).toBe('best');
      expect(order.slice(1).sort()).toEqual(['n1', 'n2', 'n3']);
      firstOfRest.add(order[1]);
    }
    expect([...firstOfRest].sort()).toEqual(['n1', 'n2', 'n3']);
  });
});

describe('selection over sockets', () => {
  test('request-proxies honours count, exclude, mode and load', async () => {
    const { port } = await startOrigo();
    const a = await connectProxy(port, { proxyId: 'a', name: 'a', capacityBps: 1_000_000, maxTransfers: 2 });
    await connectProxy(port, { proxyId: 'b', name: 'b', capacityBps: 4_000_000, modes: ['uncoded'] });
    const c = await connectProxy(port, { proxyId: 'c', name: 'c', capacityBps: 2_000_000 });
    const client = await connectClient(port);

    expect(await requestProxies(client, 3)).toEqual(['b', 'c', 'a']);
    expect(await requestProxies(client, 1)).toEqual(['b']);
    expect(await requestProxies(client, 3, { mode: 'rlnc' })).toEqual(['c', 'a']);
    expect(await requestProxies(client, 3, { exclude: ['b'] })).toEqual(['c', 'a']);
    expect(await requestProxies(client, 3, { mode: 'fountain', exclude: ['a', 'c'] })).toEqual([]);

    // 'a' is full (2 of 2 transfers), 'c' busy uploading: 'a' disappears, 'c' falls behind.
    heartbeat(a, 2, 0, 1_000_000);
    heartbeat(c, 1, 1_900_000, 2_000_000);
    await proxyBarrier(a);
    await proxyBarrier(c);
    expect(await requestProxies(client, 3)).toEqual(['b', 'c']);

    client.send({ type: 'request-proxies', requestId: 'info', count: 1 });
    const { proxies } = await client.next('proxies', (m) => m.requestId === 'info');
    expect(proxies).toEqual([
      {
        proxyId: 'b',
        name: 'b',
        httpUrl: 'http://b.test:8800/',
        capacityBps: 4_000_000,
        assertionKey: TEST_ASSERTION_KEY,
        token: expect.any(String),
      },
    ]);
  });

  test('no eligible proxy is an empty list, not an error', async () => {
    const { port } = await startOrigo();
    const client = await connectClient(port);
    expect(await requestProxies(client, 4, { mode: 'rlnc' })).toEqual([]);
  });
});

describe('selection from download records', () => {
  /** A complete download in which `proxyId` delivered `bytesPerSecond`. */
  const record = (proxyId: string, bytesPerSecond: number) => ({
    url: 'https://media.test/seg.m4s',
    mode: 'rlnc',
    sources: 1,
    bytes: bytesPerSecond,
    durationMs: 1000,
    goodputBps: bytesPerSecond,
    normalizedGoodput: 1,
    status: 'complete',
    proxies: [{ proxyId, received: 1, useful: 1, share: 1 }],
  });

  test('records of three client networks rank a proxy by what they measured, not by its claim', async () => {
    const { port } = await startOrigo();
    await connectProxy(port, { proxyId: 'claims-a-lot', name: 'claims-a-lot', capacityBps: 1e11 });
    await connectProxy(port, { proxyId: 'delivers', name: 'delivers', capacityBps: 1_000_000 });
    for (let i = 0; i < 3; i++) {
      // Three /24 networks: samples count per network, not per client id or address.
      const client = await connectClient(port, `reporter ${i}`, `127.0.${i + 1}.1`);
      expect((await requestProxies(client, 2)).sort()).toEqual(['claims-a-lot', 'delivers']);
      client.send({ type: 'record', record: record('claims-a-lot', 10_000) });
      client.send({ type: 'record', record: record('delivers', 5_000_000) });
      await requestProxies(client, 1);
    }
    const asker = await connectClient(port, 'asker');
    for (let i = 0; i < 10; i++) expect(await requestProxies(asker, 2)).toEqual(['delivers', 'claims-a-lot']);
  });

  test('32 clients of one /24 forging records cannot make two rogue proxies the top pick (issue 31, attack 1)', async () => {
    const { port } = await startOrigo({ random: seededRandom(31) });
    const honest = ['h1', 'h2', 'h3', 'h4'];
    for (const id of honest) await connectProxy(port, { proxyId: id, name: id, capacityBps: 1_000_000 });
    for (const id of ['rogue-1', 'rogue-2'])
      await connectProxy(port, { proxyId: id, name: id, capacityBps: 1_000_000 });
    // The attacker: 32 client ids on 32 addresses of one /24, each asked for every proxy (so its
    // records may name them) and each "measured" the rogues at 100x the honest proxies' rate.
    for (let i = 0; i < 32; i++) {
      const fake = await connectClient(port, `forger ${i}`, `127.0.9.${i + 1}`);
      await requestProxies(fake, 6);
      fake.send({ type: 'record', record: record('rogue-1', 100_000_000) });
      fake.send({ type: 'record', record: record('rogue-2', 100_000_000) });
      for (const id of honest) fake.send({ type: 'record', record: record(id, 10_000) });
      await requestProxies(fake, 1);
    }
    // Victims ask for two proxies each: the forged rates moved nothing (one network is one vote,
    // and a measurement needs three), and the second place is drawn outside the ranking anyway.
    let bothRogues = 0;
    let rogueFirst = 0;
    for (let v = 0; v < 40; v++) {
      const victim = await connectClient(port, `victim ${v}`, `127.0.${20 + v}.1`);
      const picked = await requestProxies(victim, 2);
      if (picked.every((id) => id.startsWith('rogue'))) bothRogues++;
      if (picked[0].startsWith('rogue')) rogueFirst++;
    }
    // Fair share: the first place is a uniform pick among six equal proxies (two of them rogue),
    // 40 x 2/6 = 13.3 expected; the pair both rogue 40 x (2/6 x 1/5) = 2.7 expected.
    expect(rogueFirst).toBeLessThanOrEqual(24);
    expect(bothRogues).toBeLessThanOrEqual(10);
  });
});

describe('offers count once per network', () => {
  test('one network asking for a proxy again and again does not push it down for everyone (issue 31)', async () => {
    const { port } = await startOrigo({ random: seededRandom(5) });
    await connectProxy(port, { proxyId: 'honest', name: 'honest', capacityBps: 1_000_000 });
    await connectProxy(port, { proxyId: 'rogue', name: 'rogue', capacityBps: 1_000_000 });
    // The attacker's network is offered 'honest' 50 times: before, each offer counted as a
    // transfer it would soon have, so every victim got 'rogue' until the next heartbeat.
    const attacker = await connectClient(port, 'attacker', '127.0.9.1');
    for (let i = 0; i < 50; i++) expect(await requestProxies(attacker, 1, { exclude: ['rogue'] })).toEqual(['honest']);
    let rogue = 0;
    for (let v = 0; v < 10; v++) {
      const victim = await connectClient(port, `victim ${v}`, `127.0.${20 + v}.1`);
      if ((await requestProxies(victim, 1))[0] === 'rogue') rogue++;
    }
    // One offer's worth: the first victim gets 'rogue', then the two alternate.
    expect(rogue).toBeLessThanOrEqual(6);
  });
});

describe('selection draws one place outside the ranking', () => {
  test('the last of several places goes to any eligible proxy, so a clearly best pair is not always the pair', () => {
    const random = seededRandom(7);
    const proxies = [
      proxy('best-1', { capacityBps: 100_000_000 }),
      proxy('best-2', { capacityBps: 50_000_000 }),
      proxy('slow-1', { capacityBps: 1_000_000 }),
      proxy('slow-2', { capacityBps: 1_000_000 }),
    ];
    const seconds = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const picked = selectProxies(proxies, { count: 2 }, random).map((p) => p.proxyId);
      expect(picked[0]).toBe('best-1');
      seconds.set(picked[1], (seconds.get(picked[1]) ?? 0) + 1);
    }
    // Uniform over the three not ranked first: 100 each expected.
    for (const id of ['best-2', 'slow-1', 'slow-2']) expect(seconds.get(id)).toBeGreaterThan(60);
    // One place asked for, or no more eligible than asked: the ranking alone decides.
    expect(selectProxies(proxies, { count: 1 }, random).map((p) => p.proxyId)).toEqual(['best-1']);
    const four = ids(selectProxies(proxies, { count: 4 }, random));
    expect(four.slice(0, 2)).toEqual(['best-1', 'best-2']);
    expect(four.slice(2).sort()).toEqual(['slow-1', 'slow-2']);
  });
});
