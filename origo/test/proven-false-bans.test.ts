/** Proven-false bans on their own (cluster.test.ts runs them across instances on a real Redis). */
import { SoloCluster } from '../src/cluster/cluster';
import { BanList, bannedUntil, banSubjects } from '../src/proven-false-bans';

test('a ban names the id, and the key with per-proxy keys; either one bans the proxy', () => {
  expect(banSubjects({ proxyId: 'edge-1' })).toEqual(['id:edge-1']);
  expect(banSubjects({ proxyId: 'edge-1', keyFingerprint: 'fp' })).toEqual(['id:edge-1', 'key:fp']);
  const cluster = new SoloCluster('solo');
  cluster.banProvenFalse(banSubjects({ proxyId: 'edge-1', keyFingerprint: 'fp' }), 1000);
  expect(bannedUntil(cluster, { proxyId: 'edge-1' }, 0)).toBe(1000);
  expect(bannedUntil(cluster, { proxyId: 'other-id', keyFingerprint: 'fp' }, 0)).toBe(1000);
  expect(bannedUntil(cluster, { proxyId: 'edge-2', keyFingerprint: 'fp2' }, 0)).toBeUndefined();
  expect(bannedUntil(cluster, { proxyId: 'edge-1' }, 1000)).toBeUndefined();
});

test('expired bans are forgotten; a ban again keeps the later end; beyond the bound the oldest goes', () => {
  const bans = new BanList(2);
  bans.add('id:a', 100);
  bans.add('id:a', 50);
  expect(bans.get('id:a', 0)).toBe(100);
  bans.add('id:b', 200);
  bans.add('id:c', 300);
  expect(bans.size).toBe(2);
  expect(bans.get('id:a', 0)).toBeUndefined();
  expect(bans.entries(250)).toEqual([['id:c', 300]]);
  expect(bans.get('id:b', 200)).toBeUndefined();
  expect(bans.size).toBe(1);
});
