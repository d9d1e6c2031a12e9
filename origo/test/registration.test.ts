import {
  ADMIN,
  closeAll,
  connectClient,
  connectProxy,
  getJson,
  heartbeat,
  proxyBarrier,
  registerMessage,
  requestProxies,
  startOrigo,
  TestPeer,
} from './helpers';

afterEach(closeAll);

interface AdminProxy {
  proxyId: string;
  name: string;
  activeTransfers: number;
  uploadBps: number;
  capacityBps: number;
  lastHeartbeatAt: string | null;
}

async function adminProxies(http: string): Promise<AdminProxy[]> {
  const { status, body } = await getJson(`${http}/v1/admin/proxies`, ADMIN);
  expect(status).toBe(200);
  return (body as { proxies: AdminProxy[] }).proxies;
}

describe('proxy registration', () => {
  test('a wrong secret gets error unauthorized and close 4001', async () => {
    const { port, http, logs } = await startOrigo();
    const proxy = await TestPeer.open(port, '/v1/proxy');
    proxy.send(registerMessage({ secret: 'not-the-secret' }));
    const error = await proxy.next('error');
    expect(error.code).toBe('unauthorized');
    expect((await proxy.closed()).code).toBe(4001);
    expect(await adminProxies(http)).toEqual([]);
    expect(logs.some((l) => l.msg.includes('registration refused') && l.code === 'unauthorized')).toBe(true);
    expect(JSON.stringify(logs)).not.toContain('not-the-secret');
    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_registrations_refused_total{reason="unauthorized"} 1');
  });

  test('an unsupported version gets error unsupported-version and close 4000', async () => {
    const { port } = await startOrigo();
    const proxy = await TestPeer.open(port, '/v1/proxy');
    proxy.send({ ...registerMessage(), version: 99 });
    expect((await proxy.next('error')).code).toBe('unsupported-version');
    expect((await proxy.closed()).code).toBe(4000);
  });

  test('a first message other than register is refused with close 4000', async () => {
    const { port } = await startOrigo();
    const proxy = await TestPeer.open(port, '/v1/proxy');
    proxy.send({ type: 'heartbeat', activeTransfers: 0, uploadBps: 0, capacityBps: 0 });
    expect((await proxy.next('error')).code).toBe('register-required');
    expect((await proxy.closed()).code).toBe(4000);
  });

  test('a socket that never registers is closed after the greeting timeout', async () => {
    const { port } = await startOrigo({ greetingTimeoutMs: 200 });
    const proxy = await TestPeer.open(port, '/v1/proxy');
    expect((await proxy.next('error')).code).toBe('greeting-timeout');
    expect((await proxy.closed()).code).toBe(4000);
  });

  test('registration and heartbeats show in the admin listing', async () => {
    const { port, http } = await startOrigo({ heartbeatIntervalMs: 1500 });
    const proxy = await TestPeer.open(port, '/v1/proxy');
    proxy.send(registerMessage({ name: 'edge-a', capacityBps: 500_000 }));
    const registered = await proxy.next('registered');
    expect(registered.heartbeatIntervalMs).toBe(1500);
    expect(registered.proxyId).toMatch(/^p-/);

    let [listed] = await adminProxies(http);
    expect(listed).toMatchObject({ proxyId: registered.proxyId, name: 'edge-a', capacityBps: 500_000 });
    expect(listed.lastHeartbeatAt).toBeNull();

    heartbeat(proxy, 3, 250_000, 600_000);
    await proxyBarrier(proxy); // the heartbeat has been handled
    [listed] = await adminProxies(http);
    expect(listed).toMatchObject({ activeTransfers: 3, uploadBps: 250_000, capacityBps: 600_000 });
    expect(typeof listed.lastHeartbeatAt).toBe('string');
  });

  test('a proxy without heartbeats is removed after the timeout and its socket closed', async () => {
    const { port, http, origo } = await startOrigo({ heartbeatIntervalMs: 100, heartbeatTimeoutMs: 300 });
    const proxy = await connectProxy(port, { name: 'silent' });
    expect((await proxy.next('error')).code).toBe('heartbeat-timeout');
    expect((await proxy.closed()).code).toBe(4003);
    expect(await adminProxies(http)).toEqual([]);
    expect(origo.counts().proxies).toBe(0);
  });

  test('a proxy keeps its proxyId across reconnects', async () => {
    const { port, http } = await startOrigo();
    const first = await connectProxy(port, { proxyId: 'edge-7', name: 'edge-7' });
    expect(first.id).toBe('edge-7');
    await first.close();
    // Wait (bounded) until origo has seen the close and forgotten the proxy, then register again.
    const client = await connectClient(port);
    let listed = await requestProxies(client, 4);
    for (let i = 0; i < 250 && listed.length > 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
      listed = await requestProxies(client, 4);
    }
    expect(listed).toEqual([]);
    const second = await connectProxy(port, { proxyId: 'edge-7', name: 'edge-7' });
    expect(second.id).toBe('edge-7');
    expect((await adminProxies(http)).map((p) => p.proxyId)).toEqual(['edge-7']);
  });

  test('re-registering an id held by a live socket replaces the old socket', async () => {
    const { port, http } = await startOrigo();
    const old = await connectProxy(port, { proxyId: 'edge-9', name: 'edge-9' });
    const fresh = await connectProxy(port, { proxyId: 'edge-9', name: 'edge-9' });
    expect(fresh.id).toBe('edge-9');
    expect((await old.next('error')).code).toBe('replaced');
    expect((await old.closed()).code).toBe(4002);
    // The old socket's close must not remove the new registration.
    const client = await connectClient(port);
    expect(await requestProxies(client, 4)).toEqual(['edge-9']);
    expect((await adminProxies(http)).length).toBe(1);
  });
});
