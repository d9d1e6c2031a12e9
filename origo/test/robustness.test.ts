import WebSocket from 'ws';
import { MAX_SIGNAL_BYTES, SIGNALLING_VERSION } from '@mutp/shared';
import {
  barrier,
  CANDIDATE,
  closeAll,
  connectClient,
  connectProxy,
  OFFER,
  requestProxies,
  startOrigo,
  TestPeer,
  track,
  within,
  TEST_ASSERTION_KEY,
} from './helpers';

afterEach(closeAll);

describe('invalid frames', () => {
  test('malformed JSON and schema violations get bad-message, are logged, and leave others alone', async () => {
    const { port, http, logs } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const good = await connectClient(port, 'good');
    const bad = await connectClient(port, 'bad');
    good.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'g1', description: OFFER });
    await proxy.next('signal');

    bad.sendRaw('{"type": "request-proxies", oops');
    expect(await bad.next('error')).toMatchObject({ code: 'bad-message', message: 'frame is not JSON' });
    bad.send({ type: 'request-proxies', requestId: 'r1', count: 1000 });
    expect((await bad.next('error')).code).toBe('bad-message');
    bad.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'b1', description: OFFER, candidate: CANDIDATE });
    expect((await bad.next('error')).message).toContain('exactly one of description and candidate');
    bad.send({ type: 'teleport' });
    expect((await bad.next('error')).code).toBe('bad-message');
    bad.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'has spaces', description: OFFER });
    expect((await bad.next('error')).code).toBe('bad-message');

    // The bad client still works, and so does everyone else.
    expect(await requestProxies(bad, 1)).toEqual(['edge-1']);
    good.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'g1', candidate: CANDIDATE });
    expect(await proxy.next('signal')).toMatchObject({ connectionId: 'g1', clientId: good.id });
    expect(proxy.received).toEqual([]);

    const warnings = logs.filter((l) => l.msg === 'invalid message');
    expect(warnings).toHaveLength(5);
    for (const w of warnings) {
      expect(w.level).toBe(40);
      expect(w.peer).toBe(`client:${bad.id}`);
      expect(typeof w.reason).toBe('string');
    }
    expect(JSON.stringify(warnings)).not.toContain('oops'); // the reason, not the frame

    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_invalid_messages_total{kind="json"} 1');
    expect(metrics).toContain('mutp_origo_invalid_messages_total{kind="schema"} 4');
  });

  test('an oversized frame closes that socket (1009) only', async () => {
    const { port, http, logs } = await startOrigo();
    await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const good = await connectClient(port, 'good');
    const bad = await connectClient(port, 'bad');
    bad.sendRaw(JSON.stringify({ type: 'record', padding: 'x'.repeat(MAX_SIGNAL_BYTES) }));
    expect((await bad.closed()).code).toBe(1009);
    expect(await requestProxies(good, 1)).toEqual(['edge-1']);
    expect(
      logs.some((l) => l.msg === 'invalid message' && l.kind === 'oversized' && l.peer === `client:${bad.id}`),
    ).toBe(true);
    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_invalid_messages_total{kind="oversized"} 1');
  });

  test('a frame at the size limit is still parsed', async () => {
    const { port } = await startOrigo();
    const client = await connectClient(port);
    const frame = JSON.stringify({ type: 'hello', version: SIGNALLING_VERSION, pad: '' });
    client.sendRaw(frame.replace('""', `"${'y'.repeat(MAX_SIGNAL_BYTES - frame.length)}"`));
    expect((await client.next('error')).code).toBe('unexpected-message'); // valid, but a second hello
  });

  test('too many invalid frames close the socket with 1008', async () => {
    const { port } = await startOrigo({ maxInvalidMessages: 5 });
    const bad = await connectClient(port, 'bad');
    const good = await connectClient(port, 'good');
    for (let i = 0; i < 6; i++) bad.sendRaw('not json');
    expect(await bad.closed()).toEqual({ code: 1008, reason: 'too-many-invalid' });
    expect(bad.received.filter((m) => m.code === 'bad-message')).toHaveLength(6);
    expect(bad.received.at(-1)).toMatchObject({ type: 'error', code: 'too-many-invalid' });
    expect(await requestProxies(good, 1)).toEqual([]);
  });

  test('a socket above the message rate is closed with 1008', async () => {
    const { port } = await startOrigo({ messageRatePerSecond: 5, messageBurst: 10 });
    const flood = await connectClient(port, 'flood');
    const calm = await connectClient(port, 'calm');
    for (let i = 0; i < 100; i++) flood.send({ type: 'request-proxies', requestId: `f${i}`, count: 1 });
    expect(await flood.closed()).toEqual({ code: 1008, reason: 'rate-limited' });
    expect(flood.received.filter((m) => m.type === 'proxies').length).toBeLessThan(100);
    expect(await requestProxies(calm, 1)).toEqual([]);
  });

  test('pings count against the message rate like any message (a pong is no larger than its ping)', async () => {
    const { port } = await startOrigo({ messageRatePerSecond: 5, messageBurst: 10 });
    const flood = await connectClient(port, 'pinger');
    for (let i = 0; i < 100; i++) flood.send({ type: 'ping', nonce: `n${i}` });
    expect(await flood.closed()).toEqual({ code: 1008, reason: 'rate-limited' });
    const pongs = flood.received.filter((m) => m.type === 'pong');
    expect(pongs.length).toBeGreaterThan(0);
    expect(pongs.length).toBeLessThan(100);
    expect(pongs[0]).toEqual({ type: 'pong', nonce: 'n0' });
  });

  test('a client message before hello is refused and the socket closed', async () => {
    const { port } = await startOrigo();
    const client = await TestPeer.open(port, '/v1/client');
    client.send({ type: 'request-proxies', requestId: 'r', count: 1 });
    expect((await client.next('error')).code).toBe('hello-required');
    expect((await client.closed()).code).toBe(4000);
  });

  test('limits on proxies and clients refuse newcomers with busy (1013)', async () => {
    const { port } = await startOrigo({ maxProxies: 1, maxClients: 1 });
    await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const second = await TestPeer.open(port, '/v1/proxy');
    second.send({
      type: 'register',
      version: SIGNALLING_VERSION,
      secret: 'test-proxy-secret',
      name: 'edge-2',
      httpUrl: 'http://edge-2.test/',
      capacityBps: 0,
      maxTransfers: 1,
      modes: ['rlnc'],
      assertionKey: TEST_ASSERTION_KEY,
    });
    expect((await second.next('error')).code).toBe('busy');
    expect((await second.closed()).code).toBe(1013);

    const first = await connectClient(port);
    const extra = await TestPeer.open(port, '/v1/client');
    extra.send({ type: 'hello', version: SIGNALLING_VERSION });
    expect((await extra.next('error')).code).toBe('busy');
    expect((await extra.closed()).code).toBe(1013);
    await barrier(first);
  });

  test('a socket that stops answering pings is cut', async () => {
    const { port, http } = await startOrigo({ pingIntervalMs: 250 });
    const responsive = await connectClient(port, 'responsive');
    const mute = new WebSocket(`ws://127.0.0.1:${port}/v1/client`, { autoPong: false });
    const closed = new Promise<number>((resolve) => mute.on('close', (code) => resolve(code)));
    track({ close: async () => mute.terminate() });
    mute.on('open', () => mute.send(JSON.stringify({ type: 'hello', version: SIGNALLING_VERSION })));
    expect(await within(closed, 'origo to cut the socket that ignores pings')).toBe(1006); // no closing handshake
    expect(await requestProxies(responsive, 1)).toEqual([]);
    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_sockets_dropped_total{reason="ping-timeout"} 1');
  });
});
