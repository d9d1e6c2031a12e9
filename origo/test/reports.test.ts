/**
 * Pollution reports (issue 9, finding 5; issue 31, attack 3): a report is the client's own proof,
 * which origo cannot check, so no number of them stops offers of a proxy; clients of enough
 * distinct networks (IPv4 /24) flag it to the operator, one network never does, however often
 * and from however many of its addresses. Real origo, real sockets; the networks are loopback
 * /24s (127.0.N.x).
 */
import { ProxyReports } from '../src/reports';
import { closeAll, connectClient, connectProxy, startOrigo } from './helpers';

afterEach(closeAll);

async function offered(port: number, from: string, requestId: string): Promise<string[]> {
  const client = await connectClient(port, `client@${from}`, from);
  client.send({ type: 'request-proxies', requestId, count: 8 });
  const m = await client.next('proxies');
  await client.close();
  return (m.proxies as { proxyId: string }[]).map((p) => p.proxyId).sort();
}

/** A client at `from` that was offered the proxies, then reports `proxyId` (and stays connected). */
async function reportFrom(port: number, from: string, proxyId: string, requestId: string) {
  const client = await connectClient(port, `reporter@${from}`, from);
  client.send({ type: 'request-proxies', requestId, count: 8 });
  await client.next('proxies');
  client.send({ type: 'report', proxyId, kind: 'data' });
  return client;
}

describe('pollution reports', () => {
  test('reports never stop offers; 3 reporting networks flag a proxy to the operator, one network never does', async () => {
    const { port, logs } = await startOrigo();
    const rogue = await connectProxy(port, { proxyId: 'rogue', name: 'rogue' });
    const honest = await connectProxy(port, { proxyId: 'honest', name: 'honest' });
    expect(await offered(port, '127.0.9.9', 'r0')).toEqual(['honest', 'rogue']);

    // One network (16 clients on 3 of its addresses) reports the honest proxy again and again.
    for (let i = 0; i < 16; i++) await reportFrom(port, `127.0.2.${1 + (i % 3)}`, honest.id, `h${i}`);
    // Clients of three distinct networks report the rogue one.
    for (const [i, from] of ['127.0.3.1', '127.0.4.1', '127.0.5.1'].entries())
      await reportFrom(port, from, rogue.id, `p${i}`);

    const waitForLog = async (match: (l: (typeof logs)[number]) => boolean) => {
      for (let i = 0; i < 100 && !logs.some(match); i++) await new Promise((r) => setTimeout(r, 20));
      if (!logs.some(match)) throw new Error('origo did not log the expected report outcome');
    };
    await waitForLog((l) => l.msg === 'pollution report' && l.outcome === 'flagged' && l.proxyId === 'rogue');
    expect(logs.some((l) => l.level === 40 && l.proxyId === 'rogue' && /check it/.test(String(l.msg)))).toBe(true);
    // Both are still offered: a count of reports is no proof (the reporters avoid them themselves).
    expect(await offered(port, '127.0.9.9', 'r1')).toEqual(['honest', 'rogue']);
    const honestOutcomes = logs
      .filter((l) => l.msg === 'pollution report' && l.proxyId === 'honest')
      .map((l) => l.outcome);
    expect(honestOutcomes).toEqual(['counted', ...new Array<string>(15).fill('duplicate')]);
  });

  test('a client cannot report a proxy it was never offered', async () => {
    const { port, logs } = await startOrigo();
    await connectProxy(port, { proxyId: 'edge', name: 'edge' });
    const client = await connectClient(port, 'client', '127.0.6.1');
    client.send({ type: 'report', proxyId: 'edge', kind: 'meta' });
    for (let i = 0; i < 100 && !logs.some((l) => l.msg === 'pollution report'); i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(logs.find((l) => l.msg === 'pollution report')?.outcome).toBe('not-offered');
  });
});

describe('ProxyReports', () => {
  const policy = { threshold: 2, windowMs: 1000, maxOfferedPerClient: 2 };

  test('reports older than the window do not add up; a flag needs as many new reporters again', () => {
    const r = new ProxyReports(policy);
    for (const c of ['c1', 'c2', 'c3', 'c4', 'c5']) r.noteOffered(c, ['p']);
    expect(r.report('c1', '10.0.0.1', 'p', 0)).toBe('counted');
    expect(r.report('c2', '10.0.0.2', 'p', 1500)).toBe('counted'); // the first one expired
    expect(r.report('c3', '10.0.0.3', 'p', 1600)).toBe('flagged');
    expect(r.report('c4', '10.0.0.3', 'p', 1700)).toBe('counted');
    expect(r.report('c5', '10.0.0.4', 'p', 1800)).toBe('flagged');
  });

  test('offered ids per client are bounded (oldest forgotten) and dropped with the client', () => {
    const r = new ProxyReports(policy);
    r.noteOffered('c', ['a', 'b', 'c']);
    expect(r.report('c', '10.0.0.1', 'a', 0)).toBe('not-offered');
    expect(r.report('c', '10.0.0.1', 'c', 0)).toBe('counted');
    r.forgetClient('c');
    expect(r.report('c', '10.0.0.1', 'b', 0)).toBe('not-offered');
  });
});
