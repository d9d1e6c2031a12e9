import { Redis } from 'ioredis';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { pruneGone } from '../src/cluster/redis';

/**
 * The registry read prunes the ids whose proxy key it found gone. Between that read and the prune
 * the owner may write a key again (one expired in a stall is written in full at once): that id
 * must stay in the set, or the other instances lose a live proxy until its next full write
 * (issue 34: offers of it failed `unknown-proxy`).
 */

let redis: RedisServer | undefined;
let client: Redis | undefined;

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
});
afterAll(async () => {
  await client?.quit();
  await redis?.stop();
});

test('an id whose key was written again since the read stays in the set; one still gone goes', async () => {
  const prefix = 'prune-test:';
  await client!.sadd(`${prefix}proxies`, 'rewritten', 'gone', 'other');
  // 'rewritten' was gone at the read and is back now (its owner's SET + SADD landed first).
  await client!.set(`${prefix}proxy:rewritten`, '{}', 'PX', 60_000);
  await client!.set(`${prefix}proxy:other`, '{}', 'PX', 60_000);
  const removed = await pruneGone(client!, prefix, ['rewritten', 'gone']);
  expect(removed).toBe(1);
  expect((await client!.smembers(`${prefix}proxies`)).sort()).toEqual(['other', 'rewritten']);
});

test('ids only: another prefix and keys without a member are left alone', async () => {
  await client!.sadd('elsewhere:proxies', 'gone');
  expect(await pruneGone(client!, 'mine:', ['gone', 'never-added'])).toBe(0);
  expect(await client!.smembers('elsewhere:proxies')).toEqual(['gone']);
});
