/**
 * Two origo instances on a real redis-server, four real proxies and the Node client, each given
 * both instances, as processes on loopback. Downloads work whichever instance a client and each
 * proxy landed on (cross-instance signalling); one instance SIGKILLed mid-session: the next
 * download goes through the links the client has, without origo (issue 34); every proxy is
 * registered again, the other instance offers all four, a new download is verified, and the time
 * that took is reported (the figure; the wait itself is bounded, not asserted).
 */
import { createHash } from 'node:crypto';
import { GetResult, MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { waitFor } from '@mutp/testing/wait';
import { Cluster, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';

jest.setTimeout(120_000);

const PROXIES = ['p0', 'p1', 'p2', 'p3'];
let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
let origin: Origin;
let redis: RedisServer;
let cluster: Cluster;

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startOrigin();
  redis = await startRedis();
  cluster = await startCluster({
    proxies: PROXIES.map((name) => ({ name, uploadKBps: 0, extraArgs: ['--origin-timeout-ms', '2000'] })),
    allowPrivateOrigins: true,
    origoInstances: { count: 2, redisUrl: redis.url },
  });
});

afterAll(async () => {
  await cluster?.stop();
  await redis?.stop();
  await origin?.close();
  releaseNodeRtc();
});

function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Until instance `i` lists every proxy, each held by a live instance; returns who holds which. */
async function allRegistered(i: number, live: string[], what: string): Promise<Record<string, string>> {
  return waitFor(
    what,
    async () => {
      const listed = await cluster.listProxies(i);
      const holders = Object.fromEntries(listed.map((p) => [p.proxyId, p.instanceId]));
      const ok = PROXIES.every((id) => live.includes(holders[id]));
      return ok ? holders : undefined;
    },
    30_000,
    100,
    () => cluster.proxies.map((p) => `${p.name}: ${p.log.slice(-5).join('\n')}`).join('\n'),
  );
}

async function download(client: MutpClient, bytes: number, seed: number): Promise<GetResult> {
  const url = `${origin.url}/object/${bytes}/${seed}`;
  const result = (await client.get(url, { mode: 'rlnc', proxies: 4 })) as GetResult;
  expect(sha(result.object)).toBe(sha(syntheticObject(bytes, seed)));
  return result;
}

test('downloads cross instances, and survive one instance killed', async () => {
  // Proxies start at a random instance each; both instances see all four.
  await allRegistered(0, ['o0', 'o1'], 'instance o0 to list all four proxies');
  await allRegistered(1, ['o0', 'o1'], 'instance o1 to list all four proxies');

  // One client per instance: each reaches all four proxies, wherever they registered.
  for (const url of cluster.clientUrls) {
    const client = new MutpClient(createNodeHost(), { origoUrl: url, codecs });
    try {
      const result = await download(client, 1_000_000, 1);
      expect(result.sources.length).toBe(4);
    } finally {
      client.close();
    }
  }

  // A client given both instances, starting at o0 (the one about to die), proxies over both.
  const host = createNodeHost();
  let first = true;
  // The client's first draw picks where it starts in its list of instances.
  const random = () => (first ? ((first = false), 0) : host.random());
  // The client's connection events, printed when a download after the kill has fewer sources.
  const events: string[] = [];
  const trace = (line: string) => events.push(`${new Date().toISOString().slice(11, 23)} ${line}`);
  const client = new MutpClient({ ...host, random }, { origoUrls: cluster.clientUrls, codecs, trace });
  try {
    await download(client, 500_000, 2);
    expect(client.origoUrl).toBe(cluster.clientUrls[0]);
    const killedAt = Date.now();
    cluster.killOrigo(0);
    // Its links are up: no origo needed for the next download (issue 34).
    const during = await download(client, 500_000, 4);
    expect(during.sources.length).toBeGreaterThanOrEqual(3);
    const holders = await allRegistered(1, ['o1'], 'every proxy registered on o1 after o0 died');
    const reregisteredMs = Date.now() - killedAt;
    // New offers come from the live instance.
    expect((await client.chooseProxies(4, 'rlnc')).length).toBe(4);
    const result = await download(client, 1_000_000, 3);
    const downloadedMs = Date.now() - killedAt;
    expect(Object.values(holders).every((h) => h === 'o1')).toBe(true);
    // Every proxy is offered again through o1. A link that fails to open (a loopback WebRTC
    // handshake under CI load) leaves that proxy out of this client's downloads for a minute, and
    // the download goes on with the others by design: twice in ~20 CI runs this one had 3 sources
    // (cause not found: the trace below names it when it happens again). Failover is what is
    // tested here, so at least 3 of 4.
    if (result.sources.length < 4) console.log(`3 of 4 sources after the kill:\n${events.slice(-40).join('\n')}`);
    expect(result.sources.length).toBeGreaterThanOrEqual(3);
    expect(client.origoUrl).toBe(cluster.clientUrls[1]);
    console.log(
      `origo o0 killed: every proxy re-registered on o1 after ${reregisteredMs} ms, ` +
        `a new 1 MB download verified after ${downloadedMs} ms`,
    );
  } finally {
    client.close();
  }
});
