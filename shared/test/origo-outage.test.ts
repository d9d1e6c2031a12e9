/**
 * Downloads outlive origo (issue 34): a client whose proxy links are up keeps downloading through
 * them while origo is away, with the offers it holds, and a request that needs origo (new offers)
 * waits for its return within its origo limit instead of failing at once. Against the fake host
 * of client-orchestration.test.ts: fake time, a scripted origo that can be killed and brought
 * back, real SourceEndpoints behind fake WebRTC peers.
 */
import { Codec, Mode, ProxyInfo, rlncCodec, uncodedCodec } from '../src/internal';
import { ClientError, ClientOptions, MutpClient, PlaybackSession } from '../src/client';
import { FakeHost, objectOf, proxy, settle } from './helpers/fake-host';

const URLS = ['https://media.example/seg-1.m4s', 'https://media.example/seg-2.m4s', 'https://media.example/seg-3.m4s'];
const codecs = { rlnc: rlncCodec, uncoded: uncodedCodec, fountain: rlncCodec } as unknown as Record<Mode, Codec>;

function setup(options: Partial<ClientOptions> = {}) {
  const host = new FakeHost({ proxies: [proxy('a'), proxy('b'), proxy('c')] });
  URLS.forEach((url, i) => host.objects.set(url, objectOf(30_000, i + 1)));
  const client = new MutpClient(host, {
    origoUrl: 'wss://origo.example/v1/client',
    codecs,
    symbolSize: 512,
    generationSize: 8,
    window: 64,
    connectTimeoutMs: 5000,
    ...options,
  });
  return { host, client };
}

/** Origo dies: its sockets drop and no new one can be opened until `revive`. */
function killOrigo(host: FakeHost): { revive(): void } {
  host.script.unreachable = true;
  for (const socket of host.sockets) socket.drop(1006, '');
  return { revive: () => (host.script.unreachable = false) };
}

function expectObject(host: FakeHost, url: string, object: Uint8Array): void {
  expect(Buffer.from(object).equals(Buffer.from(host.objects.get(url)!))).toBe(true);
}

async function failure(host: FakeHost, p: Promise<unknown>): Promise<ClientError> {
  const error = await settle(host.clock, p).then(
    () => new Error('expected the download to fail'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  return error as ClientError;
}

describe.each([
  ['the Node client (no back-off)', {}],
  ["the extension's client (origo back-off)", { origoBackoff: { firstMs: 2000, maxMs: 60_000 } }],
] as const)('%s, origo killed while its links are up', (_name, options) => {
  test('segments staged at the set (GetOptions.use) download through the open links, no new peer', async () => {
    const { host, client } = setup(options);
    const first = await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 3 }));
    const set: ProxyInfo[] = first.sources.map((s) => ({
      proxyId: s.proxyId,
      name: s.name,
      httpUrl: `https://${s.proxyId}.example/`,
      capacityBps: 1_000_000,
    }));
    const peers = host.peers.length;
    killOrigo(host);
    for (const url of URLS.slice(1)) {
      const r = await settle(host.clock, client.get(url, { mode: 'rlnc', proxies: 3, use: set }));
      expectObject(host, url, r.object);
      expect(r.sources.map((s) => s.proxyId).sort()).toEqual(['a', 'b', 'c']);
    }
    expect(host.peers.length).toBe(peers);
    expect(client.origoDown() === undefined).toBe(!('origoBackoff' in options));
    client.close();
  });

  test('a download without a set goes through the links opened for its mode; none for another mode', async () => {
    const { host, client } = setup(options);
    await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 2 }));
    killOrigo(host);
    const r = await settle(host.clock, client.get(URLS[1], { mode: 'rlnc', proxies: 2 }));
    expectObject(host, URLS[1], r.object);
    expect(r.sources).toHaveLength(2);
    // No link was opened for 'uncoded': that needs an offer, and origo is away.
    const error = await failure(host, client.get(URLS[2], { mode: 'uncoded', proxies: 2 }));
    expect(['origo-unreachable', 'origo-down']).toContain(error.code);
    client.close();
  });

  test('a link lost during the outage: the download goes on through the others', async () => {
    const { host, client } = setup(options);
    const first = await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 3 }));
    killOrigo(host);
    host.peers[0].close();
    await settle(host.clock, new Promise<void>((resolve) => host.clock.setTimer(100, resolve)));
    const r = await settle(host.clock, client.get(URLS[1], { mode: 'rlnc', proxies: 3 }));
    expectObject(host, URLS[1], r.object);
    expect(r.sources.length).toBe(2);
    expect(first.sources.length).toBe(3);
    client.close();
  });
});

describe('a segment series (PlaybackSession) while origo is away', () => {
  test('a proxy of the set lost: the next segments go on through the others at once, the handoff waits for origo', async () => {
    const { host, client } = setup({ origoTimeoutMs: 10_000 });
    const session = new PlaybackSession(client, host.clock, { mode: 'rlnc', proxies: 3, staging: false });
    await settle(host.clock, session.fetch({ url: URLS[0] }));
    const origo = killOrigo(host);
    host.peers[0].close();
    const started = host.clock.now();
    for (const url of URLS.slice(1)) {
      const { result } = await settle(host.clock, session.fetch({ url }));
      expectObject(host, url, result.object);
      expect(result.sources.filter((s) => !('state' in s) || s.state !== 'failed')).toHaveLength(2);
    }
    // Not held for the origo limit by a handoff asking origo for a replacement.
    expect(host.clock.now() - started).toBeLessThan(2000);
    expect(client.origoAway()).toBe(true);
    origo.revive();
    session.close();
    client.close();
  });
});

describe('new offers while origo is away (Node client)', () => {
  test('wait for its return within the origo limit, and are served once it is back', async () => {
    const { host, client } = setup({ origoTimeoutMs: 10_000 });
    await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 2 }));
    const origo = killOrigo(host);
    const killedAt = host.clock.now();
    host.clock.setTimer(3000, () => origo.revive());
    // A third proxy is an offer origo has to make.
    const r = await settle(host.clock, client.get(URLS[1], { mode: 'uncoded', proxies: 3 }));
    expectObject(host, URLS[1], r.object);
    expect(host.clock.now() - killedAt).toBeGreaterThanOrEqual(3000);
    client.close();
  });

  test('an origo back without its proxies yet is asked again until they are, within the limit', async () => {
    const { host, client } = setup({ origoTimeoutMs: 10_000 });
    await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 2 }));
    const origo = killOrigo(host);
    // Restarted: none of its proxies has registered again yet.
    for (const p of host.script.proxies) host.unoffered.add(p.info.proxyId);
    host.clock.setTimer(500, () => origo.revive());
    host.clock.setTimer(2500, () => host.unoffered.clear());
    const started = host.clock.now();
    const set = await settle(host.clock, client.chooseProxies(3, 'rlnc'));
    expect(set.map((p) => p.proxyId).sort()).toEqual(['a', 'b', 'c']);
    expect(host.clock.now() - started).toBeGreaterThanOrEqual(2500);
    client.close();
  });

  test('fail origo-unreachable once the limit is spent, not at once', async () => {
    const { host, client } = setup({ origoTimeoutMs: 4000 });
    await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 2 }));
    killOrigo(host);
    const killedAt = host.clock.now();
    const error = await failure(host, client.get(URLS[1], { mode: 'uncoded', proxies: 2 }));
    expect(error.code).toBe('origo-unreachable');
    const waited = host.clock.now() - killedAt;
    expect(waited).toBeGreaterThan(2000);
    expect(waited).toBeLessThanOrEqual(4000);
    client.close();
  });

  test('with a back-off policy (the extension) they fail at once: its page has the network', async () => {
    const { host, client } = setup({ origoBackoff: { firstMs: 2000, maxMs: 60_000 } });
    await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 2 }));
    killOrigo(host);
    const killedAt = host.clock.now();
    const error = await failure(host, client.get(URLS[1], { mode: 'uncoded', proxies: 2 }));
    expect(['origo-unreachable', 'origo-down']).toContain(error.code);
    expect(host.clock.now() - killedAt).toBeLessThan(100);
    client.close();
  });
});

describe('proxies that failed in an earlier download (one failed handshake under load)', () => {
  /** Connection attempts the client made to `proxyId` (each sends origo one offer for it). */
  const attemptsTo = (host: FakeHost, proxyId: string) =>
    host.origoHeard.filter((m) => m.type === 'signal' && m.proxyId === proxyId && m.description !== undefined).length;

  test('are asked for again, once, when a download has fewer links than it wants', async () => {
    const { host, client } = setup();
    const c = host.script.proxies.find((p) => p.info.proxyId === 'c')!;
    c.behaviour = 'peer-fails';
    const first = await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 3 }));
    expect(first.sources.map((s) => s.proxyId).sort()).toEqual(['a', 'b']);
    // Reachable again: its second chance gives the next download all three.
    c.behaviour = 'ok';
    const second = await settle(host.clock, client.get(URLS[1], { mode: 'rlnc', proxies: 3 }));
    expect(second.sources.map((s) => s.proxyId).sort()).toEqual(['a', 'b', 'c']);
    client.close();
  });

  test('a proxy failing again is left out for the exclusion period, not tried at every download', async () => {
    const { host, client } = setup();
    host.script.proxies.find((p) => p.info.proxyId === 'c')!.behaviour = 'peer-fails';
    await settle(host.clock, client.get(URLS[0], { mode: 'rlnc', proxies: 3 }));
    const afterFirst = attemptsTo(host, 'c');
    await settle(host.clock, client.get(URLS[1], { mode: 'rlnc', proxies: 3 }));
    const afterSecond = attemptsTo(host, 'c');
    expect(afterSecond).toBeGreaterThan(afterFirst);
    const third = await settle(host.clock, client.get(URLS[2], { mode: 'rlnc', proxies: 3 }));
    expect(third.sources.map((s) => s.proxyId).sort()).toEqual(['a', 'b']);
    expect(attemptsTo(host, 'c')).toBe(afterSecond);
    client.close();
  });
});
