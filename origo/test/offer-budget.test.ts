/**
 * Offers are budgeted per client network (issue 31): client ids and the addresses of a /24 are
 * free, the proxies origo offers them are not (each offer is a proxy token origo signs). Another
 * network keeps its own budget; an honest household at the defaults is never refused.
 */
import { DEFAULT_CONFIG } from '../src/config';
import { TokenBucket } from '../src/limits';
import { closeAll, connectClient, connectProxy, startOrigo, TestPeer } from './helpers';

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
