/**
 * Capabilities through origo (issue 34): what a proxy declares in its registration reaches the
 * clients it is offered to, so a client knows before its first REQUEST what each proxy reads. A
 * proxy that declares nothing is offered without a set (the client takes it for the legacy set),
 * and names origo does not know (a newer proxy's) pass through: only the client interprets them.
 */
import { SIGNALLING_VERSION, SourceEndpoint } from '@mutp/shared';
import { buildCommand, parseConfig } from '../src/config';
import { closeAll, connectClient, SECRET, startOrigo, TestPeer } from '@mutp/testing/origo';

afterEach(closeAll);

async function register(port: number, name: string, capabilities?: string[]): Promise<string> {
  const peer = await TestPeer.open(port, '/v1/proxy', name);
  peer.send({
    type: 'register',
    version: SIGNALLING_VERSION,
    secret: SECRET,
    name,
    httpUrl: `http://${name}.test:8800/`,
    capacityBps: 1_000_000,
    maxTransfers: 16,
    modes: ['uncoded', 'rlnc', 'fountain'],
    assertionKey: 'A'.repeat(43),
    ...(capabilities ? { capabilities } : {}),
  });
  return (await peer.next('registered')).proxyId as string;
}

test('origo passes each proxy its declared capabilities in offers, unknown names included', async () => {
  const { port } = await startOrigo();
  const current = await register(port, 'edge-current', ['extensions', 'ranges', 'resume', 'signatures']);
  const legacy = await register(port, 'edge-legacy');
  const newer = await register(port, 'edge-newer', ['extensions', 'ranges', 'teleport']);
  const client = await connectClient(port);
  client.send({ type: 'request-proxies', requestId: 'q1', count: 3 });
  const offer = await client.next('proxies', (m) => m.requestId === 'q1');
  const byId = new Map((offer.proxies as { proxyId: string; capabilities?: string[] }[]).map((p) => [p.proxyId, p]));
  expect(byId.get(current)?.capabilities).toEqual(['extensions', 'ranges', 'resume', 'signatures']);
  expect(byId.get(legacy)).toBeDefined();
  expect(byId.get(legacy)?.capabilities).toBeUndefined();
  expect(byId.get(newer)?.capabilities).toEqual(['extensions', 'ranges', 'teleport']);
});

test('a registration with a malformed capability list is refused like any malformed field', async () => {
  const { port } = await startOrigo();
  const peer = await TestPeer.open(port, '/v1/proxy', 'edge-bad');
  peer.send({
    type: 'register',
    version: SIGNALLING_VERSION,
    secret: SECRET,
    name: 'edge-bad',
    httpUrl: 'http://edge-bad.test:8800/',
    capacityBps: 0,
    maxTransfers: 1,
    modes: ['rlnc'],
    assertionKey: 'A'.repeat(43),
    capabilities: Array.from({ length: 33 }, (_, i) => `f${i}`),
  });
  const error = await peer.next('error');
  expect(String(error.message)).toMatch(/capabilities/);
});

test('--disable-features makes a proxy one feature behind: parsed by name, declared without them', () => {
  const config = parseConfig(['node', 'proxy', '--secret', 's', '--disable-features', 'resume, ranges']);
  expect(config.disabledFeatures).toEqual(['resume', 'ranges']);
  expect(SourceEndpoint.declaredFeatures(config.disabledFeatures)).toEqual([
    'extensions',
    'weights',
    'attributes',
    'signatures',
    'symbol-digests',
    'partitioned',
    'fetching',
  ]);
  expect(parseConfig(['node', 'proxy', '--secret', 's']).disabledFeatures).toBeUndefined();
  const command = buildCommand()
    .exitOverride()
    .configureOutput({ writeErr: () => undefined });
  expect(() =>
    parseConfig(['node', 'proxy', '--secret', 's', '--disable-features', 'resume,teleport'], command),
  ).toThrow(/unknown feature "teleport"/);
});

test("a client's hello may declare its capabilities; origo accepts the field and still welcomes an older client without it", async () => {
  const { port } = await startOrigo();
  for (const capabilities of [['extensions', 'ranges', 'a-newer-one'], undefined]) {
    const peer = await TestPeer.open(port, '/v1/client', 'client');
    peer.send({ type: 'hello', version: SIGNALLING_VERSION, ...(capabilities ? { capabilities } : {}) });
    expect((await peer.next('welcome')).clientId).toEqual(expect.any(String));
  }
  const bad = await TestPeer.open(port, '/v1/client', 'client');
  bad.send({ type: 'hello', version: SIGNALLING_VERSION, capabilities: ['Not A Name'] });
  expect(String((await bad.next('error')).message)).toMatch(/capabilities/);
});
