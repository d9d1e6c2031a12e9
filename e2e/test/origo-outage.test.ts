/**
 * Downloads outlive origo (issue 34), with real processes on loopback: origo, four proxies and
 * the Node client playing a segment series through one proxy set (bench-origo-outage.ts's
 * scenario, short). Origo is SIGKILLed while the links are up: no segment fails or falls back to
 * the origin while it is down. It is started again on the same port: the series goes on, and the
 * new set the client asks for at once is offered (origo's start-up grace and the client's waiting
 * for its proxies), never `no-proxies`. Every segment is checked byte-exact.
 */
import { runOutage, withDeployment } from '../src/bench-origo-outage';

jest.setTimeout(90_000);

test('origo killed during a segment series whose links are up: 0 failed, 0 fallbacks; after its restart, 0 no-proxies', async () => {
  const log: string[] = [];
  const result = await withDeployment(4, (cluster, origin) =>
    runOutage(cluster, origin, {
      // Long enough for the set's links to be up before the kill (a few segments), and for the
      // 5 segments checked below while origo is down, during which the client's and the proxies'
      // reconnections to it fail. A longer outage mostly grows the proxies' back-off, which the
      // new set after the restart waits for.
      beforeMs: 1500,
      outageMs: 4000,
      afterMs: 4000,
      periodMs: 400,
      segmentBytes: 128 * 1024,
      proxies: 4,
      // A proxy's next reconnection may come up to ~16 s after the kill here (its back-off),
      // later still when origo is slow to start on a loaded machine: the new set may wait for it.
      origoTimeoutMs: 30_000,
      log: (line) => log.push(`${new Date().toISOString().slice(11, 23)} ${line}`),
    }),
  );
  const context = `\n${log.slice(-30).join('\n')}`;
  const phases = Object.fromEntries(result.rows.map((r) => [r.phase, r]));
  expect(Object.keys(phases).sort()).toEqual(['after', 'before', 'outage']);
  // Several segments while origo was down, each through the open links.
  expect(phases.outage.segments).toBeGreaterThanOrEqual(5);
  for (const r of result.rows) {
    expect({
      phase: r.phase,
      failed: r.failed,
      fallbacks: r.fallbacks,
      noProxies: r.noProxies,
      corrupt: r.corrupt,
      context,
    }).toEqual({
      phase: r.phase,
      failed: 0,
      fallbacks: 0,
      noProxies: 0,
      corrupt: 0,
      context,
    });
  }
  expect({ error: result.restartOffer.error, context }).toEqual({ error: undefined, context });
  expect(result.restartOffer.offered).toBeGreaterThanOrEqual(1);
  console.log(
    `origo outage: ${phases.outage.segments} segments while down (median ${phases.outage.medianSegmentMs} ms, ` +
      `origo up ${phases.before.medianSegmentMs} ms); after the restart a set of ${result.restartOffer.offered} ` +
      `offered in ${result.restartOffer.waitedMs} ms`,
  );
});
