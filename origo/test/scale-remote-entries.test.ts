/**
 * request-proxies walks every proxy of the cluster: the other instances' proxies are listed once
 * per registry read and per change of this instance's proxies (broker/state.ts), never per request,
 * and the list stays exact (a proxy that moved here is not listed as remote).
 */
import type { Cluster, SharedProxy } from '../src/cluster/cluster';
import { resolveConfig } from '../src/config';
import { BrokerState, type BrokerDeps, type ProxyEntry, VersionedMap } from '../src/broker/state';

const shared = (proxyId: string): SharedProxy => ({
  proxyId,
  instanceId: 'other',
  name: proxyId,
  httpUrl: 'http://127.0.0.1:8800/',
  modes: ['rlnc'],
  capacityBps: 1000,
  uploadBps: 0,
  activeTransfers: 0,
  maxTransfers: 10,
  registeredAt: 1,
});

test('a VersionedMap counts insertions and deletions, not updates', () => {
  const map = new VersionedMap<string, number>();
  map.set('a', 1);
  map.set('a', 2);
  expect(map.version).toBe(1);
  map.delete('b');
  expect(map.version).toBe(1);
  map.delete('a');
  map.clear();
  expect(map.version).toBe(3);
});

test('remote entries are listed once per registry read, and again when a proxy moves here', () => {
  let read: ReadonlyMap<string, SharedProxy> = new Map([
    ['p-1', shared('p-1')],
    ['p-2', shared('p-2')],
  ]);
  // Only what remoteEntries reads of the cluster: its last registry read.
  const cluster = { remoteProxies: () => read } as unknown as Cluster;
  const state = new BrokerState(resolveConfig({ proxySecret: 'test-secret' }), { cluster } as unknown as BrokerDeps);
  const first = state.remoteEntries();
  expect(first.map((p) => p.proxyId)).toEqual(['p-1', 'p-2']);
  expect(state.remoteEntries()).toBe(first);

  const local = { proxyId: 'p-2' } as ProxyEntry;
  state.proxies.set('p-2', local);
  expect(state.remoteEntries().map((p) => p.proxyId)).toEqual(['p-1']);
  state.proxies.set('p-2', local); // an update (a heartbeat) lists nothing again
  const afterMove = state.remoteEntries();
  expect(state.remoteEntries()).toBe(afterMove);

  read = new Map([['p-3', shared('p-3')]]);
  expect(state.remoteEntries().map((p) => p.proxyId)).toEqual(['p-3']);
  state.proxies.delete('p-2');
  expect(state.remoteEntries().map((p) => p.proxyId)).toEqual(['p-3']);
});
