/**
 * The client orchestration (`@mutp/shared/client`: MutpClient, OrigoSession, ProxyLink,
 * runDownload) against a fake host: fake time, a scripted origo, fake WebRTC peers whose channels
 * reach real SourceEndpoints. Each path a real network can take (origo unreachable, silent or
 * gone, proxies that fail, never answer or never send META, the caller aborting) ends with a
 * clear ClientError within its timeout, and leaves nothing behind.
 */
import { Codec, DEFAULT_WINDOW, MAX_PATH_WINDOW, Mode, rlncCodec, uncodedCodec } from '../src/internal';
import { ClientError, ClientOptions, MutpClient } from '../src/client';
import { FakeHost, objectOf, OrigoScript, proxy, settle } from './helpers/fake-host';

const URL_ = 'https://media.example/seg-1.m4s';
const codecs = { rlnc: rlncCodec, uncoded: uncodedCodec, fountain: rlncCodec } as unknown as Record<Mode, Codec>;

function setup(
  script: OrigoScript,
  object = objectOf(20_000),
  window: number | 'path' = 64,
  declared: Pick<ClientOptions, 'disabledFeatures' | 'region'> = {},
) {
  const host = new FakeHost(script);
  host.objects.set(URL_, object);
  const client = new MutpClient(host, {
    origoUrl: 'wss://origo.example/v1/client',
    codecs,
    symbolSize: 512,
    generationSize: 8,
    window,
    connectTimeoutMs: 5000,
    ...declared,
  });
  return { host, client, object };
}

async function failure(host: FakeHost, p: Promise<unknown>, maxMs?: number): Promise<ClientError> {
  const error = await settle(host.clock, p, maxMs).then(
    () => {
      throw new Error('expected the download to fail');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  return error as ClientError;
}

describe('a download through N proxies', () => {
  test.each(['rlnc', 'uncoded'] as const)(
    '%s: completes byte-exact from three proxies and reports a record',
    async (mode) => {
      const { host, client, object } = setup({ proxies: [proxy('a'), proxy('b'), proxy('c')] });
      const result = await settle(host.clock, client.get(URL_, { mode, proxies: 3 }));
      expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
      expect(result.sources.map((s) => s.proxyId).sort()).toEqual(['a', 'b', 'c']);
      const record = host.origoHeard.find((m) => m.type === 'record') as {
        record: { status: string; sources: number };
      };
      expect(record.record).toMatchObject({ status: 'complete', sources: 3 });
      client.close();
      await settle(host.clock, Promise.resolve());
      expect(host.openPeers).toBe(0);
    },
  );

  test('a second download reuses the open connections (no new peer, no new origo session)', async () => {
    const { host, client } = setup({ proxies: [proxy('a'), proxy('b')] });
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    const peers = host.peers.length;
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(host.peers.length).toBe(peers);
    expect(host.sockets.length).toBe(1);
    client.close();
  });

  test('progress: DoF only grow, and end at the object, whose length is reported once known', async () => {
    const { host, client, object } = setup({ proxies: [proxy('a'), proxy('b')] });
    const seen: { dof: number; totalDof: number; bytes: number }[] = [];
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, onProgress: (p) => seen.push(p) }));
    expect(seen.length).toBeGreaterThan(10);
    for (let i = 1; i < seen.length; i++) expect(seen[i].dof).toBeGreaterThanOrEqual(seen[i - 1].dof);
    const last = seen[seen.length - 1];
    expect(last.dof).toBe(last.totalDof);
    expect(last.bytes).toBe(object.length);
    client.close();
  });

  test("window 'path': the default until a transfer measured the proxies, then sized from their path", async () => {
    // Proxies claiming 1 GB/s each, 2 ms away: five bandwidth-delay products are far above the largest path window.
    const fast = (id: string) => ({ ...proxy(id), info: { ...proxy(id).info, capacityBps: 1e9 } });
    const { host, client } = setup({ proxies: [fast('a'), fast('b')] }, objectOf(20_000), 'path');
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(host.proxyStats.get('a')!.windows).toEqual([DEFAULT_WINDOW]);
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(host.proxyStats.get('a')!.windows).toEqual([DEFAULT_WINDOW, MAX_PATH_WINDOW]);
    expect(host.proxyStats.get('b')!.windows).toEqual([DEFAULT_WINDOW, MAX_PATH_WINDOW]);
    client.close();
  });
});

describe('origo', () => {
  test('what the client declares: hello names its features (less those switched off), each proxy request its region hint', async () => {
    const { host, client, object } = setup({ proxies: [proxy('a'), proxy('b')] }, undefined, undefined, {
      disabledFeatures: ['resume', 'weights'],
      region: 'eu-west',
    });
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    const hello = host.origoHeard.find((m) => m.type === 'hello') as { capabilities?: string[] };
    expect(hello.capabilities).toEqual(expect.arrayContaining(['extensions', 'ranges', 'signatures']));
    expect(hello.capabilities).not.toContain('resume');
    expect(hello.capabilities).not.toContain('weights');
    const requests = host.origoHeard.filter((m) => m.type === 'request-proxies');
    expect(requests.length).toBeGreaterThan(0);
    for (const r of requests) expect(r).toMatchObject({ region: 'eu-west' });
    client.close();
  });

  test('unreachable: origo-unreachable at once, with the reason', async () => {
    const { host, client } = setup({ unreachable: true, proxies: [] });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(error.code).toBe('origo-unreachable');
    expect(error.message).toMatch(/ENOTFOUND/);
  });

  test('accepts the socket and never answers: origo-unreachable after the timeout, not a hang', async () => {
    const { host, client } = setup({ silent: true, proxies: [proxy('a')] });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(error.code).toBe('origo-unreachable');
    expect(error.message).toMatch(/no welcome .* within 10000 ms/);
    expect(host.clock.now()).toBeLessThan(11_000);
    expect(host.sockets[0].readyState).toBe(3);
  });

  test('closes the socket before the welcome: origo-unreachable with its close code', async () => {
    const { host, client } = setup({ closesAtOnce: true, proxies: [proxy('a')] });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(error.code).toBe('origo-unreachable');
    expect(error.message).toMatch(/1006/);
  });

  test('no proxy to offer: no-proxies', async () => {
    const { host, client } = setup({ proxies: [] });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 4 }));
    expect(error.code).toBe('no-proxies');
    client.close();
  });

  test('plain ws:// to a remote host is refused before any socket opens', async () => {
    const host = new FakeHost({ proxies: [proxy('a')] });
    const client = new MutpClient(host, { origoUrl: 'ws://origo.example/v1/client', codecs });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(error.message).toMatch(/plain ws:\/\/ to origo.example is refused/);
    expect(host.sockets).toHaveLength(0);
  });
});

describe('proxies that fail', () => {
  test('a peer connection that fails: the others serve the download, the failed one is not asked again', async () => {
    const { host, client, object } = setup({ proxies: [proxy('bad', 'peer-fails'), proxy('a'), proxy('b')] });
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 3 }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(result.sources.map((s) => s.proxyId).sort()).toEqual(['a', 'b']);
    const requests = host.origoHeard.filter((m) => m.type === 'request-proxies') as { exclude: string[] }[];
    // origo is asked again for the missing one, without the failed proxy.
    expect(requests.at(-1)!.exclude).toContain('bad');
    client.close();
  });

  test('a proxy going away (draining) mid-download serves it to the end; the next download goes to another, not to it', async () => {
    const { host, client, object } = setup({ proxies: [proxy('a'), proxy('b'), proxy('c')] }, objectOf(200_000));
    // b drains (SIGTERM) once the download is under way.
    const drainB = () => host.draining.has('b') || host.drain('b');
    const first = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, onProgress: drainB }));
    expect(Buffer.from(first.object).equals(Buffer.from(object))).toBe(true);
    const b = first.sources.find((x) => x.proxyId === 'b')!;
    expect(b.share).toBeGreaterThan(0);
    expect('state' in b && b.state).not.toBe('failed');
    expect(client.leavingProxies()).toEqual(['b']);

    const [a, bInfo] = host.script.proxies.map((p) => p.info);
    const second = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, use: [a, bInfo] }));
    expect(second.sources.map((x) => x.proxyId).sort()).toEqual(['a', 'c']);
    // No REQUEST went to b after it said it was going away, and origo was asked for another without it.
    expect(host.proxyStats.get('b')!.requests).toBe(1);
    const requests = host.origoHeard.filter((m) => m.type === 'request-proxies') as { exclude: string[] }[];
    expect(requests.at(-1)!.exclude).toContain('b');
    client.close();
  });

  test('a proxy origo withdraws (reported) gets no new download from this client; origo is asked for another', async () => {
    const { host, client } = setup({ proxies: [proxy('a'), proxy('b'), proxy('c')] });
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    host.withdraw('b', 'revoked');
    await settle(host.clock, Promise.resolve());
    expect(client.leavingProxies()).toEqual(['b']);
    const [a, b] = host.script.proxies.map((p) => p.info);
    const next = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, use: [a, b] }));
    expect(next.sources.map((x) => x.proxyId).sort()).toEqual(['a', 'c']);
    expect(host.proxyStats.get('b')!.requests).toBe(1);
    // Forgotten after ten minutes (origo no longer offers it anyway).
    const tenMinutes = 10 * 60_000 + 1;
    await settle(host.clock, new Promise((r) => host.clock.setTimer(tenMinutes, () => r(undefined))), 2 * tenMinutes);
    expect(client.leavingProxies()).toEqual([]);
    client.close();
  });

  test('a proxy that never answers the offer: connect timeout, the download goes on without it', async () => {
    const { host, client } = setup({ proxies: [proxy('mute', 'never-answers'), proxy('a')] });
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(result.sources.map((s) => s.proxyId)).toEqual(['a']);
    // Two attempts (one retry) of 5 s each before it was given up, not a third.
    expect(host.handshakes.get('mute')).toBe(2);
    expect(host.clock.now()).toBeGreaterThanOrEqual(10_000);
    expect(host.clock.now()).toBeLessThan(15_000);
    client.close();
  });

  test('handshakes that fail at once (the DTLS start race) are tried again: the third connects', async () => {
    const { host, client, object } = setup({ proxies: [proxy('racy', 'fails-twice')] });
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(result.sources.map((s) => s.proxyId)).toEqual(['racy']);
    expect(host.handshakes.get('racy')).toBe(3);
    client.close();
  });

  test('every proxy unreachable: no-proxies after the connect timeouts, naming why for each', async () => {
    const { host, client } = setup({ proxies: [proxy('x', 'peer-fails'), proxy('y', 'never-answers')] });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(error.code).toBe('no-proxies');
    expect(error.message).toMatch(/proxy x: peer connection failed/);
    expect(error.message).toMatch(/proxy y: no connection within/);
    // A fast failure is tried three times, a timeout twice.
    expect(host.handshakes.get('x')).toBe(3);
    expect(host.handshakes.get('y')).toBe(2);
    client.close();
  });

  test('a connected proxy that never sends META: the download fails as stalled, not a hang', async () => {
    const { host, client } = setup({ proxies: [proxy('deaf', 'silent-channels')] });
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(error.code).toBe('download-failed');
    expect(error.message).toMatch(/stalled|no source/i);
    const record = host.origoHeard.find((m) => m.type === 'record') as { record: { status: string } };
    expect(record.record.status).toBe('failed');
    client.close();
  });

  test('an object the origin does not have: the proxies answer ERROR and the download fails with it', async () => {
    const { host, client } = setup({ proxies: [proxy('a'), proxy('b')] });
    const error = await failure(host, client.get('https://media.example/missing.m4s', { mode: 'rlnc', proxies: 2 }));
    expect(error.code).toBe('download-failed');
    expect(error.message).toMatch(/404/);
    client.close();
  });
});

describe('the caller aborts', () => {
  test('mid-transfer: cancelled, and the proxies are told to STOP', async () => {
    const big = objectOf(400_000, 9);
    const { host, client } = setup({ proxies: [proxy('a'), proxy('b')] }, big);
    const abort = new AbortController();
    const download = client.get(URL_, { mode: 'rlnc', proxies: 2, signal: abort.signal });
    // Let it connect and start receiving, then abort.
    host.clock.setTimer(40, () => abort.abort());
    const error = await failure(host, download);
    expect(error.code).toBe('cancelled');
    expect(host.clock.now()).toBeLessThan(1000);
    // Let the STOPs arrive: every proxy that got the REQUEST is told.
    host.clock.setTimer(10, () => undefined);
    await settle(host.clock, new Promise<void>((resolve) => host.clock.setTimer(20, resolve)));
    for (const id of ['a', 'b'])
      expect(host.proxyStats.get(id)).toMatchObject({ requests: 1, stops: expect.any(Number) });
    expect(host.proxyStats.get('a')!.stops + host.proxyStats.get('b')!.stops).toBeGreaterThanOrEqual(2);
    client.close();
  });

  test('while origo is silent: cancelled at once, not after the session timeout', async () => {
    const { host, client } = setup({ silent: true, proxies: [proxy('a')] });
    const abort = new AbortController();
    host.clock.setTimer(100, () => abort.abort());
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1, signal: abort.signal }));
    expect(error.code).toBe('cancelled');
    expect(host.clock.now()).toBe(100);
    client.close();
  });

  test('while a proxy connection is being set up: cancelled at once, not after the connect timeout', async () => {
    const { host, client } = setup({ proxies: [proxy('mute', 'never-answers')] });
    const abort = new AbortController();
    host.clock.setTimer(200, () => abort.abort());
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1, signal: abort.signal }));
    expect(error.code).toBe('cancelled');
    expect(host.clock.now()).toBe(200);
    client.close();
  });

  test('before it starts: cancelled without a transfer', async () => {
    const { host, client } = setup({ proxies: [proxy('a')] });
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    const requestsBefore = host.proxyStats.get('a')!.requests;
    const abort = new AbortController();
    abort.abort();
    const error = await failure(host, client.get(URL_, { mode: 'rlnc', proxies: 1, signal: abort.signal }));
    expect(error.code).toBe('cancelled');
    expect(host.proxyStats.get('a')!.requests).toBe(requestsBefore);
    client.close();
  });
});

describe('a disconnection mid-download (resume)', () => {
  /** Two proxies, an object seeded `seed`, and a client that waits out disconnections and traces. */
  function mobileClient(seed: number) {
    const object = objectOf(400_000, seed);
    const host = new FakeHost({ proxies: [proxy('a'), proxy('b')] });
    host.objects.set(URL_, object);
    const trace: string[] = [];
    const client = new MutpClient(host, {
      origoUrl: 'wss://origo.example/v1/client',
      codecs,
      symbolSize: 512,
      generationSize: 8,
      connectTimeoutMs: 5000,
      stallTimeoutMs: 60_000,
      trace: (line) => trace.push(line),
    });
    return { host, client, object, trace };
  }

  /** A download of `object` through two proxies whose access network is cut for `cutMs` a quarter of the way in. */
  async function cutDownload(cutMs: number, stuckMs: number) {
    const { host, client, object, trace } = mobileClient(3);
    let cutEnds = Infinity;
    const result = await settle(
      host.clock,
      client.get(URL_, {
        mode: 'rlnc',
        proxies: 2,
        onProgress: (p) => {
          if (cutEnds === Infinity && p.dof > p.totalDof / 4) {
            host.network.cut(cutMs, stuckMs);
            cutEnds = host.clock.now() + cutMs;
          }
        },
      }),
    );
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(cutEnds).toBeLessThan(Infinity);
    client.close();
    return { host, trace, doneAfterCutMs: host.clock.now() - cutEnds };
  }

  test('a network change mid-download: the links and the origo session are made anew at once, and the download resumes', async () => {
    const { host, client, object } = setup({ proxies: [proxy('a'), proxy('b')] }, objectOf(200_000));
    let changedAt = -1;
    let dofAtChange = 0;
    const onProgress = (p: { dof: number; totalDof: number }) => {
      if (changedAt >= 0 || p.dof <= p.totalDof / 4) return;
      changedAt = host.clock.now();
      dofAtChange = p.dof;
      host.changeNetwork();
    };
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, onProgress }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(dofAtChange).toBeGreaterThan(0);
    // A new origo session and two new peer connections, not 3 s of silence first.
    expect(host.sockets).toHaveLength(2);
    expect(host.peers).toHaveLength(4);
    expect(host.clock.now() - changedAt).toBeLessThan(3000);
    expect(result.sources.map((x) => x.proxyId).sort()).toEqual(['a', 'b']);
    client.close();
  });

  test('origo silent after the gap (its socket in back-off): a new session, and the download goes on within a second of the network', async () => {
    // The old socket would deliver 6 s after the network is back; reconnecting through it took that long.
    const { host, trace, doneAfterCutMs } = await cutDownload(8000, 6000);
    expect(trace).toContainEqual(expect.stringMatching(/no answer to a ping within 1500 ms, opening a new session/));
    // A session attempt begun in the gap may time out; the old socket and those are closed.
    expect(host.sockets.length).toBeGreaterThanOrEqual(2);
    expect(host.sockets.slice(0, -1).every((s) => s.readyState === 3)).toBe(true);
    expect(doneAfterCutMs).toBeGreaterThan(0);
    expect(doneAfterCutMs).toBeLessThan(1000);
  });

  test('a request sent into a disconnection: judged when origo does not answer either, not after 10 s of silence', async () => {
    const { host, client, object, trace } = mobileClient(4);
    // A set chosen once (as a segment series does), so the second download needs nothing of origo.
    const use = await settle(host.clock, client.chooseProxies(2, 'rlnc'));
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, use }));
    // The links stay open after the first download; the network goes just before the second.
    host.network.cut(8000, 6000);
    const cutEnds = host.clock.now() + 8000;
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, use }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(trace).toContainEqual(expect.stringMatching(/no answer for 3000 ms, and the network does not answer/));
    // The check closed the stuck session: the reconnection opens a new one without pinging it again.
    expect(trace).toContainEqual(expect.stringMatching(/no answer to a ping within 1500 ms, the network is down/));
    expect(trace).not.toContainEqual(expect.stringMatching(/opening a new session/));
    // Waiting out UNANSWERED_LINK_MS (10 s from the request) would end 2 s after the cut at the earliest.
    expect(host.clock.now() - cutEnds).toBeLessThan(2000);
    client.close();
  });

  test('origo answers the ping after a short gap: its session is kept', async () => {
    // Long enough for the links to be judged silent (3 s), short enough for the ping to be answered.
    const { host, trace, doneAfterCutMs } = await cutDownload(5000, 0);
    expect(trace).toContainEqual(expect.stringMatching(/reconnected/));
    expect(trace).not.toContainEqual(expect.stringMatching(/no answer to a ping/));
    expect(host.sockets).toHaveLength(1);
    expect(doneAfterCutMs).toBeLessThan(2500);
  });
});
