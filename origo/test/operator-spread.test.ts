/**
 * Offers spread over operators (issue 31, independence; selection.ts rule 7, operator-spread.ts):
 * of N proxies offered, no operator holds more than ceil(N/2) while another operator's proxy is
 * eligible; when none is, the operator's proxies are offered and the offer says so. Operators are
 * named by origo's keys file (proxy-auth.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seededRandom } from '@mutp/shared';
import { loadProxyKeys, operatorOf } from '../src/proxy-auth';
import { ProxyLoad, selectProxies, SelectionRequest } from '../src/selection';
import { SelectionIndex } from '../src/selection-index';
import { operatorsConcentrated } from '../src/operator-spread';
import { closeAll, connectClient, KEY9, registerMessage, startOrigo, TestPeer, track, within } from './helpers';

afterEach(closeAll);

function proxy(proxyId: string, operator: string | undefined, capacityBps: number, full = false): ProxyLoad {
  return {
    proxyId,
    modes: new Set(['uncoded', 'rlnc', 'fountain']),
    capacityBps,
    uploadBps: 0,
    activeTransfers: full ? 10 : 0,
    maxTransfers: 10,
    ...(operator !== undefined ? { operator } : {}),
  };
}

/** Six proxies: operator X's four far ahead of the rest by claimed capacity, then Y's and Z's. */
function fleet(othersFull = false): ProxyLoad[] {
  return [
    proxy('x1', 'X', 90_000_000),
    proxy('x2', 'X', 90_000_000),
    proxy('x3', 'X', 90_000_000),
    proxy('x4', 'X', 90_000_000),
    proxy('y1', 'Y', 1_000_000, othersFull),
    proxy('z1', 'Z', 1_000_000, othersFull),
  ];
}

const ofX = (chosen: ProxyLoad[]) => chosen.filter((p) => p.operator === 'X').length;

/** The reference (selection.ts) and what origo runs (selection-index.ts), on the same fleet. */
const selectors: [string, (proxies: ProxyLoad[]) => (request: SelectionRequest, seed: number) => ProxyLoad[]][] = [
  ['selectProxies', (proxies) => (request, seed) => selectProxies(proxies, request, seededRandom(seed))],
  [
    'SelectionIndex',
    (proxies) => {
      const index = new SelectionIndex<ProxyLoad>();
      for (const p of proxies) index.upsert(p);
      return (request, seed) => index.select(request, seededRandom(seed));
    },
  ],
];

describe.each(selectors)('%s', (_, make) => {
  test('an offer of 4 from a fleet whose first 4 are one operator’s holds at most 2 of them', () => {
    const select = make(fleet());
    for (let seed = 1; seed <= 200; seed++) {
      const chosen = select({ count: 4 }, seed);
      expect(chosen).toHaveLength(4);
      expect(new Set(chosen).size).toBe(4);
      expect(ofX(chosen)).toBeLessThanOrEqual(2);
      // The rest of the offer still ranks by load: X's proxies take the places they may hold.
      expect(ofX(chosen)).toBe(2);
      expect(operatorsConcentrated(chosen)).toBe(false);
    }
  });

  test('only one operator’s proxies eligible: they are offered (availability), and flagged', () => {
    const select = make(fleet(true));
    for (let seed = 1; seed <= 50; seed++) {
      const chosen = select({ count: 4 }, seed);
      expect(ofX(chosen)).toBe(4);
      expect(operatorsConcentrated(chosen)).toBe(true);
    }
  });

  test('proxies of no named operator are each their own: offers as before', () => {
    const unnamed = fleet().map(({ operator: _operator, ...p }) => p);
    const select = make(unnamed);
    for (let seed = 1; seed <= 50; seed++) {
      const chosen = select({ count: 4 }, seed);
      expect(operatorsConcentrated(chosen)).toBe(false);
      // Without the spread, the ranked places are X's: the spread does not touch them.
      expect(chosen.slice(0, 3).every((p) => p.proxyId.startsWith('x'))).toBe(true);
    }
  });

  test('an operator holding most of a long ranking is still spread (rounds, then its proxies listed)', () => {
    const many = [
      ...Array.from({ length: 40 }, (_, i) => proxy(`x${i}`, 'X', 90_000_000)),
      proxy('y1', 'Y', 1_000_000),
      proxy('z1', 'Z', 1_000_000),
    ];
    const select = make(many);
    for (let seed = 1; seed <= 50; seed++) {
      const chosen = select({ count: 4 }, seed);
      expect(chosen).toHaveLength(4);
      expect(ofX(chosen)).toBe(2);
    }
  });
});

describe('the keys file names operators', () => {
  function file(content: unknown): string {
    const dir = mkdtempSync(join(tmpdir(), 'origo-operators-'));
    track({ close: async () => rmSync(dir, { recursive: true, force: true }) });
    const path = join(dir, 'proxy-keys.json');
    writeFileSync(path, JSON.stringify(content));
    return path;
  }

  test('the object form names one; the plain form is its own operator', () => {
    const keys = loadProxyKeys(file({ a: `${KEY9}-a`, b: { key: `${KEY9}-b`, operator: 'acme.net' } }));
    expect(keys.get('b')).toBe(`${KEY9}-b`);
    expect(operatorOf(keys, 'a')).toBe('a');
    expect(operatorOf(keys, 'b')).toBe('acme.net');
  });

  test.each([
    ['a bad operator name', { b: { key: `${KEY9}-b`, operator: 'a b' } }, /bad operator of b/],
    ['an operator that is no string', { b: { key: `${KEY9}-b`, operator: 7 } }, /bad operator of b/],
    ['an unknown field', { b: { key: `${KEY9}-b`, owner: 'x' } }, /unknown fields owner/],
    ['an object without a key', { b: { operator: 'x' } }, /the key of b/],
  ])('%s is refused', (_, content, error) => {
    expect(() => loadProxyKeys(file(content))).toThrow(error);
  });
});

describe('origo offers operators', () => {
  const KEYS = {
    x1: { key: `${KEY9}-x1`, operator: 'X' },
    x2: { key: `${KEY9}-x2`, operator: 'X' },
    x3: { key: `${KEY9}-x3`, operator: 'X' },
    y1: `${KEY9}-y1`,
  };

  async function register(port: number, proxyId: string, secret: string, capacityBps: number): Promise<void> {
    const peer = await TestPeer.open(port, '/v1/proxy', `proxy ${proxyId}`);
    peer.send({ ...registerMessage({ proxyId, name: proxyId, secret }), capacityBps });
    await within(peer.next('registered'), `${proxyId} registered`);
  }

  async function offer(client: TestPeer, count: number) {
    client.send({ type: 'request-proxies', requestId: `r${count}`, count });
    return within(
      client.next('proxies', (m) => m.requestId === `r${count}`),
      'the offer',
    );
  }

  test('each offered proxy carries its operator; an offer only one operator can fill is flagged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'origo-operators-'));
    track({ close: async () => rmSync(dir, { recursive: true, force: true }) });
    const proxyKeysFile = join(dir, 'proxy-keys.json');
    writeFileSync(proxyKeysFile, JSON.stringify(KEYS), { mode: 0o600 });
    const { port } = await startOrigo({ proxySecret: undefined, proxyKeysFile, random: seededRandom(3) });
    for (const id of ['x1', 'x2', 'x3']) await register(port, id, KEYS[id as 'x1'].key, 90_000_000);
    const client = await connectClient(port, 'viewer');
    const onlyX = await offer(client, 2);
    expect((onlyX.proxies as { operator?: string }[]).map((p) => p.operator)).toEqual(['X', 'X']);
    expect(onlyX.operatorsConcentrated).toBe(true);
    await register(port, 'y1', KEYS.y1, 1_000_000);
    const spread = await offer(client, 3);
    // y1 is its own operator: the offer leaves that unsaid (clients read a missing one as the id).
    const operators = (spread.proxies as { proxyId: string; operator?: string }[]).map((p) => p.operator ?? p.proxyId);
    expect(operators.sort()).toEqual(['X', 'X', 'y1']);
    expect(
      (spread.proxies as { proxyId: string; operator?: string }[]).find((p) => p.proxyId === 'y1')?.operator,
    ).toBeUndefined();
    expect(spread.operatorsConcentrated).toBeUndefined();
  });
});
