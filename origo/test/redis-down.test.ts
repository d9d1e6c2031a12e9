/**
 * An instance that cannot reach Redis stops offering the proxies it cannot reach (issue 34):
 * signalling to another instance's proxy goes over Redis, so such an offer would fail. Before,
 * the instance kept offering them until its last read of the registry expired (a heartbeat
 * timeout: ~6 s by default, 15 s here); now it stops as soon as it sees Redis gone, keeps
 * offering its own proxies, and offers the others again once Redis is back.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { waitFor } from '@mutp/testing/wait';
import { closeAll, connectClient, connectProxy, requestProxies, startOrigo, TestPeer } from './helpers';

let redis: RedisServer;
let dir: string;
let tokenKey: string;

beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'origo-redis-down-'));
  tokenKey = join(dir, 'token.pem');
  writeFileSync(tokenKey, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
});
afterEach(() => closeAll());
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Until `client` is offered exactly `expected` (sorted ids), within `ms`. */
function offeredWithin(client: TestPeer, expected: string[], ms: number, what: string): Promise<true> {
  return waitFor(
    what,
    async () => ((await requestProxies(client, 8)).sort().join() === [...expected].sort().join() ? true : undefined),
    ms,
    50,
  );
}

test('redis down: the instance offers its own proxies only, at once, and the others again when redis is back', async () => {
  const options = {
    redisUrl: redis.url,
    redisPrefix: 'down:',
    tokenKeyFile: tokenKey,
    clusterRefreshMs: 100,
    // Entries of the last read would live 15 s: what is asserted is far quicker than that.
    heartbeatIntervalMs: 5000,
  };
  const a = await startOrigo({ ...options, instanceId: 'A' });
  const b = await startOrigo({ ...options, instanceId: 'B' });
  const remote = await connectProxy(a.port, { name: 'edge-a' });
  const local = await connectProxy(b.port, { name: 'edge-b' });
  const client = await connectClient(b.port);
  await offeredWithin(client, [remote.id, local.id], 5000, 'B to offer both proxies');
  await redis.kill();
  try {
    const killedAt = Date.now();
    await offeredWithin(client, [local.id], 3000, 'B to offer its own proxy only');
    expect(Date.now() - killedAt).toBeLessThan(3000);
  } finally {
    await redis.start();
  }
  await offeredWithin(client, [remote.id, local.id], 10_000, 'B to offer both proxies again');
});
