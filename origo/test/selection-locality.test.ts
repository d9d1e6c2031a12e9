/**
 * Locality (selection.ts rule 6, issue 34): a client's region from the prefixes proxies declare,
 * its region's proxies first, the others only when the region cannot fill the request, a client's
 * hint bounded, and rule 5's score-independent pick kept inside the region.
 */
import { seededRandom } from '@mutp/shared';
import {
  clientRegion,
  MIN_HINTED_REGION_PROXIES,
  ProxyLoad,
  SelectableMode,
  SelectionRequest,
  selectProxies,
} from '../src/selection';
import {
  closeAll,
  connectClient,
  KEY9,
  keysFile,
  registerMessage,
  requestProxies,
  startOrigo,
  TestPeer,
  within,
} from './helpers';

afterEach(closeAll);

const ALL: SelectableMode[] = ['uncoded', 'rlnc', 'fountain'];

function proxy(proxyId: string, region?: string, o: Partial<Omit<ProxyLoad, 'modes' | 'proxyId'>> = {}): ProxyLoad {
  return {
    proxyId,
    modes: new Set(ALL),
    capacityBps: 1_000_000,
    uploadBps: 0,
    activeTransfers: 0,
    maxTransfers: 10,
    ...(region !== undefined ? { region } : {}),
    ...o,
  };
}

const ids = (ps: ProxyLoad[]) => ps.map((p) => p.proxyId).sort();

/** Every proxy id `select` returned over `runs` seeded draws, with how often. */
function tally(runs: number, select: (random: ReturnType<typeof seededRandom>) => ProxyLoad[]): Map<string, number> {
  const random = seededRandom(34);
  const seen = new Map<string, number>();
  for (let i = 0; i < runs; i++) for (const p of select(random)) seen.set(p.proxyId, (seen.get(p.proxyId) ?? 0) + 1);
  return seen;
}

describe('selection with regions (pure)', () => {
  // Region b's proxies have ten times the spare capacity: they would win on scores alone.
  const fleet = [
    proxy('a1', 'a'),
    proxy('a2', 'a'),
    proxy('b1', 'b', { capacityBps: 10_000_000 }),
    proxy('b2', 'b', { capacityBps: 10_000_000 }),
  ];

  test("the client's region fills the request whatever the others' scores", () => {
    const seen = tally(200, (random) => selectProxies(fleet, { count: 2, region: 'a' }, random));
    expect([...seen.keys()].sort()).toEqual(['a1', 'a2']);
    // Without a region, scores rule as before (the ranked place; the last of several is rule 5's draw).
    expect(ids(selectProxies(fleet, { count: 1 }, seededRandom(1)))).toEqual([expect.stringMatching(/^b/)]);
  });

  test('a region that cannot fill the request gives all it has, then the best of the others', () => {
    const oneLeft = [proxy('a1', 'a', { activeTransfers: 10 }), ...fleet.slice(1)];
    expect(ids(selectProxies(oneLeft, { count: 2, region: 'a' }, seededRandom(1)))).toEqual(['a2', 'b1']);
    expect(ids(selectProxies(fleet, { count: 3, region: 'a', exclude: ['a2'] }, seededRandom(1)))).toEqual([
      'a1',
      'b1',
      'b2',
    ]);
    // Nothing of the region eligible: every other proxy is a candidate, as without a region.
    const elsewhere = tally(100, (random) => selectProxies(fleet, { count: 2, region: 'nowhere' }, random));
    expect([...elsewhere.keys()].sort()).toEqual(['a1', 'a2', 'b1', 'b2']);
  });

  test('proxies that declare no region are near everyone (a mixed fleet keeps working)', () => {
    const mixed = [proxy('old'), proxy('a1', 'a'), proxy('b1', 'b', { capacityBps: 10_000_000 })];
    const seen = tally(100, (random) => selectProxies(mixed, { count: 2, region: 'a' }, random));
    expect([...seen.keys()].sort()).toEqual(['a1', 'old']);
    expect(ids(selectProxies(mixed, { count: 2, region: 'b' }, seededRandom(1)))).toEqual(['b1', 'old']);
  });

  test("rule 5 holds inside the region: the last place is drawn from the region's proxies, not by score", () => {
    // Two proxies claim (or were recorded with) far more capacity than the rest of their region.
    const region = [
      proxy('loud1', 'a', { measuredBps: 50_000_000 }),
      proxy('loud2', 'a', { measuredBps: 50_000_000 }),
      proxy('q1', 'a', { measuredBps: 1_000_000 }),
      proxy('q2', 'a', { measuredBps: 1_000_000 }),
      proxy('q3', 'a', { measuredBps: 1_000_000 }),
      proxy('far', 'b', { measuredBps: 1_000_000 }),
    ];
    const request: SelectionRequest = { count: 2, region: 'a' };
    const seen = tally(600, (random) => selectProxies(region, request, random));
    // loud1/loud2 share the ranked place; the drawn place reaches every other proxy of the region.
    for (const quiet of ['q1', 'q2', 'q3']) expect(seen.get(quiet)).toBeGreaterThan(60);
    expect(seen.has('far')).toBe(false);
  });

  test('a hint is followed only without an address region, and only towards enough eligible proxies', () => {
    const many = [
      ...['h1', 'h2', 'h3'].map((id) => proxy(id, 'hinted')),
      proxy('b1', 'b', { capacityBps: 10_000_000 }),
      proxy('b2', 'b', { capacityBps: 10_000_000 }),
    ];
    expect(MIN_HINTED_REGION_PROXIES).toBe(3);
    const hinted = tally(100, (random) => selectProxies(many, { count: 2, regionHint: 'hinted' }, random));
    expect([...hinted.keys()].sort()).toEqual(['h1', 'h2', 'h3']);
    // The address's region wins over the hint.
    const placed = selectProxies(many, { count: 2, region: 'b', regionHint: 'hinted' }, seededRandom(1));
    expect(ids(placed)).toEqual(['b1', 'b2']);
    // Excluding its way down to fewer than three: the hint no longer narrows anything (a client
    // cannot use it to be sent to one proxy of its choosing).
    const narrowed = selectProxies(many, { count: 1, regionHint: 'hinted', exclude: ['h1', 'h2'] }, seededRandom(1));
    expect(ids(narrowed)).not.toEqual(['h3']);
    // A hint naming a region of too few proxies, or no region: ignored.
    for (const hint of ['b', 'nowhere']) {
      const ignored = tally(100, (random) => selectProxies(many, { count: 2, regionHint: hint }, random));
      expect([...ignored.keys()].sort()).toEqual(['b1', 'b2', 'h1', 'h2', 'h3']);
    }
  });
});

describe("the client's region from declared prefixes", () => {
  const declared = [
    proxy('wide', 'eu', { prefixes: ['10.0.0.0/8'] }),
    proxy('narrow', 'eu-isp', { prefixes: ['10.1.0.0/16', '2001:db8::/32'] }),
    proxy('silent', 'eu'),
    proxy('unplaced', undefined, { prefixes: ['10.2.0.0/16'] }),
  ];

  test('the longest declared prefix holding the address names the region', () => {
    expect(clientRegion(declared, '10.9.9.9')).toBe('eu');
    expect(clientRegion(declared, '10.1.2.3')).toBe('eu-isp');
    expect(clientRegion(declared, '::ffff:10.1.2.3')).toBe('eu-isp');
    expect(clientRegion(declared, '2001:db8:1::5')).toBe('eu-isp');
    // A prefix of a proxy without a region says nothing: 10.2/16 falls back to 10/8.
    expect(clientRegion(declared, '10.2.0.1')).toBe('eu');
  });

  test('no region for an address outside every prefix, an unparsable one, or a tie between regions', () => {
    expect(clientRegion(declared, '192.0.2.1')).toBeUndefined();
    expect(clientRegion(declared, '/run/origo.sock')).toBeUndefined();
    expect(clientRegion(declared, '2001:db9::1')).toBeUndefined();
    const tie = [...declared, proxy('rival', 'us', { prefixes: ['10.1.0.0/16'] })];
    expect(clientRegion(tie, '10.1.2.3')).toBeUndefined();
    // Agreeing declarations of one region are no tie.
    expect(clientRegion([...declared, proxy('twin', 'eu-isp', { prefixes: ['10.1.0.0/16'] })], '10.1.2.3')).toBe(
      'eu-isp',
    );
  });
});

describe('locality through origo', () => {
  const KEYS = { near1: `${KEY9}-n1`, near2: `${KEY9}-n2`, far1: `${KEY9}-f1`, far2: `${KEY9}-f2` };

  async function register(port: number, proxyId: string, extra: Record<string, unknown>, secret?: string) {
    const peer = await TestPeer.open(port, '/v1/proxy', `proxy ${proxyId}`);
    peer.send({ ...registerMessage({ proxyId, name: proxyId, secret }), ...extra });
    await within(peer.next('registered'), `${proxyId} registered`);
    return peer;
  }

  test('a client is offered the proxies of the region whose prefix holds its address', async () => {
    const { port } = await startOrigo({ proxySecret: undefined, proxyKeysFile: keysFile(KEYS) });
    // The far region has more capacity: only locality keeps it out.
    const far = { region: 'far', prefixes: ['192.0.2.0/24'], capacityBps: 50_000_000 };
    await register(port, 'near1', { region: 'near', prefixes: ['127.0.0.0/8'] }, KEYS.near1);
    await register(port, 'near2', { region: 'near' }, KEYS.near2);
    await register(port, 'far1', far, KEYS.far1);
    await register(port, 'far2', far, KEYS.far2);
    const client = await connectClient(port);
    for (let i = 0; i < 10; i++) expect((await requestProxies(client, 2)).sort()).toEqual(['near1', 'near2']);
    // Asking for more than the region holds: all of it, then the others.
    expect((await requestProxies(client, 3)).filter((id) => id.startsWith('near')).sort()).toEqual(['near1', 'near2']);
  });

  test('prefixes from a proxy of the shared dev secret are ignored (its region is kept), with a warning', async () => {
    const { port, logs } = await startOrigo();
    await register(port, 'near1', { region: 'near', prefixes: ['127.0.0.0/8'] });
    await register(port, 'far1', { region: 'far', capacityBps: 50_000_000 });
    const client = await connectClient(port);
    expect(await requestProxies(client, 1)).toEqual(['far1']);
    expect(logs.some((l) => String(l.msg).startsWith('region prefixes ignored'))).toBe(true);
  });

  test('a malformed region or prefix is refused like any invalid frame', async () => {
    const { port } = await startOrigo();
    const peer = await TestPeer.open(port, '/v1/proxy', 'proxy bad');
    peer.send({ ...registerMessage({ name: 'bad' }), region: 'near', prefixes: ['10.0.0.0/33'] });
    const error = await within(peer.next('error'), 'the error');
    expect(error).toMatchObject({ type: 'error' });
  });
});
