import { DownloadRecord } from '@mutp/shared';
import { waitFor } from '@mutp/testing/wait';
import {
  ADMIN,
  barrier,
  closeAll,
  connectClient,
  connectProxy,
  getJson,
  proxyBarrier,
  requestProxies,
  startOrigo,
} from './helpers';

afterEach(closeAll);

function record(mode: DownloadRecord['mode'], url: string, extra: Partial<DownloadRecord> = {}): DownloadRecord {
  return {
    url,
    mode,
    sources: 2,
    bytes: 2_097_152,
    durationMs: 812.5,
    goodputBps: 2_581_110,
    normalizedGoodput: 0.97,
    status: 'complete',
    proxies: [
      { proxyId: 'edge-1', received: 1000, useful: 990, share: 0.55 },
      { proxyId: 'edge-2', received: 810, useful: 800, share: 0.45 },
    ],
    ...extra,
  };
}

describe('download records', () => {
  test('records are stored and listed, newest first, filtered by mode, behind the admin token', async () => {
    const { port, http, origo } = await startOrigo();
    await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2' });
    const client = await connectClient(port);
    await requestProxies(client, 2);
    const rlnc = record('rlnc', 'https://media.test/seg-1.m4s', { scheduler: 'rarest' });
    const failed = record('http', 'https://media.test/seg-2.m4s', { status: 'failed', error: 'all proxies failed' });
    client.send({ type: 'record', record: rlnc });
    client.send({ type: 'record', record: failed });
    await barrier(client);
    await origo.flushRecords();

    expect((await getJson(`${http}/v1/records`)).status).toBe(401);
    expect((await getJson(`${http}/v1/records`, 'wrong-token')).status).toBe(401);
    const all = await getJson(`${http}/v1/records`, ADMIN);
    expect(all.status).toBe(200);
    const records = (all.body as { records: (DownloadRecord & { clientId: string; receivedAt: string })[] }).records;
    expect(records).toHaveLength(2);
    expect(records[0]).toMatchObject({ ...failed, clientId: client.id });
    expect(records[1]).toMatchObject({ ...rlnc, clientId: client.id });
    expect(Number.isNaN(Date.parse(records[1].receivedAt))).toBe(false);
    expect(records[1]).not.toHaveProperty('error');

    const onlyRlnc = await getJson(`${http}/v1/records?mode=rlnc`, ADMIN);
    expect((onlyRlnc.body as { records: DownloadRecord[] }).records.map((r) => r.url)).toEqual([rlnc.url]);
    const limited = await getJson(`${http}/v1/records?limit=1`, ADMIN);
    expect((limited.body as { records: DownloadRecord[] }).records.map((r) => r.url)).toEqual([failed.url]);
    expect((await getJson(`${http}/v1/records?mode=carrier-pigeon`, ADMIN)).status).toBe(400);
    expect((await getJson(`${http}/v1/records?limit=0`, ADMIN)).status).toBe(400);

    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_records_stored_total 2');
  });

  test('records above the per-client rate are dropped with rate-limited', async () => {
    const { port, http, origo } = await startOrigo({ recordRatePerSecond: 1, recordBurst: 2 });
    await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2' });
    const client = await connectClient(port);
    await requestProxies(client, 2);
    for (let i = 0; i < 4; i++) client.send({ type: 'record', record: record('rlnc', `https://media.test/${i}`) });
    await client.next('error', (m) => m.code === 'rate-limited');
    await barrier(client);
    await origo.flushRecords();
    const { body } = await getJson(`${http}/v1/records`, ADMIN);
    const stored = (body as { records: unknown[] }).records.length;
    expect(stored).toBeGreaterThanOrEqual(2);
    expect(stored).toBeLessThan(4);
  });
});

describe('admin endpoints', () => {
  test('GET /v1/admin/proxies needs the bearer token', async () => {
    const { port, http } = await startOrigo();
    await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    expect((await getJson(`${http}/v1/admin/proxies`)).status).toBe(401);
    expect((await getJson(`${http}/v1/admin/proxies`, `${ADMIN}x`)).status).toBe(401);
    const response = await fetch(`${http}/v1/admin/proxies`, { headers: { authorization: ADMIN } });
    expect(response.status).toBe(401); // not a bearer header
    const ok = await getJson(`${http}/v1/admin/proxies`, ADMIN);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ proxies: [{ proxyId: 'edge-1', name: 'edge-1', maxTransfers: 16 }] });
  });

  test('without an admin token the admin endpoints do not exist', async () => {
    const { http } = await startOrigo({ adminToken: undefined });
    expect((await getJson(`${http}/v1/admin/proxies`, ADMIN)).status).toBe(404);
    expect((await getJson(`${http}/v1/records`, ADMIN)).status).toBe(404);
  });
});

describe('health and metrics', () => {
  test('/healthz counts proxies and clients', async () => {
    const { port, http } = await startOrigo();
    expect(await getJson(`${http}/healthz`)).toEqual({ status: 200, body: { status: 'ok', proxies: 0, clients: 0 } });
    await connectProxy(port, { name: 'a' });
    await connectProxy(port, { name: 'b' });
    await connectClient(port);
    expect(await getJson(`${http}/healthz`)).toEqual({ status: 200, body: { status: 'ok', proxies: 2, clients: 1 } });
  });

  test('/metrics serves the gauges, counters and process metrics', async () => {
    const { port, http } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    await connectClient(port);
    const response = await fetch(`${http}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(text).toContain('mutp_origo_proxies_connected 1');
    expect(text).toContain('mutp_origo_clients_connected 1');
    expect(text).toContain('# TYPE mutp_origo_signals_relayed_total counter');
    expect(text).toContain('# TYPE mutp_origo_invalid_messages_total counter');
    expect(text).toContain('# TYPE mutp_origo_records_stored_total counter');
    expect(text).toContain('# TYPE mutp_origo_registrations_refused_total counter');
    // The process metrics under the prefix the proxy's have too, and the build (issue 32).
    expect(text).toMatch(/^mutp_origo_process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^mutp_origo_nodejs_heap_size_used_bytes /m);
    expect(text).not.toMatch(/^(process|nodejs)_/m);
    expect(text).toContain(`mutp_origo_build_info{version="0.1.0",node="${process.version}"} 1`);
    await proxy.close();
  });

  test('/metrics: the draining gauge follows heartbeats; request-proxies handling is timed (issue 32)', async () => {
    const { port, http } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2' });
    const client = await connectClient(port);
    const metrics = async () => (await fetch(`${http}/metrics`)).text();
    expect(await metrics()).toMatch(/^mutp_origo_proxies_connected 2$/m);
    expect(await metrics()).toMatch(/^mutp_origo_proxies_draining 0$/m);
    proxy.send({ type: 'heartbeat', activeTransfers: 1, uploadBps: 0, capacityBps: 1000, draining: true });
    await proxyBarrier(proxy);
    expect(await metrics()).toMatch(/^mutp_origo_proxies_draining 1$/m);
    expect(await requestProxies(client, 2)).toEqual(['edge-2']);
    const text = await metrics();
    expect(text).toMatch(/^mutp_origo_request_proxies_duration_seconds_count 1$/m);
    expect(text).toMatch(/^mutp_origo_request_proxies_duration_seconds_bucket\{le="\+Inf"\} 1$/m);
    await proxy.close();
    await waitFor(
      'the draining gauge to drop with the proxy',
      async () => (/^mutp_origo_proxies_draining 0$/m.test(await metrics()) ? true : undefined),
      10_000,
      20,
    );
    expect(await metrics()).toMatch(/^mutp_origo_proxies_connected 1$/m);
  });

  test('/metrics answers a loopback client, or anyone with the metrics token, and nobody else', async () => {
    // Behind a listed reverse proxy the client is the forwarded address, not the loopback proxy.
    const { http } = await startOrigo({ trustProxy: ['127.0.0.1'] });
    const remote = { 'x-forwarded-for': '203.0.113.9' };
    expect((await fetch(`${http}/metrics`, { headers: remote })).status).toBe(403);
    expect((await fetch(`${http}/metrics`)).status).toBe(200);
    const guarded = await startOrigo({ metricsToken: 'scrape-me' });
    const refused = await fetch(`${guarded.http}/metrics`);
    expect([refused.status, refused.headers.get('www-authenticate')]).toEqual([401, 'Bearer']);
    const allowed = await fetch(`${guarded.http}/metrics`, { headers: { authorization: 'Bearer scrape-me' } });
    expect(allowed.status).toBe(200);
  });
});
