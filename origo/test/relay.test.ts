import {
  ANSWER,
  barrier,
  CANDIDATE,
  closeAll,
  connectClient,
  connectProxy,
  OFFER,
  proxyBarrier,
  startOrigo,
} from './helpers';

afterEach(closeAll);

describe('signalling relay', () => {
  test('offer, answer and candidates travel between a client and a proxy', async () => {
    const { port, http } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port, 'client', '127.0.7.9');

    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'conn-1', description: OFFER });
    // With the client's network as origo sees it: the proxy shares its resources per network.
    expect(await proxy.next('signal')).toEqual({
      type: 'signal',
      connectionId: 'conn-1',
      clientId: client.id,
      clientNetwork: '127.0.7.0/24',
      description: OFFER,
    });

    proxy.send({ type: 'signal', connectionId: 'conn-1', description: ANSWER });
    expect(await client.next('signal')).toEqual({ type: 'signal', connectionId: 'conn-1', description: ANSWER });

    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'conn-1', candidate: CANDIDATE });
    expect(await proxy.next('signal')).toEqual({
      type: 'signal',
      connectionId: 'conn-1',
      clientId: client.id,
      clientNetwork: '127.0.7.0/24',
      candidate: CANDIDATE,
    });
    proxy.send({ type: 'signal', connectionId: 'conn-1', candidate: CANDIDATE });
    expect(await client.next('signal')).toEqual({ type: 'signal', connectionId: 'conn-1', candidate: CANDIDATE });

    const metrics = await (await fetch(`${http}/metrics`)).text();
    expect(metrics).toContain('mutp_origo_signals_relayed_total{direction="client-to-proxy"} 2');
    expect(metrics).toContain('mutp_origo_signals_relayed_total{direction="proxy-to-client"} 2');
  });

  test('connection-closed is relayed both ways and forgets the connection', async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);

    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'c1', description: OFFER });
    await proxy.next('signal');
    client.send({ type: 'connection-closed', connectionId: 'c1', reason: 'done' });
    expect(await proxy.next('connection-closed')).toEqual({
      type: 'connection-closed',
      connectionId: 'c1',
      reason: 'done',
    });
    // Forgotten: a later candidate on it is refused.
    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'c1', candidate: CANDIDATE });
    expect((await client.next('error')).code).toBe('unknown-connection');

    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'c2', description: OFFER });
    await proxy.next('signal');
    proxy.send({ type: 'connection-closed', connectionId: 'c2', reason: 'busy' });
    expect(await client.next('connection-closed')).toEqual({
      type: 'connection-closed',
      connectionId: 'c2',
      reason: 'busy',
    });
    proxy.send({ type: 'signal', connectionId: 'c2', description: ANSWER });
    expect((await proxy.next('error')).code).toBe('unknown-connection');
  });

  test("a signal on another client's connection is refused and not forwarded", async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const other = await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2' });
    const owner = await connectClient(port, 'owner');
    const intruder = await connectClient(port, 'intruder');

    owner.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'shared', description: OFFER });
    await proxy.next('signal');

    intruder.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'shared', candidate: CANDIDATE });
    expect((await intruder.next('error')).code).toBe('unknown-connection');
    intruder.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'shared', description: OFFER });
    expect((await intruder.next('error')).code).toBe('unknown-connection');
    intruder.send({ type: 'connection-closed', connectionId: 'shared', reason: 'hijack' });
    // The owner, on its own connection, cannot point it at another proxy either.
    owner.send({ type: 'signal', proxyId: 'edge-2', connectionId: 'shared', candidate: CANDIDATE });
    expect((await owner.next('error')).code).toBe('unknown-connection');
    // Another proxy cannot answer on it.
    other.send({ type: 'signal', connectionId: 'shared', description: ANSWER });
    expect((await other.next('error')).code).toBe('unknown-connection');

    // Everything the intruder sent has been handled: the proxy got nothing of it, and the
    // connection still works for its owner.
    await barrier(intruder);
    await proxyBarrier(other);
    owner.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'shared', candidate: CANDIDATE });
    expect(await proxy.next('signal')).toMatchObject({
      connectionId: 'shared',
      clientId: owner.id,
      candidate: CANDIDATE,
    });
    expect(proxy.received).toEqual([]);
    expect(owner.received).toEqual([]);
  });

  test('a signal to an unknown proxy, or a connection not starting with an offer, is refused', async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    client.send({ type: 'signal', proxyId: 'nobody', connectionId: 'x', description: OFFER });
    expect((await client.next('error')).code).toBe('unknown-proxy');
    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'y', candidate: CANDIDATE });
    expect((await client.next('error')).code).toBe('unknown-connection');
    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'z', description: ANSWER });
    expect((await client.next('error')).code).toBe('unknown-connection');
    await barrier(client);
    expect(proxy.received).toEqual([]);
  });

  test('connections per client are capped', async () => {
    const { port } = await startOrigo({ maxConnectionsPerClient: 2 });
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    for (const id of ['k1', 'k2']) {
      client.send({ type: 'signal', proxyId: 'edge-1', connectionId: id, description: OFFER });
      await proxy.next('signal', (m) => m.connectionId === id);
    }
    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'k3', description: OFFER });
    expect((await client.next('error')).code).toBe('too-many-connections');
    client.send({ type: 'connection-closed', connectionId: 'k1', reason: 'done' });
    await proxy.next('connection-closed');
    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'k3', description: OFFER });
    await proxy.next('signal', (m) => m.connectionId === 'k3');
  });

  test("a proxy's disconnect closes its clients' connections (proxy-gone)", async () => {
    const { port } = await startOrigo();
    const doomed = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const survivor = await connectProxy(port, { proxyId: 'edge-2', name: 'edge-2' });
    const a = await connectClient(port, 'a');
    const b = await connectClient(port, 'b');
    a.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'a1', description: OFFER });
    a.send({ type: 'signal', proxyId: 'edge-2', connectionId: 'a2', description: OFFER });
    b.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'b1', description: OFFER });
    await doomed.next('signal', (m) => m.connectionId === 'a1');
    await doomed.next('signal', (m) => m.connectionId === 'b1');
    await survivor.next('signal', (m) => m.connectionId === 'a2');

    await doomed.close();
    expect(await a.next('connection-closed')).toEqual({
      type: 'connection-closed',
      connectionId: 'a1',
      reason: 'proxy-gone',
    });
    expect(await b.next('connection-closed')).toEqual({
      type: 'connection-closed',
      connectionId: 'b1',
      reason: 'proxy-gone',
    });
    // a's connection to the other proxy is untouched.
    a.send({ type: 'signal', proxyId: 'edge-2', connectionId: 'a2', candidate: CANDIDATE });
    await survivor.next('signal', (m) => m.connectionId === 'a2');
    await barrier(a);
    expect(a.received).toEqual([]);
  });

  test("a client's disconnect closes its connections at the proxies (client-gone)", async () => {
    const { port } = await startOrigo();
    const proxy = await connectProxy(port, { proxyId: 'edge-1', name: 'edge-1' });
    const client = await connectClient(port);
    client.send({ type: 'signal', proxyId: 'edge-1', connectionId: 'q1', description: OFFER });
    await proxy.next('signal');
    await client.close();
    expect(await proxy.next('connection-closed')).toEqual({
      type: 'connection-closed',
      connectionId: 'q1',
      reason: 'client-gone',
    });
  });
});
