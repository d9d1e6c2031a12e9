/**
 * OfferIndex keeps what request-proxies offers from up to date (origo/src/offer-index.ts): the
 * changes it is told of and the ones it must notice by itself (registrations and removals, a new
 * registry read, losing the other instances, bans starting and ending by the clock). Each test
 * changes one thing between two requests and checks the next offer sees it.
 */
import { seededRandom } from '@mutp/shared';
import { SoloCluster, type Cluster, type SharedProxy } from '../src/cluster/cluster';
import { resolveConfig } from '../src/config';
import { BrokerState, type BrokerDeps, type ProxyEntry } from '../src/broker/state';
import { OfferIndex } from '../src/offer-index';
import { banSubjects } from '../src/proven-false-bans';

/** What a test sets of the cluster: its last registry read and whether it reaches the others. */
interface Script {
  read: ReadonlyMap<string, SharedProxy>;
  healthy: boolean;
}

/** A shared cluster as the script says; picks and bans are SoloCluster's own. */
function scriptedCluster(script: Script): Cluster {
  const solo = new SoloCluster('this');
  const scripted: Partial<Record<keyof Cluster, () => unknown>> = {
    shared: () => true,
    healthy: () => script.healthy,
    remoteProxies: () => () => script.read,
  };
  return new Proxy(solo, {
    get: (target, key, receiver) => scripted[key as keyof Cluster]?.() ?? Reflect.get(target, key, receiver),
  }) as unknown as Cluster;
}

const load = {
  modes: new Set(['rlnc'] as const),
  capacityBps: 1_000_000,
  uploadBps: 0,
  activeTransfers: 0,
  maxTransfers: 10,
};

function localProxy(proxyId: string): ProxyEntry {
  return { proxyId, name: proxyId, httpUrl: `http://127.0.0.1:1/${proxyId}`, ...load } as unknown as ProxyEntry;
}

function remoteProxy(proxyId: string): SharedProxy {
  return {
    ...load,
    proxyId,
    instanceId: 'other',
    name: proxyId,
    httpUrl: `http://127.0.0.1:2/${proxyId}`,
    modes: ['rlnc'],
    registeredAt: 1,
  };
}

function setUp() {
  const script: Script = { read: new Map(), healthy: true };
  const cluster = scriptedCluster(script);
  const state = new BrokerState(resolveConfig({ proxySecret: 'test-secret' }), { cluster } as unknown as BrokerDeps);
  const offers = new OfferIndex(state);
  const random = seededRandom(7);
  const offered = (count = 8): string[] =>
    offers
      .choose('203.0.113.9', { count, mode: 'rlnc' }, random)
      .map((c) => c.proxyId)
      .sort();
  return { cluster, script, state, offers, offered };
}

afterEach(() => jest.restoreAllMocks());

test('a registration or removal is noticed at the next request, without being told', () => {
  const { state, offered } = setUp();
  state.proxies.set('a', localProxy('a'));
  expect(offered()).toEqual(['a']);
  state.proxies.set('b', localProxy('b'));
  expect(offered()).toEqual(['a', 'b']);
  state.proxies.delete('a');
  expect(offered()).toEqual(['b']);
});

test('a told change moves the proxy: a full one is no longer offered, and is again once it has room', () => {
  const { state, offers, offered } = setUp();
  const a = localProxy('a');
  state.proxies.set('a', a);
  state.proxies.set('b', localProxy('b'));
  expect(offered()).toEqual(['a', 'b']);
  a.activeTransfers = a.maxTransfers; // a heartbeat updates the entry in place, then tells the index
  offers.changed('a');
  expect(offered()).toEqual(['b']);
  a.activeTransfers = 1;
  offers.changed('a');
  expect(offered()).toEqual(['a', 'b']);
});

test("the other instances' proxies follow each registry read, and go while the cluster is unreachable", () => {
  const { script, state, offered } = setUp();
  state.proxies.set('a', localProxy('a'));
  script.read = new Map([['r1', remoteProxy('r1')]]);
  expect(offered()).toEqual(['a', 'r1']);
  script.read = new Map([
    ['r1', remoteProxy('r1')],
    ['r2', remoteProxy('r2')],
  ]);
  expect(offered()).toEqual(['a', 'r1', 'r2']);
  script.healthy = false; // stale shared state: offer only what this instance holds
  expect(offered()).toEqual(['a']);
  script.healthy = true;
  expect(offered()).toEqual(['a', 'r1', 'r2']);
});

test('a ban takes a proxy out at once, and it is offered again after the ban ends by the clock', () => {
  const { cluster, state, offered } = setUp();
  let now = 1_000_000;
  jest.spyOn(Date, 'now').mockImplementation(() => now);
  state.proxies.set('a', localProxy('a'));
  state.proxies.set('b', localProxy('b'));
  expect(offered()).toEqual(['a', 'b']);
  cluster.banProvenFalse(banSubjects({ proxyId: 'a' }), now + 5_000);
  expect(offered()).toEqual(['b']);
  now += 4_000; // still banned: a re-read within the ban keeps it out
  expect(offered()).toEqual(['b']);
  now += 2_000; // past the end; nobody announces it, the once-a-second re-read notices
  expect(offered()).toEqual(['a', 'b']);
});
