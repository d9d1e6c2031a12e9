import { SIGNALLING_VERSION } from '@mutp/shared';
import {
  barrier,
  closeAll,
  connectClient,
  connectProxy,
  proxyBarrier,
  requestProxies,
  startOrigo,
  TestPeer,
} from './helpers';

afterEach(closeAll);

const URL_A = 'https://media.example/seg-1.m4s';

function stagedBy(proxyClientId: string, requestId: string, extra: Record<string, unknown> = {}) {
  return {
    type: 'staged',
    clientId: proxyClientId,
    requestId,
    status: 'staged',
    originMs: 42,
    cached: false,
    bytes: 2_097_152,
    ...extra,
  };
}

describe('staging hints through origo', () => {
  test('a hint reaches the offered proxy and its answer comes back to the client', async () => {
    const { port, http } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    expect(await requestProxies(client, 1)).toEqual(['edge-1']);

    client.send({
      type: 'stage',
      requestId: 's1',
      url: URL_A,
      range: { start: 0, length: 1000 },
      proxyIds: ['edge-1'],
    });
    expect(await proxy.next('stage')).toEqual({
      type: 'stage',
      clientId: client.id,
      clientNetwork: '127.0.0.0/24',
      requestId: 's1',
      url: URL_A,
      range: { start: 0, length: 1000 },
    });
    proxy.send(stagedBy(client.id, 's1'));
    expect(await client.next('staged')).toEqual({
      type: 'staged',
      requestId: 's1',
      proxyId: 'edge-1',
      status: 'staged',
      originMs: 42,
      cached: false,
      bytes: 2_097_152,
    });
    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_stage_hints_total{outcome="forwarded"} 1');
    expect(metrics).toContain('mutp_origo_stage_hints_total{outcome="staged"} 1');
  });

  test("a hint's layout reaches the proxy as the client sent it", async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    await requestProxies(client, 1);
    const layout = { mode: 'fountain', symbolSize: 1120, generationSize: 24 };
    client.send({ type: 'stage', requestId: 's1', url: URL_A, layout, proxyIds: ['edge-1'] });
    expect(await proxy.next('stage')).toEqual({
      type: 'stage',
      clientId: client.id,
      clientNetwork: '127.0.0.0/24',
      requestId: 's1',
      url: URL_A,
      layout,
    });
    // Whether the proxy prepared the encoder comes back with its answer.
    proxy.send(stagedBy(client.id, 's1', { prepared: true }));
    expect(await client.next('staged')).toMatchObject({ requestId: 's1', status: 'staged', prepared: true });
  });

  test('a proxy origo did not offer this client is not asked', async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);

    client.send({ type: 'stage', requestId: 's1', url: URL_A, proxyIds: ['edge-1', 'nowhere'] });
    const answers = [await client.next('staged'), await client.next('staged')];
    expect(answers.map((a) => [a.proxyId, a.status, a.error]).sort()).toEqual([
      ['edge-1', 'failed', 'not-offered'],
      ['nowhere', 'failed', 'not-offered'],
    ]);
    await proxyBarrier(proxy);
    expect(proxy.received.filter((m) => m.type === 'stage')).toEqual([]);
  });

  test.each([
    ['still open (origo has not noticed it died)', false],
    ['closed at origo before the new one said hello', true],
  ])(
    'a client back on a new socket with its token, the old one %s, may still stage at the proxies it was offered',
    async (_how, closeFirst) => {
      const { port } = await startOrigo();
      const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
      const first = await TestPeer.open(port, '/v1/client', 'before-the-gap');
      first.send({ type: 'hello', version: SIGNALLING_VERSION });
      const welcome = await first.next('welcome');
      expect(await requestProxies(first, 1)).toEqual(['edge-1']);
      if (closeFirst) {
        first.close();
        await first.closed();
      }
      const second = await TestPeer.open(port, '/v1/client', 'after-the-gap');
      second.send({ type: 'hello', version: SIGNALLING_VERSION, token: welcome.token });
      expect((await second.next('welcome')).clientId).toBe(welcome.clientId);
      second.send({ type: 'stage', requestId: 's2', url: URL_A, proxyIds: ['edge-1'] });
      expect(await proxy.next('stage')).toMatchObject({ type: 'stage', clientId: welcome.clientId, requestId: 's2' });
    },
  );

  test("a proxy cannot answer a hint it was not sent, nor another client's", async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port, 'client');
    const other = await connectClient(port, 'other');
    await requestProxies(client, 1);
    client.send({ type: 'stage', requestId: 's1', url: URL_A, proxyIds: ['edge-1'] });
    await proxy.next('stage');

    proxy.send(stagedBy(client.id, 'never-asked'));
    proxy.send(stagedBy(other.id, 's1'));
    await proxyBarrier(proxy);
    await barrier(client);
    await barrier(other);
    expect(client.received.filter((m) => m.type === 'staged')).toEqual([]);
    expect(other.received.filter((m) => m.type === 'staged')).toEqual([]);

    // The real answer still gets through, once.
    proxy.send(stagedBy(client.id, 's1'));
    expect((await client.next('staged')).requestId).toBe('s1');
    proxy.send(stagedBy(client.id, 's1'));
    await proxyBarrier(proxy);
    await barrier(client);
    expect(client.received.filter((m) => m.type === 'staged')).toEqual([]);
  });

  test('hints are budgeted per proxy named: past the burst they are answered rate-limited', async () => {
    const { port } = await startOrigo({ stageRatePerSecond: 1, stageBurst: 3 });
    const proxies = [
      await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' }),
      await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2' }),
    ];
    const client = await connectClient(port);
    expect((await requestProxies(client, 2)).sort()).toEqual(['edge-1', 'edge-2']);

    // 2 + 2 proxies named against a burst of 3: the fourth is refused without reaching edge-2.
    client.send({ type: 'stage', requestId: 's1', url: URL_A, proxyIds: ['edge-1', 'edge-2'] });
    client.send({ type: 'stage', requestId: 's2', url: URL_A, proxyIds: ['edge-1', 'edge-2'] });
    const refused = await client.next('staged');
    expect(refused).toMatchObject({ requestId: 's2', proxyId: 'edge-2', status: 'failed', error: 'rate-limited' });
    await barrier(client);
    for (const p of proxies) await proxyBarrier(p);
    expect(proxies[0].received.filter((m) => m.type === 'stage').map((m) => m.requestId)).toEqual(['s1', 's2']);
    expect(proxies[1].received.filter((m) => m.type === 'stage').map((m) => m.requestId)).toEqual(['s1']);
  });

  test('a malformed hint is an invalid frame, not forwarded', async () => {
    const { port, http } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    await requestProxies(client, 1);
    client.send({ type: 'stage', requestId: 's1', url: 'file:///etc/passwd', proxyIds: ['edge-1'] });
    client.send({
      type: 'stage',
      requestId: 's2',
      url: URL_A,
      range: { start: 0, length: 0 },
      proxyIds: ['edge-1'],
    });
    client.send({ type: 'stage', requestId: 's3', url: URL_A, proxyIds: [] });
    // Layouts no REQUEST could have: a 15-byte symbol, generation 0, an unknown mode.
    for (const [i, layout] of [
      { mode: 'rlnc', symbolSize: 15, generationSize: 24 },
      { mode: 'rlnc', symbolSize: 1120, generationSize: 0 },
      { mode: 'http', symbolSize: 1120, generationSize: 24 },
    ].entries())
      client.send({ type: 'stage', requestId: `l${i}`, url: URL_A, layout, proxyIds: ['edge-1'] });
    await barrier(client);
    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_invalid_messages_total{kind="schema"} 6');
    await proxyBarrier(proxy);
    expect(proxy.received.filter((m) => m.type === 'stage')).toEqual([]);
  });
});
