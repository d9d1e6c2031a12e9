/** startRedis(): a private redis-server that answers, restarts empty on the same port, and goes away. */
import Redis from 'ioredis';
import { startRedis } from '../src/redis';

test('a private redis-server starts, restarts on its port and stops', async () => {
  const server = await startRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await redis.connect();
    await redis.set('k', 'v');
    expect(await redis.get('k')).toBe('v');
    await server.restart();
    // No persistence: the restarted server is empty; ioredis reconnects by itself.
    expect(await redis.get('k')).toBeNull();
  } finally {
    redis.disconnect();
    await server.stop();
  }
  const probe = new Redis(server.url, { maxRetriesPerRequest: 0, lazyConnect: true, retryStrategy: () => null });
  await expect(probe.connect()).rejects.toThrow();
  probe.disconnect();
});
