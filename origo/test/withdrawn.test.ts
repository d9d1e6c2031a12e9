/**
 * Withdrawn proxies (origo reselection): when origo stops offering a proxy because it drains,
 * pollution reports stopped it or its key was revoked, the clients it was offered to hear it
 * (`withdrawn`) and move their next segments elsewhere; clients never offered it hear nothing,
 * and a proxy flipping `draining` cannot make origo repeat the notice at heartbeat rate. Real
 * origo, real sockets (the cluster case is in cluster.test.ts).
 */
import { writeFileSync } from 'node:fs';
import {
  barrier,
  closeAll,
  connectClient,
  connectProxy,
  KEY9,
  keysFile,
  proxyBarrier,
  requestProxies,
  startOrigo,
  TestPeer,
} from './helpers';

afterEach(closeAll);

function beat(proxy: TestPeer, draining: boolean): void {
  proxy.send({ type: 'heartbeat', activeTransfers: 0, uploadBps: 0, capacityBps: 1_000_000, draining });
}

const withdrawals = (client: TestPeer) => client.received.filter((m) => m.type === 'withdrawn');

test('a proxy that begins to drain is withdrawn from the clients it was offered to, once', async () => {
  const { port } = await startOrigo();
  const leaving = await connectProxy(port, { proxyId: 'edge-a', name: 'edge-a' });
  await connectProxy(port, { proxyId: 'edge-b', name: 'edge-b' });
  const offeredBoth = await connectClient(port, 'offered both');
  expect((await requestProxies(offeredBoth, 2)).sort()).toEqual(['edge-a', 'edge-b']);
  const offeredOther = await connectClient(port, 'offered edge-b only');
  expect(await requestProxies(offeredOther, 2, { exclude: ['edge-a'] })).toEqual(['edge-b']);

  beat(leaving, true);
  expect(await offeredBoth.next('withdrawn')).toEqual({ type: 'withdrawn', proxyId: 'edge-a', reason: 'draining' });

  // Flipping back and draining again within the minute: no second notice.
  beat(leaving, false);
  beat(leaving, true);
  await proxyBarrier(leaving);
  await barrier(offeredBoth);
  await barrier(offeredOther);
  expect(withdrawals(offeredBoth)).toEqual([]);
  expect(withdrawals(offeredOther)).toEqual([]);
});

test('pollution reports withdraw nothing: a report is no proof origo can check (issue 31)', async () => {
  const { port } = await startOrigo();
  const rogue = await connectProxy(port, { proxyId: 'rogue', name: 'rogue' });
  const bystander = await connectClient(port, 'bystander', '127.0.0.9');
  expect(await requestProxies(bystander, 1)).toEqual(['rogue']);
  for (const from of ['127.0.3.1', '127.0.4.1', '127.0.5.1']) {
    const reporter = await connectClient(port, `reporter@${from}`, from);
    expect(await requestProxies(reporter, 1)).toEqual(['rogue']);
    reporter.send({ type: 'report', proxyId: rogue.id, kind: 'data' });
    await barrier(reporter);
  }
  await barrier(bystander);
  expect(withdrawals(bystander)).toEqual([]);
});

test('a proxy whose key is revoked is withdrawn from the clients it was offered to', async () => {
  const file = keysFile({ 'edge-9': KEY9 });
  const { port, origo } = await startOrigo({ proxySecret: undefined, proxyKeysFile: file });
  await connectProxy(port, { proxyId: 'edge-9', name: 'edge-9', secret: KEY9 });
  const client = await connectClient(port);
  expect(await requestProxies(client, 1)).toEqual(['edge-9']);
  writeFileSync(file, JSON.stringify({}));
  origo.reloadProxyKeys();
  expect(await client.next('withdrawn')).toEqual({ type: 'withdrawn', proxyId: 'edge-9', reason: 'revoked' });
});
