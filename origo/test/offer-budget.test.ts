/**
 * Offers are budgeted per client network (issue 31): client ids and the addresses of a /24 are
 * free, the proxies origo offers them are not (each offer is a proxy token origo signs). Another
 * network keeps its own budget; an honest household at the defaults is never refused.
 */
import { DEFAULT_CONFIG } from '../src/config';
import { TokenBucket } from '../src/limits';
import { closeAll, connectClient, connectProxy, OFFER, startOrigo, TestPeer } from './helpers';

afterEach(closeAll);

let asked = 0;
/** How many proxies origo offered for one request-proxies, or its error code. */
async function ask(client: TestPeer, count: number): Promise<number | string> {
  const requestId = `b${++asked}`;
  client.send({ type: 'request-proxies', requestId, count });
  await client.until(
    () => client.received.some((m) => (m.type === 'proxies' || m.type === 'error') && m.requestId === requestId),
    `the answer to ${requestId}`,
  );
  const answer = client.received.find((m) => m.requestId === requestId)!;
  return answer.type === 'proxies' ? (answer.proxies as unknown[]).length : String(answer.code);
}

test('the client ids of one /24 share its offer budget; another /24 is unaffected (issue 31)', async () => {
  const { port, origo } = await startOrigo({ offerRatePerNetwork: 1, offerBurstPerNetwork: 32 });
  for (let i = 1; i <= 4; i++) await connectProxy(port, { proxyId: `edge-${i}`, name: `edge-${i}` });
  // 16 client ids on 16 addresses of one /24, a latecomer of the same /24, a neighbour of another.
  const crowd: TestPeer[] = [];
  for (let i = 1; i <= 16; i++) crowd.push(await connectClient(port, `crowd ${i}`, `127.0.7.${i}`));
  const latecomer = await connectClient(port, 'latecomer', '127.0.7.200');
  const neighbour = await connectClient(port, 'neighbour', '127.0.8.1');

  const started = Date.now();
  let offered = 0;
  let refused: string | undefined;
  for (let round = 0; refused === undefined && round < 10; round++) {
    for (const client of crowd) {
      const answer = await ask(client, 4);
      if (typeof answer === 'string') {
        refused = answer;
        break;
      }
      offered += answer;
    }
  }
  expect(refused).toBe('rate-limited');
  // The burst, and what refilled at 1/s meanwhile: not 16 clients x 10 rounds x 4.
  expect(offered).toBeGreaterThanOrEqual(32);
  expect(offered).toBeLessThanOrEqual(32 + 4 * Math.ceil((Date.now() - started) / 1000));
  expect(await ask(latecomer, 4)).toBe('rate-limited');
  const error = latecomer.received.find((m) => m.type === 'error');
  expect(error).toMatchObject({ code: 'rate-limited', requestId: expect.any(String) });
  expect(String(error?.message)).toContain('this network');
  // Another /24 has its whole burst.
  for (let i = 0; i < 8; i++) expect(await ask(neighbour, 4)).toBe(4);
  const metrics = await origo.metrics.registry.metrics();
  expect(metrics).toMatch(/mutp_origo_offers_refused_total\{reason="rate-limited"\} [1-9]/);
});

test('connections to proxies origo did not offer spend the same budget; offered ones do not (issue 31)', async () => {
  const { port } = await startOrigo({ offerRatePerNetwork: 1, offerBurstPerNetwork: 32 });
  const edge = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
  const [a, b] = [await connectClient(port, 'a', '127.0.9.1'), await connectClient(port, 'b', '127.0.9.2')];
  const started = Date.now();
  // Offered to a (one offer): its connections to it are not charged again.
  expect(await ask(a, 1)).toBe(1);
  for (let i = 0; i < 40; i++) a.send({ type: 'signal', connectionId: `a${i}`, proxyId: 'edge-1', description: OFFER });
  // Never offered to b: each new connection costs its /24 one offer, whatever a spent.
  for (let i = 0; i < 40; i++) b.send({ type: 'signal', connectionId: `b${i}`, proxyId: 'edge-1', description: OFFER });
  await edge.until(() => edge.received.filter((m) => m.type === 'signal').length >= 40 + 31, 'the relayed offers');
  await b.until(() => b.received.some((m) => m.type === 'error'), "b's refusal");
  await new Promise((r) => setTimeout(r, 200));
  const relayed = edge.received.filter((m) => m.type === 'signal');
  expect(relayed.filter((m) => String(m.connectionId).startsWith('a'))).toHaveLength(40);
  // 32 of the burst, one taken by a's offer, and what refilled at 1/s meanwhile: not all 40.
  const fromB = relayed.filter((m) => String(m.connectionId).startsWith('b')).length;
  expect(fromB).toBeGreaterThanOrEqual(31);
  expect(fromB).toBeLessThanOrEqual(31 + Math.ceil((Date.now() - started) / 1000));
  expect(fromB).toBeLessThan(40);
  expect(b.received.find((m) => m.type === 'error')).toMatchObject({ code: 'rate-limited' });
});

test('the default budget never refuses a household of 16 viewers, starting together and then watching', () => {
  let now = 0;
  const bucket = new TokenBucket(DEFAULT_CONFIG.offerRatePerNetwork, DEFAULT_CONFIG.offerBurstPerNetwork, () => now);
  // Start: each viewer fills a 3-segment buffer for video and audio, 4 proxies per download,
  // with a third of them asked again for replacements: 16 x 32 proxies at once.
  let refused = 0;
  for (let i = 0; i < 16 * 8; i++) if (!bucket.take(4)) refused++;
  // Then 2-second segments of video and audio, 4 proxies each, for an hour: 64 proxies/s.
  for (let segment = 0; segment < 1800; segment++) {
    now += 2000;
    for (let download = 0; download < 16 * 2; download++) if (!bucket.take(4)) refused++;
  }
  expect(refused).toBe(0);
  // A 17th viewer's share more is where it ends.
  now += 2000;
  for (let download = 0; download < 17 * 2; download++) if (!bucket.take(4)) refused++;
  expect(refused).toBe(2);
});
