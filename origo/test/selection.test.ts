import { seededRandom } from '@mutp/shared';
import { ProxyLoad, selectProxies, SelectableMode } from '../src/selection';
import { closeAll, connectClient, connectProxy, heartbeat, proxyBarrier, requestProxies, startOrigo } from './helpers';

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
    expect(proxies).toEqual([{ proxyId: 'b', name: 'b', httpUrl: 'http://b.test:8800/', capacityBps: 4_000_000 }]);
  });

  test('no eligible proxy is an empty list, not an error', async () => {
    const { port } = await startOrigo();
    const client = await connectClient(port);
    expect(await requestProxies(client, 4, { mode: 'rlnc' })).toEqual([]);
  });
});
