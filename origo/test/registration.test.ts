import { chmodSync, writeFileSync } from 'node:fs';
import {
  ADMIN,
  closeAll,
  connectClient,
  connectProxy,
  getJson,
  heartbeat,
  KEY9,
  keysFile,
  proxyBarrier,
  registerMessage,
  requestProxies,
  startOrigo,
  TestPeer,
} from './helpers';
import { createOrigo } from '../src/server';

afterEach(closeAll);

const SECRET_DEV = 'test-proxy-secret';

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

  test('in shared-secret dev mode an id held by a live socket cannot be taken', async () => {
    const { port, http } = await startOrigo();
    const owner = await connectProxy(port, { proxyId: 'edge-3', name: 'edge-3' });
    const thief = await TestPeer.open(port, '/v1/proxy', 'thief');
    thief.send(registerMessage({ proxyId: 'edge-3', name: 'evil', capacityBps: 1e12 }));
    expect((await thief.next('error')).code).toBe('id-in-use');
    await thief.closed();
    await proxyBarrier(owner);
    expect((await adminProxies(http)).map((p) => p.name)).toEqual(['edge-3']);
  });

  test('a key file others can read is warned about, by path and mode, never by content (issue 31)', async () => {
    const file = keysFile({ 'edge-9': KEY9 });
    chmodSync(file, 0o644);
    const loose = await startOrigo({ proxySecret: undefined, proxyKeysFile: file });
    const warning = loose.logs.find((l) => l.level === 40 && String(l.msg).includes(file));
    expect(warning?.msg).toMatch(/every local user can read it \(mode 644\): chmod 600 it/);
    expect(JSON.stringify(loose.logs)).not.toContain(KEY9);
    chmodSync(file, 0o600);
    const tight = await startOrigo({ proxySecret: undefined, proxyKeysFile: file });
    expect(tight.logs.some((l) => String(l.msg).includes('can read it'))).toBe(false);
  });

  test('with per-proxy keys a proxy re-registering its id replaces its old socket', async () => {
    const { port, http } = await startOrigo({ proxySecret: undefined, proxyKeysFile: keysFile({ 'edge-9': KEY9 }) });
    const old = await connectProxy(port, { proxyId: 'edge-9', name: 'edge-9', secret: KEY9 });
    const fresh = await connectProxy(port, { proxyId: 'edge-9', name: 'edge-9', secret: KEY9 });
    expect(fresh.id).toBe('edge-9');
    expect((await old.next('error')).code).toBe('replaced');
    expect((await old.closed()).code).toBe(4002);
    // The old socket's close must not remove the new registration.
    const client = await connectClient(port);
    expect(await requestProxies(client, 4)).toEqual(['edge-9']);
    expect((await adminProxies(http)).length).toBe(1);
  });

  test('with per-proxy keys a key opens only its own id, and a reload revokes it', async () => {
    const file = keysFile({ 'edge-9': KEY9, 'edge-8': 'key-of-edge-8-0123456789' });
    const { port, origo } = await startOrigo({ proxySecret: undefined, proxyKeysFile: file });
    const owner = await connectProxy(port, { proxyId: 'edge-9', name: 'edge-9', secret: KEY9 });
    for (const attempt of [
      { proxyId: 'edge-9', secret: 'key-of-edge-8-0123456789' },
      { proxyId: 'edge-9', secret: SECRET_DEV },
      { secret: KEY9 },
    ]) {
      const thief = await TestPeer.open(port, '/v1/proxy', 'thief');
      thief.send(registerMessage({ ...attempt, name: 'evil' }));
      expect((await thief.next('error')).code).toBe('unauthorized');
      expect((await thief.closed()).code).toBe(4001);
    }
    await proxyBarrier(owner);
    writeFileSync(file, JSON.stringify({ 'edge-8': 'key-of-edge-8-0123456789' }));
    origo.reloadProxyKeys();
    expect((await owner.next('error')).code).toBe('unauthorized');
    expect((await owner.closed()).code).toBe(4001);
  });

  test.each([
    'javascript:alert(1)',
    'data:text/html,x',
    'http://10.0.0.7:8800',
    'http://intranet:8800',
    'http://127.0.0.1:8800',
    'ftp://edge.example.com',
  ])('an httpUrl of %s is refused', async (httpUrl) => {
    const { port } = await startOrigo();
    const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
    peer.send({ ...registerMessage({ name: 'bad' }), httpUrl });
    const error = await peer.next('error');
    expect(['unauthorized', 'bad-message']).toContain(error.code);
    await peer.closed();
  });

  test('a name resolving to a private address, or a privileged port other than 80/443, is refused (issue 31)', async () => {
    const dns: Record<string, string[]> = {
      'sneaky.example.com': ['93.184.216.34', '192.168.1.1'],
      'edge.example.com': ['2001:4860:4860::8888'],
    };
    const { port } = await startOrigo({ lookup: async (host) => (dns[host] ?? []).map((address) => ({ address })) });
    const register = async (httpUrl: string) => {
      const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
      peer.send({ ...registerMessage({ name: 'p' }), httpUrl });
      await peer.until(
        () => peer.received.some((m) => m.type === 'registered' || m.type === 'error'),
        'registered or refused',
      );
      const answer = peer.received.find((m) => m.type === 'registered' || m.type === 'error')!;
      return answer.type === 'registered' ? 'registered' : String(answer.message);
    };
    expect(await register('http://sneaky.example.com:8800/')).toMatch(
      /httpUrl refused: sneaky.example.com resolves to 192.168.1.1: private, not public/,
    );
    expect(await register('http://edge.example.com:25/')).toMatch(/port 25 is a privileged port/);
    expect(await register('https://edge.example.com/')).toBe('registered');
    // Names origo cannot resolve pass: the clients may see another DNS.
    expect(await register('http://elsewhere.example.net:8443/')).toBe('registered');
  });

  test('a loopback httpUrl: refused with the way to a one-host trial, accepted with localDev (issue 32)', async () => {
    const register = async (port: number) => {
      const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
      peer.send({ ...registerMessage({ name: 'trial' }), httpUrl: 'http://127.0.0.1:8800' });
      await peer.until(
        () => peer.received.some((m) => m.type === 'registered' || m.type === 'error'),
        'registered or refused',
      );
      const answer = peer.received.find((m) => m.type === 'registered' || m.type === 'error')!;
      return answer.type === 'registered' ? 'registered' : String(answer.message);
    };
    const strict = await startOrigo();
    expect(await register(strict.port)).toBe(
      'httpUrl refused: address 127.0.0.1 is loopback, not public (a trial on one machine: origo --local-dev accepts it)',
    );
    const local = await startOrigo({ localDev: true, host: '127.0.0.1' });
    expect(local.origo.config).toMatchObject({ localDev: true, allowLocalProxies: true, allowPrivateOrigins: true });
    expect(await register(local.port)).toBe('registered');
    expect(local.logs.some((l) => l.level === 40 && l.msg.startsWith('local development (--local-dev)'))).toBe(true);
    // Not on a public address: the allowances would then be everybody's.
    expect(() => createOrigo({ localDev: true, host: '0.0.0.0', proxySecret: SECRET_DEV, db: ':memory:' })).toThrow(
      /--local-dev listens on and advertises loopback addresses only, and host gives 0\.0\.0\.0/,
    );
  });

  test('a name that resolves to a private address after registration ends it at a heartbeat (DNS rebinding)', async () => {
    const dns: Record<string, string[]> = { 'flip.example.com': ['93.184.216.34'] };
    const { port } = await startOrigo({
      lookup: async (host) => (dns[host] ?? []).map((address) => ({ address })),
      nameRecheckMs: 0,
    });
    const proxy = await TestPeer.open(port, '/v1/proxy', 'proxy');
    proxy.send({ ...registerMessage({ name: 'flip' }), httpUrl: 'http://flip.example.com:8800/' });
    const { proxyId } = await proxy.next('registered');
    const client = await connectClient(port);
    expect(await requestProxies(client, 1)).toEqual([proxyId]);
    // Still public: a heartbeat resolves it again and nothing happens.
    heartbeat(proxy, 0, 0, 1000);
    heartbeat(proxy, 0, 0, 1000);
    expect(await requestProxies(client, 1)).toEqual([proxyId]);
    dns['flip.example.com'] = ['10.0.0.5'];
    heartbeat(proxy, 0, 0, 1000);
    const error = await proxy.next('error');
    expect(error).toMatchObject({ code: 'unauthorized' });
    expect(String(error.message)).toMatch(/flip.example.com resolves to 10.0.0.5/);
    expect((await proxy.closed()).code).toBe(4001);
    expect(await client.next('withdrawn')).toMatchObject({ proxyId });
    expect(await requestProxies(client, 1)).toEqual([]);
  });

  test('a loopback httpUrl is accepted with allowLocalProxies (dev)', async () => {
    const { port } = await startOrigo({ allowLocalProxies: true });
    const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
    peer.send({ ...registerMessage({ name: 'local' }), httpUrl: 'http://127.0.0.1:8800' });
    await peer.next('registered');
  });

  test('a private-network httpUrl (the namespace testbed) is accepted with allowLocalProxies only', async () => {
    const dev = await startOrigo({ allowLocalProxies: true });
    const peer = await TestPeer.open(dev.port, '/v1/proxy', 'proxy');
    peer.send({ ...registerMessage({ name: 'testbed' }), httpUrl: 'http://10.78.10.2:8800' });
    await peer.next('registered');
    const prod = await startOrigo({});
    const refused = await TestPeer.open(prod.port, '/v1/proxy', 'proxy');
    refused.send({ ...registerMessage({ name: 'testbed' }), httpUrl: 'http://10.78.10.2:8800' });
    const error = await refused.next('error');
    expect(['unauthorized', 'bad-message']).toContain(error.code);
  });

  describe('QUIC endpoint', () => {
    const hash = (fill: string) => Buffer.alloc(32, fill).toString('base64');
    const quic = (url: string, hashes = [hash('a')]) => ({ url, certificateHashes: hashes });

    const offered = offeredTo;

    test('is offered to clients with its certificate hashes, and a heartbeat rotates them', async () => {
      const { port } = await startOrigo();
      const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
      peer.send({ ...registerMessage({ name: 'edge' }), quic: quic('https://edge.test:4433/mutp') });
      await peer.next('registered');
      expect((await offered(port))[0].quic).toEqual(quic('https://edge.test:4433/mutp'));
      peer.send({
        type: 'heartbeat',
        activeTransfers: 0,
        uploadBps: 0,
        capacityBps: 1_000_000,
        quicCertificateHashes: [hash('b'), hash('c')],
      });
      await proxyBarrier(peer);
      expect((await offered(port))[0].quic).toEqual(quic('https://edge.test:4433/mutp', [hash('b'), hash('c')]));
    });

    test('a CA-certified one (no hashes: clients validate its chain and host) is offered as it came', async () => {
      const { port } = await startOrigo();
      const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
      peer.send({ ...registerMessage({ name: 'edge' }), quic: { url: 'https://edge.test:4433/mutp' } });
      await peer.next('registered');
      expect((await offered(port))[0].quic).toEqual({ url: 'https://edge.test:4433/mutp' });
    });

    test('a proxy without one is offered without one', async () => {
      const { port } = await startOrigo();
      await connectProxy(port, { name: 'plain' });
      expect((await offered(port))[0].quic).toBeUndefined();
    });

    test.each([
      ['another host than httpUrl', quic('https://victim.test:4433/mutp'), /not the httpUrl's host/],
      ['not https', quic('http://edge.test:4433/mutp'), /https/],
      ['a query', quic('https://edge.test:4433/mutp?x=1'), /query/],
      ['three hashes', quic('https://edge.test:4433/mutp', [hash('a'), hash('b'), hash('c')]), /./],
      ['an empty hash list', quic('https://edge.test:4433/mutp', []), /./],
      ['a hash that is not 32 bytes', quic('https://edge.test:4433/mutp', ['AAAA']), /./],
    ])('is refused with %s', async (_what, endpoint, why) => {
      const { port } = await startOrigo();
      const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
      peer.send({ ...registerMessage({ name: 'edge' }), quic: endpoint });
      const error = await peer.next('error');
      expect(['unauthorized', 'bad-message']).toContain(error.code);
      expect(String(error.message)).toMatch(why);
    });
  });
  describe('assertion key (signed METAs)', () => {
    const key = Buffer.alloc(32, 7).toString('base64url');

    const offered = offeredTo;

    test('is published to the clients the proxy is offered to', async () => {
      const { port } = await startOrigo();
      const signed = await TestPeer.open(port, '/v1/proxy', 'proxy');
      signed.send({ ...registerMessage({ name: 'signed', proxyId: 'signed' }), assertionKey: key });
      await signed.next('registered');
      expect((await offered(port)).map((p) => [p.proxyId, p.assertionKey])).toEqual([['signed', key]]);
    });

    test.each([
      ['missing (a proxy could keep unsigned METAs counting)', undefined],
      ['standard base64', Buffer.alloc(32, 7).toString('base64')],
      ['31 bytes', Buffer.alloc(31, 7).toString('base64url')],
    ])('is refused %s', async (_what, assertionKey) => {
      const { port } = await startOrigo();
      const peer = await TestPeer.open(port, '/v1/proxy', 'proxy');
      peer.send({ ...registerMessage({ name: 'edge' }), assertionKey });
      const error = await peer.next('error');
      expect(error.code).toBe('bad-message');
    });
  });
});

/** The proxies a fresh client is offered (up to 4), as origo describes them. */
async function offeredTo(port: number): Promise<{ proxyId: string; quic?: unknown; assertionKey?: string }[]> {
  const client = await connectClient(port);
  client.send({ type: 'request-proxies', requestId: 'q1', count: 4 });
  const answer = await client.next('proxies', (m) => m.requestId === 'q1');
  client.close();
  return answer.proxies as { proxyId: string; quic?: unknown; assertionKey?: string }[];
}
