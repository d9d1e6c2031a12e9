/**
 * Which transport a proxy link gets: QUIC where the proxy offers it, WebRTC beside it after a
 * head start or a failure, and a mix of both in one download. Fake time, real SourceEndpoints
 * (helpers/fake-host.ts).
 */
import { Codec, Mode, rlncCodec, uncodedCodec } from '../src';
import {
  ClientError,
  ConnectTimeoutError,
  GetResult,
  LinkTransport,
  MutpClient,
  openPreferringQuic,
  QUIC_HEAD_START_MS,
  TransportPreference,
} from '../src/client';
import { FakeClock, FakeHost, objectOf, proxy, settle } from './helpers/fake-host';

const URL_ = 'https://media.example/seg-1.m4s';
const codecs = { rlnc: rlncCodec, uncoded: uncodedCodec, fountain: rlncCodec } as unknown as Record<Mode, Codec>;

/** Each source's transport, in the result's order. */
const transports = (r: GetResult) => r.sources.map((s) => ('transport' in s ? s.transport : 'http'));

function setup(proxies: ReturnType<typeof proxy>[], transport?: TransportPreference) {
  const host = new FakeHost({ proxies });
  const object = objectOf(20_000);
  host.objects.set(URL_, object);
  const trace: string[] = [];
  const client = new MutpClient(host, {
    origoUrl: 'wss://origo.example/v1/client',
    codecs,
    symbolSize: 512,
    generationSize: 8,
    window: 64,
    connectTimeoutMs: 5000,
    transport,
    trace: (line) => trace.push(line),
  });
  return { host, client, object, trace };
}

describe('the client prefers QUIC', () => {
  test('a proxy offering QUIC is reached over it, with the origo token in the URL, and no WebRTC peer', async () => {
    const { host, client, object } = setup([proxy('a', 'ok', 'ok'), proxy('b', 'ok', 'ok')]);
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(transports(result)).toEqual(['quic', 'quic']);
    expect(host.quicAttempts.get('a')).toEqual(['https://a.example:4433/mutp?token=eyJ0.eyJ1.c2ln']);
    // Only the QUIC sessions' fake channel pairs: no offer went through origo.
    expect(host.handshakes.size).toBe(0);
    client.close();
  });

  test("a proxy's own token from the offer goes in its QUIC URL, never the session token; renewals replace it across sessions", async () => {
    const a = proxy('a', 'ok', 'ok');
    a.info.token = 'eyJhIjoxfQ.eyJwIjoiYSJ9.c2lnLWE';
    const { host, client } = setup([a]);
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(host.quicAttempts.get('a')).toEqual([`https://a.example:4433/mutp?token=${a.info.token}`]);
    // origo renews the client's tokens, the proxy's with them; the next QUIC session presents it.
    const renewed = 'eyJhIjoyfQ.eyJwIjoiYSJ9.c2lnLWEy';
    host.sockets[0].push({
      type: 'token',
      token: 'eyJ0.eyJ1.bmV3',
      expiresAt: 600_000,
      proxyTokens: [{ proxyId: 'a', token: renewed }],
    });
    // A new origo session (the network changed) whose offer carries no token for the proxy: the
    // renewed one is kept across sessions.
    delete a.info.token;
    client.networkChanged();
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(host.quicAttempts.get('a')?.at(-1)).toBe(`https://a.example:4433/mutp?token=${renewed}`);
    expect(host.quicAttempts.get('a')!.some((u) => u.includes('eyJ0.eyJ1'))).toBe(false);
    client.close();
  });

  test('one download mixes QUIC and WebRTC sources', async () => {
    const { host, client, object } = setup([proxy('a', 'ok', 'ok'), proxy('b')]);
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2 }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(Object.fromEntries(result.sources.map((s, i) => [s.proxyId, transports(result)[i]]))).toEqual({
      a: 'quic',
      b: 'webrtc',
    });
    client.close();
  });

  test('UDP blocked (QUIC never answers): WebRTC takes over after the head start, at most 1 s lost', async () => {
    const { host, client, object } = setup([proxy('a', 'ok', 'blackhole')]);
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(transports(result)[0]).toBe('webrtc');
    expect(host.handshakes.get('a')).toBe(1);
    // The whole download took the head start plus the WebRTC handshake and the transfer.
    expect(result.startedAt).toBeGreaterThanOrEqual(QUIC_HEAD_START_MS);
    expect(result.startedAt).toBeLessThan(QUIC_HEAD_START_MS + 100);
    client.close();
  });

  test('QUIC refused at once: WebRTC starts at once; the proxy is then reached over WebRTC alone for a while', async () => {
    const { host, client, trace } = setup([proxy('a', 'ok', 'refuses')]);
    const first = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(transports(first)[0]).toBe('webrtc');
    expect(first.startedAt).toBeLessThan(100);
    expect(trace).toContainEqual(expect.stringMatching(/a: QUIC failed .*refused \(403\)/));
    client.close();
    await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(host.quicAttempts.get('a')).toHaveLength(1);
    client.close();
  });

  test("transport 'webrtc' never tries QUIC; 'quic' never falls back", async () => {
    const plain = setup([proxy('a', 'ok', 'ok')], 'webrtc');
    const r = await settle(plain.host.clock, plain.client.get(URL_, { mode: 'rlnc', proxies: 1 }));
    expect(transports(r)[0]).toBe('webrtc');
    expect(plain.host.quicAttempts.size).toBe(0);
    plain.client.close();

    const strict = setup([proxy('a', 'ok', 'refuses')], 'quic');
    const error = await settle(strict.host.clock, strict.client.get(URL_, { mode: 'rlnc', proxies: 1 })).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).code).toBe('no-proxies');
    expect(String(error)).toMatch(/QUIC: refused/);
    expect(strict.host.handshakes.size).toBe(0);
    strict.client.close();
  });

  test('a network change mid-download: the QUIC links reconnect over QUIC and resume byte-exact', async () => {
    const { host, client, trace } = setup([proxy('a', 'ok', 'ok'), proxy('b', 'ok', 'ok')]);
    const object = objectOf(200_000);
    host.objects.set(URL_, object);
    let changed = false;
    const onProgress = (p: { dof: number; totalDof: number }) => {
      if (changed || p.dof <= p.totalDof / 4) return;
      changed = true;
      host.changeNetwork();
    };
    const result = await settle(host.clock, client.get(URL_, { mode: 'rlnc', proxies: 2, onProgress }), 30_000);
    expect(changed).toBe(true);
    expect(Buffer.from(result.object).equals(Buffer.from(object))).toBe(true);
    expect(transports(result)).toEqual(['quic', 'quic']);
    expect(trace).toContainEqual(expect.stringMatching(/reconnected/));
    expect(host.quicAttempts.get('a')!.length).toBeGreaterThan(1);
    client.close();
  });
});

describe('openPreferringQuic', () => {
  const transport = (kind: string): LinkTransport & { closed: boolean } => ({
    kind,
    isOpen: true,
    closed: false,
    send: () => true,
    close() {
      this.closed = true;
    },
  });
  const after = <T>(clock: FakeClock, ms: number, value: () => T) =>
    new Promise<T>((resolve) => clock.setTimer(ms, () => resolve(value())));
  const failAfter = (clock: FakeClock, ms: number, error: Error) =>
    new Promise<never>((_, reject) => clock.setTimer(ms, () => reject(error)));

  test('QUIC within its head start: WebRTC is never started', async () => {
    const clock = new FakeClock();
    let webrtcStarted = false;
    const t = await settle(
      clock,
      openPreferringQuic(
        () => after(clock, 300, () => transport('quic')),
        () => {
          webrtcStarted = true;
          return after(clock, 10, () => transport('webrtc'));
        },
        clock,
      ),
    );
    expect(t.kind).toBe('quic');
    expect(webrtcStarted).toBe(false);
  });

  test('both open: the first wins and the other is closed when it opens', async () => {
    const clock = new FakeClock();
    const late = transport('quic');
    const t = await settle(
      clock,
      openPreferringQuic(
        () => after(clock, 1500, () => late),
        () => after(clock, 200, () => transport('webrtc')),
        clock,
      ),
    );
    expect(t.kind).toBe('webrtc');
    expect(clock.now()).toBe(1200);
    await settle(
      clock,
      after(clock, 1000, () => undefined),
    );
    expect(late.closed).toBe(true);
  });

  test('both time out: a ConnectTimeoutError naming both; both fail otherwise: connect-failed', async () => {
    const clock = new FakeClock();
    const timeouts = await settle(
      clock,
      openPreferringQuic(
        () => failAfter(clock, 5000, ConnectTimeoutError.after('a', 5000)),
        () => failAfter(clock, 5000, ConnectTimeoutError.after('a', 5000)),
        clock,
      ).catch((e: unknown) => e),
    );
    expect(timeouts).toBeInstanceOf(ConnectTimeoutError);
    expect(String(timeouts)).toMatch(/quic: .*webrtc: /);
    const mixed = await settle(
      clock,
      openPreferringQuic(
        () => failAfter(clock, 10, new Error('refused')),
        () => failAfter(clock, 5000, ConnectTimeoutError.after('a', 5000)),
        clock,
      ).catch((e: unknown) => e),
    );
    expect(mixed).not.toBeInstanceOf(ConnectTimeoutError);
    expect((mixed as ClientError).code).toBe('connect-failed');
  });
});
