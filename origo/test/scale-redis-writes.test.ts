/**
 * The shared registry at scale (cluster/redis.ts): heartbeats and picks are coalesced into one
 * pipeline per turn of the event loop, a beat that changed nothing but the beat time only
 * extends the key's expiry, and the registry read reuses what it parsed when the text is the
 * same. Against a real redis-server.
 */
import pino from 'pino';
import { Redis } from 'ioredis';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { waitFor } from '@mutp/testing/wait';
import type { SharedProxy } from '../src/cluster/cluster';
import { RedisCluster } from '../src/cluster/redis';

let redis: RedisServer;
let peek: Redis;
const clusters: RedisCluster[] = [];
let prefix = 0;

beforeAll(async () => {
  redis = await startRedis();
  peek = new Redis(redis.url);
}, 20_000);

afterAll(async () => {
  await Promise.all(clusters.map((c) => c.close()));
  peek?.disconnect();
  await redis?.stop();
});

/** A started instance on its own key prefix (one per test), refreshing every 50 ms. */
async function instance(id: string, p: string): Promise<RedisCluster> {
  const cluster = new RedisCluster({
    url: redis.url,
    instanceId: id,
    prefix: p,
    refreshMs: 50,
    staleAfterMs: 10_000,
    log: pino({ level: 'silent' }),
  });
  clusters.push(cluster);
  await cluster.start({ onMessage: () => {}, onResync: () => {} });
  return cluster;
}

function proxy(over: Partial<SharedProxy> = {}): SharedProxy {
  return {
    proxyId: 'p-1',
    instanceId: 'a',
    name: 'p-1',
    httpUrl: 'http://127.0.0.1:8800/',
    modes: ['rlnc'],
    capacityBps: 1000,
    uploadBps: 0,
    activeTransfers: 0,
    maxTransfers: 10,
    registeredAt: 1,
    lastHeartbeatAt: 1,
    ...over,
  };
}

const stored = async (key: string) => {
  const raw = await peek.get(key);
  return raw === null ? undefined : (JSON.parse(raw) as SharedProxy);
};

test('a beat that changed nothing else extends the expiry only; a change is written at once', async () => {
  const p = `t${++prefix}:`;
  const a = await instance('a', p);
  a.publishProxy(proxy({ lastHeartbeatAt: 1 }), 2000);
  await waitFor('the first write', async () => (await stored(`${p}proxy:p-1`))?.lastHeartbeatAt);
  await peek.pexpire(`${p}proxy:p-1`, 500);
  a.publishProxy(proxy({ lastHeartbeatAt: 2 }), 60_000);
  await waitFor('the expiry extended', async () => ((await peek.pttl(`${p}proxy:p-1`)) > 10_000 ? true : undefined));
  expect((await stored(`${p}proxy:p-1`))?.lastHeartbeatAt).toBe(1);
  a.publishProxy(proxy({ lastHeartbeatAt: 3, activeTransfers: 4 }), 60_000);
  const changed = await waitFor('the change written', async () => {
    const s = await stored(`${p}proxy:p-1`);
    return s?.activeTransfers === 4 ? s : undefined;
  });
  expect(changed.lastHeartbeatAt).toBe(3);
  expect(await peek.smembers(`${p}proxies`)).toEqual(['p-1']);
});

test('a key gone behind its back (expired in a stall, Redis emptied) is written in full at once', async () => {
  const p = `t${++prefix}:`;
  const a = await instance('a', p);
  a.publishProxy(proxy(), 60_000);
  await waitFor('the first write', async () => stored(`${p}proxy:p-1`));
  await peek.del(`${p}proxy:p-1`);
  await peek.srem(`${p}proxies`, 'p-1'); // as another instance's read prunes an id without its key
  a.publishProxy(proxy({ lastHeartbeatAt: 2 }), 60_000); // expiry only: PEXPIRE finds no key
  const back = await waitFor('the entry written again', async () => stored(`${p}proxy:p-1`));
  expect(back.lastHeartbeatAt).toBe(2);
  expect(await peek.pttl(`${p}proxy:p-1`)).toBeGreaterThan(10_000);
  expect(await peek.smembers(`${p}proxies`)).toEqual(['p-1']);
});

test('picks of one turn add up, and a beat clears those before it, not those after', async () => {
  const p = `t${++prefix}:`;
  const a = await instance('a', p);
  for (let i = 0; i < 3; i++) a.notePick('p-1', 60_000);
  await waitFor('3 picks', async () => ((await peek.get(`${p}picks:p-1`)) === '3' ? true : undefined));
  a.notePick('p-1', 60_000);
  a.clearPicks('p-1');
  a.notePick('p-1', 60_000);
  await waitFor('1 pick after the beat', async () => ((await peek.get(`${p}picks:p-1`)) === '1' ? true : undefined));
});

test('another instance reads an unchanged entry as the same object, a changed one anew', async () => {
  const p = `t${++prefix}:`;
  const a = await instance('a', p);
  const b = await instance('b', p);
  a.publishProxy(proxy(), 60_000);
  const first = await waitFor('b to see p-1', async () => b.remoteProxies().get('p-1'));
  a.publishProxy(proxy({ lastHeartbeatAt: 2 }), 60_000);
  // Several reads later it is still the object first read (the text in Redis did not change).
  await new Promise((r) => setTimeout(r, 300));
  expect(b.remoteProxies().get('p-1')).toBe(first);
  a.publishProxy(proxy({ lastHeartbeatAt: 3, uploadBps: 500 }), 60_000);
  const next = await waitFor('b to read the change', async () => {
    const seen = b.remoteProxies().get('p-1');
    return seen?.uploadBps === 500 ? seen : undefined;
  });
  expect(next).not.toBe(first);
  // Its own proxies are not remote to it.
  expect(a.remoteProxies().has('p-1')).toBe(false);
});

test('a withdrawn proxy is not written back by a beat queued in the same turn', async () => {
  const p = `t${++prefix}:`;
  const a = await instance('a', p);
  a.publishProxy(proxy(), 60_000);
  await waitFor('the first write', async () => stored(`${p}proxy:p-1`));
  a.publishProxy(proxy({ activeTransfers: 1 }), 60_000);
  a.withdrawProxy('p-1');
  await new Promise((r) => setTimeout(r, 100));
  expect(await stored(`${p}proxy:p-1`)).toBeUndefined();
  expect(await peek.smembers(`${p}proxies`)).toEqual([]);
});
