/**
 * Operators across origo instances (issue 31, independence): a proxy registered on one instance
 * is offered by another with the operator origo's keys file named, through the shared state
 * (cluster SharedProxy) over a real redis-server.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { waitFor } from '@mutp/testing/wait';
import {
  closeAll,
  connectClient,
  KEY9,
  registerMessage,
  requestProxies,
  startOrigo,
  TestPeer,
  within,
} from './helpers';

const KEYS = {
  x1: { key: `${KEY9}-x1`, operator: 'X' },
  x2: { key: `${KEY9}-x2`, operator: 'X' },
  y1: `${KEY9}-y1`,
};

let redis: RedisServer;
let dir: string;

beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'origo-operator-cluster-'));
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(join(dir, 'token.pem'), privateKey.export({ format: 'pem', type: 'pkcs8' }));
  writeFileSync(join(dir, 'proxy-keys.json'), JSON.stringify(KEYS), { mode: 0o600 });
});
afterEach(() => closeAll());
afterAll(async () => {
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('another instance offers a proxy with its operator; two of one operator are not both offered', async () => {
  const options = {
    redisUrl: redis.url,
    redisPrefix: 'operators:',
    tokenKeyFile: join(dir, 'token.pem'),
    clusterRefreshMs: 100,
    proxySecret: undefined,
    proxyKeysFile: join(dir, 'proxy-keys.json'),
  };
  const a = await startOrigo({ ...options, instanceId: 'A' });
  const b = await startOrigo({ ...options, instanceId: 'B' });
  for (const [id, secret] of [
    ['x1', KEYS.x1.key],
    ['x2', KEYS.x2.key],
    ['y1', KEYS.y1],
  ]) {
    const peer = await TestPeer.open(a.port, '/v1/proxy', id);
    peer.send(registerMessage({ proxyId: id, name: id, secret }));
    await within(peer.next('registered'), `${id} registered`);
  }
  const client = await connectClient(b.port, 'viewer');
  await waitFor('B sees the three proxies of A', async () =>
    (await requestProxies(client, 3)).length === 3 ? true : undefined,
  );
  for (let i = 0; i < 10; i++) {
    client.send({ type: 'request-proxies', requestId: `r${i}`, count: 2 });
    const offer = await within(
      client.next('proxies', (m) => m.requestId === `r${i}`),
      'the offer',
    );
    const operators = (offer.proxies as { proxyId: string; operator?: string }[]).map((p) => p.operator ?? p.proxyId);
    expect(operators.sort()).toEqual(['X', 'y1']);
    expect(offer.operatorsConcentrated).toBeUndefined();
  }
});
