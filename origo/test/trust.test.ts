/**
 * Issue 9 at origo: client tokens, record forgery and budgets, per-address socket caps, and a
 * locked database that must not cost proxies their registration.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { DownloadRecord, SIGNALLING_VERSION } from '@mutp/shared';
import {
  barrier,
  closeAll,
  connectClient,
  connectProxy,
  heartbeat,
  proxyBarrier,
  requestProxies,
  startOrigo,
  TestPeer,
  within,
  TEST_ASSERTION_KEY,
} from './helpers';

afterEach(closeAll);

function record(proxyIds: string[]): DownloadRecord {
  return {
    url: 'https://media.test/seg.m4s',
    mode: 'rlnc',
    sources: proxyIds.length,
    bytes: 1_000_000,
    durationMs: 500,
    goodputBps: 2_000_000,
    normalizedGoodput: 0.95,
    status: 'complete',
    proxies: proxyIds.map((proxyId) => ({ proxyId, received: 10, useful: 10, share: 1 / proxyIds.length })),
  };
}

describe('client tokens', () => {
  test('welcome carries a token proxies can verify with /v1/keys; registered carries the same key', async () => {
    const { port, http } = await startOrigo();
    const proxy = await TestPeer.open(port, '/v1/proxy', 'proxy');
    proxy.send({
      type: 'register',
      version: SIGNALLING_VERSION,
      secret: 'test-proxy-secret',
      name: 'edge',
      httpUrl: 'https://edge.example.com',
      capacityBps: 0,
      maxTransfers: 4,
      modes: ['rlnc'],
      assertionKey: TEST_ASSERTION_KEY,
    });
    const registered = await proxy.next('registered');
    const client = await TestPeer.open(port, '/v1/client');
    client.send({ type: 'hello', version: SIGNALLING_VERSION });
    const welcome = await client.next('welcome');
    const jwks = (await (await fetch(`${http}/v1/keys`)).json()) as { keys: object[] };
    expect(jwks.keys).toEqual([registered.tokenKey]);
    const { payload } = await jwtVerify(welcome.token as string, createLocalJWKSet(jwks as never), {
      issuer: 'mutp-origo',
      audience: 'mutp-proxy',
    });
    expect(payload.sub).toBe(welcome.clientId);
    expect(payload.exp! * 1000).toBe(welcome.expiresAt);
    expect(payload.exp! - payload.iat!).toBe(300);
  });

  test('a hello with the previous token keeps the client id; a forged or foreign token does not', async () => {
    const { port } = await startOrigo();
    const first = await TestPeer.open(port, '/v1/client');
    first.send({ type: 'hello', version: SIGNALLING_VERSION });
    const welcome = await first.next('welcome');
    await first.close();

    const again = await TestPeer.open(port, '/v1/client');
    again.send({ type: 'hello', version: SIGNALLING_VERSION, token: welcome.token });
    expect((await again.next('welcome')).clientId).toBe(welcome.clientId);

    // Another origo (another key) signed this one: a new identity, not the claimed one.
    const other = await startOrigo();
    const stranger = await TestPeer.open(other.port, '/v1/client');
    stranger.send({ type: 'hello', version: SIGNALLING_VERSION });
    const foreign = await stranger.next('welcome');
    const [h, , sig] = (foreign.token as string).split('.');
    const claims = Buffer.from(
      JSON.stringify({ ...decodeJwt(foreign.token as string), sub: welcome.clientId }),
    ).toString('base64url');
    for (const token of [foreign.token, `${h}.${claims}.${sig}`]) {
      const peer = await TestPeer.open(port, '/v1/client');
      peer.send({ type: 'hello', version: SIGNALLING_VERSION, token });
      expect((await peer.next('welcome')).clientId).not.toBe(welcome.clientId);
    }
  });

  test("each offered proxy gets a token for it alone, which hello refuses as an identity, renewed with the client's", async () => {
    const { port, http } = await startOrigo({ tokenTtlMs: 10_000 });
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1', capacityBps: 1000 });
    const client = await TestPeer.open(port, '/v1/client');
    client.send({ type: 'hello', version: SIGNALLING_VERSION });
    const welcome = await client.next('welcome');
    client.send({ type: 'request-proxies', requestId: 'r1', count: 1 });
    const [offered] = (await client.next('proxies')).proxies as { proxyId: string; token?: string }[];
    expect(offered.proxyId).toBe(proxy.id);
    expect(offered.token).toBeDefined();
    expect(offered.token).not.toBe(welcome.token);
    // Asked again a second later (a new signature would carry a new iat): the same token, so
    // offers asked for again and again cost no signing.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    client.send({ type: 'request-proxies', requestId: 'r2', count: 1 });
    expect(((await client.next('proxies')).proxies as { token?: string }[])[0].token).toBe(offered.token);
    const keys = createLocalJWKSet((await (await fetch(`${http}/v1/keys`)).json()) as never);
    const { payload } = await jwtVerify(offered.token!, keys, {
      issuer: 'mutp-origo',
      audience: `mutp-proxy:${proxy.id}`,
    });
    expect(payload.sub).toBe(welcome.clientId);
    // The network origo saw the client in: the proxy's per-network shares key on it (issue 31).
    expect(payload.net).toBe('127.0.0.0/24');
    // Not a general proxy token, and not this client's identity: a proxy that replays it to
    // origo gets a new client id, and the client's own session stays.
    await expect(jwtVerify(offered.token!, keys, { issuer: 'mutp-origo', audience: 'mutp-proxy' })).rejects.toThrow();
    const replay = await TestPeer.open(port, '/v1/client', 'replaying proxy');
    replay.send({ type: 'hello', version: SIGNALLING_VERSION, token: offered.token });
    expect((await replay.next('welcome')).clientId).not.toBe(welcome.clientId);
    client.send({ type: 'ping', nonce: 'still-here' });
    expect((await client.next('pong')).nonce).toBe('still-here');
    // The renewal renews the offered proxy's token too.
    const renewed = await within(client.next('token'), 'a renewed token', 9000);
    const proxyTokens = renewed.proxyTokens as { proxyId: string; token: string }[];
    expect(proxyTokens.map((p) => p.proxyId)).toEqual([proxy.id]);
    expect(decodeJwt(proxyTokens[0].token).aud).toBe(`mutp-proxy:${proxy.id}`);
  }, 15_000);

  test('tokens are renewed before they expire', async () => {
    const { port } = await startOrigo({ tokenTtlMs: 10_000 });
    const client = await TestPeer.open(port, '/v1/client');
    client.send({ type: 'hello', version: SIGNALLING_VERSION });
    const welcome = await client.next('welcome');
    const renewed = await within(client.next('token'), 'a renewed token', 9000);
    expect(renewed.expiresAt as number).toBeGreaterThan(welcome.expiresAt as number);
    expect(decodeJwt(renewed.token as string).sub).toBe(welcome.clientId);
  }, 15_000);
});

describe('download records', () => {
  test('a record naming a proxy not offered to this client is refused as forged', async () => {
    const { port, origo } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1', capacityBps: 1000 });
    await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2', capacityBps: 1000 });
    const client = await connectClient(port);
    client.send({ type: 'record', record: record(['edge-1']) });
    expect((await client.next('error')).code).toBe('forged-record');
    expect(await requestProxies(client, 1, { exclude: ['edge-2'] })).toEqual(['edge-1']);
    client.send({ type: 'record', record: record(['edge-1', 'edge-2']) });
    expect((await client.next('error')).code).toBe('forged-record');
    client.send({ type: 'record', record: record(['edge-1']) });
    await barrier(client);
    await origo.flushRecords();
    await proxyBarrier(proxy);
    const metrics = await origo.metrics.registry.metrics();
    expect(metrics).toContain('mutp_origo_records_refused_total{reason="forged-record"} 2');
    expect(metrics).toContain('mutp_origo_records_stored_total 1');
  });

  test('a record naming no proxy is refused: there is nothing in it to check (issue 31)', async () => {
    const { port, origo } = await startOrigo();
    const client = await connectClient(port);
    client.send({ type: 'record', record: { ...record([]), sources: 2 } });
    expect((await client.next('error')).code).toBe('empty-record');
    const metrics = await origo.metrics.registry.metrics();
    expect(metrics).toContain('mutp_origo_records_refused_total{reason="empty-record"} 1');
  });

  test('records are budgeted per address across clients', async () => {
    const { port } = await startOrigo({ recordRatePerAddress: 1, recordBurstPerAddress: 3 });
    await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const codes: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const client = await connectClient(port, `client ${i}`);
      await requestProxies(client, 1);
      client.send({ type: 'record', record: record(['edge-1']) });
      client.send({ type: 'record', record: record(['edge-1']) });
      await barrier(client);
      codes.push(...client.received.filter((m) => m.type === 'error').map((m) => m.code));
    }
    // 6 records, a burst of 3 per address (about 1 more refilled): at least 2 refused.
    expect(codes.filter((c) => c === 'rate-limited').length).toBeGreaterThanOrEqual(2);
  });

  test('a locked database sheds records and heartbeats keep the proxies registered', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'origo-locked-'));
    const file = join(dir, 'records.sqlite');
    const { port, origo } = await startOrigo({
      db: file,
      heartbeatIntervalMs: 200,
      heartbeatTimeoutMs: 600,
      recordRatePerSecond: 1000,
      recordBurst: 1000,
      recordRatePerAddress: 1000,
      recordBurstPerAddress: 1000,
    });
    const locker = new Database(file, { timeout: 0 });
    try {
      const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
      const client = await connectClient(port);
      await requestProxies(client, 1);
      locker.exec('BEGIN EXCLUSIVE');
      const started = Date.now();
      // Keep writing records for three heartbeat timeouts while the lock is held.
      while (Date.now() - started < 1800) {
        for (let i = 0; i < 20; i++) client.send({ type: 'record', record: record(['edge-1']) });
        heartbeat(proxy, 0, 0, 1_000_000);
        await barrier(client);
        await origo.flushRecords();
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(proxy.closeEvent).toBeUndefined();
      expect(origo.counts().proxies).toBe(1);
      const metrics = await origo.metrics.registry.metrics();
      expect(metrics).toMatch(/mutp_origo_records_shed_total\{reason="db-(error|unhealthy)"\} [1-9]/);
    } finally {
      if (locker.inTransaction) locker.exec('ROLLBACK');
      locker.close();
      await closeAll();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 20_000);
});

describe('sockets per address', () => {
  test('sockets above the per-address cap are refused, separately per path', async () => {
    const { port } = await startOrigo({ maxSocketsPerAddress: 3, maxPendingPerAddress: 3 });
    for (let i = 0; i < 3; i++) await TestPeer.open(port, '/v1/client', `client ${i}`);
    const extra = await TestPeer.open(port, '/v1/client', 'extra');
    expect((await extra.next('error')).code).toBe('address-limit');
    expect((await extra.closed()).code).toBe(1013);
    // The proxy path has its own budget.
    await connectProxy(port, { name: 'edge' });
  });

  test('a flood of silent proxy sockets cannot keep a proxy from registering', async () => {
    const { port } = await startOrigo({ maxPendingSockets: 5, maxPendingPerAddress: 100, maxSocketsPerAddress: 100 });
    const flood: TestPeer[] = [];
    for (let i = 0; i < 10; i++) flood.push(await TestPeer.open(port, '/v1/proxy', `silent ${i}`));
    const proxy = await connectProxy(port, { name: 'edge' });
    expect(proxy.id).toMatch(/^p-/);
    expect(flood.filter((p) => p.closeEvent !== undefined).length).toBeGreaterThanOrEqual(5);
  });
});
