/**
 * A proxy given several origo instances: two real origos in-process (the insecure shared secret,
 * no Redis: they do not share state, which these tests do not need). The proxy registers on one;
 * when that one closes it registers on the other within a bounded wait, under the same proxyId.
 * OrigoLink with a seeded random: where the rotation starts, and a dead instance skipped.
 */
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { uncodedCodec } from '@mutp/shared';
import pino from 'pino';
import { ADMIN, closeAll, getJson, SECRET, startOrigo, TestOrigo } from '@mutp/testing/origo';
import { OrigoLink, OrigoLinkOptions } from '../src/origo-link';
import { createProxy, Proxy } from '../src/proxy';
import { silentLogger, TEST_ASSERTION_KEY, testConfig, until } from './helpers';

const FAILOVER_MS = 10_000;

afterEach(closeAll);

/** Two origos, one proxy endpoint URL each; short heartbeats so a lost link is seen quickly. */
async function twoOrigos(): Promise<{ origos: TestOrigo[]; urls: string[] }> {
  const origos = [
    await startOrigo({ allowLocalProxies: true, heartbeatIntervalMs: 200 }),
    await startOrigo({ allowLocalProxies: true, heartbeatIntervalMs: 200 }),
  ];
  return { origos, urls: origos.map((o) => `ws://127.0.0.1:${o.port}/v1/proxy`) };
}

async function registeredIds(origo: TestOrigo): Promise<string[]> {
  const { status, body } = await getJson(`${origo.http}/v1/admin/proxies`, ADMIN);
  expect(status).toBe(200);
  return (body as { proxies: { proxyId: string }[] }).proxies.map((p) => p.proxyId);
}

/** A loopback port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function linkOptions(url: string[], over: Partial<OrigoLinkOptions> = {}): OrigoLinkOptions {
  return {
    url,
    secret: SECRET,
    name: 'edge-failover',
    httpUrl: 'http://127.0.0.1:9999',
    capacityBps: 917504,
    maxTransfers: 32,
    modes: ['uncoded'],
    assertionKey: TEST_ASSERTION_KEY,
    logger: silentLogger(),
    load: () => ({ activeTransfers: 0, uploadBps: 0, capacityBps: 917504 }),
    onSignal: () => undefined,
    onConnectionClosed: () => undefined,
    onFatal: () => undefined,
    reconnectInitialMs: 50,
    reconnectMaxMs: 400,
    ...over,
  };
}

test('a proxy registers on one origo instance and moves to the other when it closes, keeping its id', async () => {
  const { origos, urls } = await twoOrigos();
  const proxy: Proxy = createProxy(testConfig({ origoUrl: urls, secret: SECRET }), {
    logger: silentLogger(),
    codecs: { uncoded: uncodedCodec },
  });
  try {
    await proxy.start();
    await until(() => proxy.stats().origo?.state === 'registered', FAILOVER_MS, 'the proxy to register');
    const first = origos.findIndex((o) => o.origo.counts().proxies === 1);
    expect(first).toBeGreaterThanOrEqual(0);
    expect(proxy.stats().origo?.origo).toBe(urls[first]);
    const proxyId = proxy.stats().proxyId!;
    expect(await registeredIds(origos[first])).toEqual([proxyId]);

    const other = 1 - first;
    const lostAt = performance.now();
    await origos[first].origo.close();
    await until(
      () => origos[other].origo.counts().proxies === 1 && proxy.stats().origo?.state === 'registered',
      FAILOVER_MS,
      `the proxy to register on the other origo (${urls[other]})`,
    );
    const failoverMs = performance.now() - lostAt;
    expect(proxy.stats().origo).toMatchObject({ origo: urls[other], registrations: 2, failovers: 1 });
    expect(await registeredIds(origos[other])).toEqual([proxyId]);
    // For the report, not a timing assertion.
    console.log(`proxy failover: registered on the other origo ${failoverMs.toFixed(0)} ms after the close`);
  } finally {
    await proxy.close();
  }
});

test('the rotation starts where the random source says and skips a dead instance', async () => {
  const { origos, urls } = await twoOrigos();
  const dead = `ws://127.0.0.1:${await deadPort()}/v1/proxy`;
  const lines: { msg: string; origo?: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  // [origo 0, dead, origo 1]: 0.5 picks index 1 (the dead one), so the link must move on to origo 1.
  const registered: string[] = [];
  const link = new OrigoLink(
    linkOptions([urls[0], dead, urls[1]], {
      logger,
      random: () => 0.5,
      onRegistered: (id) => registered.push(id),
    }),
  );
  try {
    link.start();
    await until(() => registered.length === 1, FAILOVER_MS, 'registration past the dead instance');
    expect(link.origoUrl).toBe(urls[1]);
    expect(link.stats()).toMatchObject({ state: 'registered', origo: urls[1], failovers: 1 });
    expect(origos.map((o) => o.origo.counts().proxies)).toEqual([0, 1]);
    expect(lines.find((l) => l.msg === 'registered with origo')?.origo).toBe(urls[1]);

    // Origo 1 goes: the rotation wraps round to origo 0, under the same id.
    await origos[1].origo.close();
    await until(() => registered.length === 2, FAILOVER_MS, 're-registration on origo 0');
    expect(registered[1]).toBe(registered[0]);
    expect(link.origoUrl).toBe(urls[0]);
    expect(origos[0].origo.counts().proxies).toBe(1);
  } finally {
    await link.close();
  }
});

test('one URL behaves as before: no failover, and it waits for that instance', async () => {
  const { origos, urls } = await twoOrigos();
  const link = new OrigoLink(linkOptions([], { url: urls[0], random: () => 0.99 }));
  try {
    link.start();
    await until(() => link.state === 'registered', FAILOVER_MS, 'registration');
    await origos[0].origo.close();
    await until(() => link.stats().connects >= 3, FAILOVER_MS, 'reconnection attempts to the closed origo');
    expect(link.stats()).toMatchObject({ origo: urls[0], failovers: 0, registrations: 1 });
    expect(origos[1].origo.counts().proxies).toBe(0);
  } finally {
    await link.close();
  }
});
