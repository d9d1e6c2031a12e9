/**
 * The whole system over real processes and sockets: a local origin, origo and proxies as child
 * processes, the Node client orchestration over node-datachannel on loopback. No mocks of our
 * own parts. Waits are bounded and say what they waited for.
 */
import { createHash } from 'node:crypto';
import WebSocket from 'ws';
import { Mode } from '@mutp/shared';
import { ClientError, downloadSeries, GetResult, MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { Cluster, spawnService, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';
import { monitoring } from '../src/proxy-metrics';

jest.setTimeout(120_000);

const MODES: Mode[] = ['uncoded', 'rlnc', 'fountain'];
let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
let origin: Origin;

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startOrigin();
});

afterAll(async () => {
  await origin.close();
  releaseNodeRtc();
});

function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function newClient(cluster: Cluster): MutpClient {
  return new MutpClient(createNodeHost(), { origoUrl: cluster.clientUrl, codecs });
}

async function expectClientError(p: Promise<unknown>, code: ClientError['code'], message: RegExp): Promise<void> {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof ClientError)) throw new Error(`expected a ClientError ${code}, got ${String(error)}`);
  expect(error.code).toBe(code);
  expect(error.message).toMatch(message);
}

describe('four unshaped proxies', () => {
  let cluster: Cluster;
  let client: MutpClient;

  beforeAll(async () => {
    cluster = await startCluster({
      proxies: [0, 1, 2, 3].map((i) => ({ name: `p${i}`, uploadKBps: 0, extraArgs: ['--origin-timeout-ms', '2000'] })),
      allowPrivateOrigins: true,
    });
    client = newClient(cluster);
  });

  afterAll(async () => {
    client?.close();
    await cluster?.stop();
  });

  const cases = MODES.flatMap((mode) => [1, 2, 3, 4].map((n) => [mode, n] as const));
  test.each(cases)('%s with %d proxies returns the object byte-exact', async (mode, n) => {
    const bytes = 200_000 + n * 7919;
    const url = `${origin.url}/object/${bytes}/${n}`;
    const result = (await client.get(url, { mode, proxies: n })) as GetResult;
    expect(result.object.length).toBe(bytes);
    expect(sha(result.object)).toBe(sha(syntheticObject(bytes, n)));
    expect(result.sources.length).toBe(n);
  });

  test('http (Parallel HTTP baseline) returns the object byte-exact and origo stores its record', async () => {
    const bytes = 1_500_000;
    const url = `${origin.url}/object/${bytes}/9`;
    const result = await client.get(url, { mode: 'http', proxies: 3 });
    expect(sha(result.object)).toBe(sha(syntheticObject(bytes, 9)));
    const until = Date.now() + 10_000;
    for (;;) {
      const response = await fetch(`${cluster.origoUrl}/v1/records?mode=http`, {
        headers: { authorization: `Bearer ${cluster.adminToken}` },
      });
      const { records } = (await response.json()) as { records: { url: string; bytes: number }[] };
      if (records.some((r) => r.url === url && r.bytes === bytes)) break;
      if (Date.now() > until) throw new Error(`origo stored no http record for ${url} within 10 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  });

  test.each([
    ['404', '/status/404', /origin not found \(1\): origin answered 404/],
    ['500', '/status/500', /origin error \(2\)/],
    ['timeout', '/hang', /origin error \(2\)/],
    ['oversize', '/big/100000000', /object too large \(3\)/],
  ])('origin %s gives a clear error and the proxies keep serving', async (_name, path, message) => {
    await expectClientError(
      client.get(`${origin.url}${path}`, { mode: 'rlnc', proxies: 2 }),
      'download-failed',
      message,
    );
    const after = await client.get(`${origin.url}/object/50000/3`, { mode: 'rlnc', proxies: 2 });
    expect(sha(after.object)).toBe(sha(syntheticObject(50_000, 3)));
  });

  test('staging: hinted proxies fetch the object before the download, which then costs the origin nothing', async () => {
    const bytes = 700_000;
    const path = `/object/${bytes}/21`;
    const url = `${origin.url}${path}`;
    const chosen = await client.chooseProxies(2, 'rlnc');
    expect(chosen).toHaveLength(2);

    const answers = await client.stage(url, chosen, { timeoutMs: 20_000 });
    expect(answers.map((a) => [a.proxyId, a.status, a.cached, a.bytes]).sort()).toEqual(
      chosen.map((p) => [p.proxyId, 'staged', false, bytes]).sort(),
    );
    for (const a of answers) expect(a.originMs).toBeGreaterThan(0);
    expect(origin.requests.get(path)).toBe(2);

    const result = await client.get(url, { mode: 'rlnc', proxies: 2, use: chosen });
    expect(sha(result.object)).toBe(sha(syntheticObject(bytes, 21)));
    expect(result.sources.map((s) => s.proxyId).sort()).toEqual(chosen.map((p) => p.proxyId).sort());
    expect(origin.requests.get(path)).toBe(2);

    // Staged again: already in the caches, no origin fetch.
    const again = await client.stage(url, chosen, { timeoutMs: 20_000 });
    expect(again.map((a) => [a.status, a.cached, a.originMs])).toEqual([
      ['staged', true, 0],
      ['staged', true, 0],
    ]);
    // A hint for a missing object says why; the download path is untouched.
    const missing = await client.stage(`${origin.url}/status/404`, chosen.slice(0, 1), { timeoutMs: 20_000 });
    expect(missing).toEqual([expect.objectContaining({ status: 'failed', error: 'not-found' })]);
    expect(origin.requests.get(path)).toBe(2);

    // With the mode, the hint carries the client's layout: each proxy prepares the encoder too.
    const fountainSet = await client.chooseProxies(2, 'fountain');
    const fountainUrl = `${origin.url}/object/${bytes}/22`;
    const staged = await client.stage(fountainUrl, fountainSet, { timeoutMs: 20_000, mode: 'fountain' });
    expect(staged.map((a) => [a.status, a.prepared])).toEqual([
      ['staged', true],
      ['staged', true],
    ]);
    const listed = await cluster.listProxies();
    let prepared = 0;
    for (const p of fountainSet) {
      const httpUrl = (listed.find((x) => x.proxyId === p.proxyId) as { httpUrl?: string } | undefined)?.httpUrl;
      const metrics = await (await fetch(`${httpUrl}/metrics`, monitoring(cluster))).text();
      prepared += Number(/mutp_proxy_stage_prepared_total\{outcome="prepared"\} (\d+)/.exec(metrics)?.[1] ?? 0);
    }
    expect(prepared).toBe(2);
    const fountainResult = await client.get(fountainUrl, { mode: 'fountain', proxies: 2, use: fountainSet });
    expect(sha(fountainResult.object)).toBe(sha(syntheticObject(bytes, 22)));
  });

  test('malformed and oversized signalling is rejected while other clients download', async () => {
    const rogue = new WebSocket(cluster.clientUrl);
    await new Promise((resolve, reject) => {
      rogue.once('open', resolve);
      rogue.once('error', reject);
    });
    rogue.send('{not json');
    rogue.send(
      JSON.stringify({ type: 'signal', proxyId: 'nobody', connectionId: 'x', description: { type: 'offer' } }),
    );
    rogue.send('x'.repeat(200_000));
    const result = await client.get(`${origin.url}/object/120000/4`, { mode: 'fountain', proxies: 4 });
    expect(sha(result.object)).toBe(sha(syntheticObject(120_000, 4)));
    rogue.terminate();
    expect(cluster.origoLog.join('\n')).toMatch(/bad-message|invalid|not JSON/i);
  });
});

describe('faults', () => {
  test('killing one proxy mid-transfer still completes the download from the others', async () => {
    const cluster = await startCluster({
      proxies: [0, 1, 2].map((i) => ({ name: `k${i}`, uploadKBps: 512 })),
      allowPrivateOrigins: true,
    });
    const client = newClient(cluster);
    try {
      const bytes = 1_500_000;
      let killed = false;
      const result = await client.get(`${origin.url}/object/${bytes}/11`, {
        mode: 'rlnc',
        proxies: 3,
        onProgress: ({ dof, totalDof }) => {
          if (!killed && totalDof > 0 && dof > totalDof / 4) {
            killed = true;
            cluster.kill('k0');
          }
        },
      });
      expect(killed).toBe(true);
      expect(sha(result.object)).toBe(sha(syntheticObject(bytes, 11)));
      const victim = cluster.proxies.find((p) => p.name === 'k0')!.process;
      expect(victim.signalCode ?? (await new Promise((r) => victim.once('exit', (_c, sig) => r(sig))))).toBe('SIGKILL');
      const share = (result as { sources: { name: string; share: number }[] }).sources;
      expect(share.find((s) => s.name === 'k0')!.share).toBeLessThan(0.5);
    } finally {
      client.close();
      await cluster.stop();
    }
  });

  test('a proxy drained (SIGTERM) mid-series finishes its segment; the series hands off between segments, staged first', async () => {
    const cluster = await startCluster({
      proxies: [0, 1, 2].map((i) => ({ name: `d${i}`, uploadKBps: 512 })),
      allowPrivateOrigins: true,
    });
    const host = createNodeHost();
    const client = new MutpClient(host, { origoUrl: cluster.clientUrl, codecs });
    try {
      const bytes = 1_500_000;
      const segments = [0, 1, 2, 3, 4].map((i) => ({ url: `${origin.url}/object/${bytes}/${40 + i}` }));
      let drained: string | undefined;
      let lastSources: string[] = [];
      const leavingAfterIt: string[][] = [];
      const result = await downloadSeries(client, host.clock, segments, {
        mode: 'rlnc',
        proxies: 2,
        staging: true,
        spread: 2,
        // Segment 2 is under way from both proxies of the set when one of them is told to drain.
        onProgress: (index, p) => {
          if (index !== 2 || drained !== undefined || p.dof === 0) return;
          drained = lastSources[0];
          cluster.proxies.find((x) => x.name === drained)?.process.kill('SIGTERM');
        },
        onSegment: (outcome, object, index) => {
          expect(sha(object)).toBe(sha(syntheticObject(bytes, 40 + index)));
          lastSources = outcome.sources;
          if (index === 2) leavingAfterIt.push(client.leavingProxies());
        },
      });
      expect(drained).toBeDefined();
      // It served segment 2 to the end (a draining proxy finishes its transfers) and said it was leaving.
      expect(result.segments[2].sources).toContain(drained);
      expect(leavingAfterIt).toEqual([[drained]]);
      // Replaced between segments 2 and 3, the newcomer staged first: no segment failed or lost a source.
      expect(result.handoffs).toBe(1);
      expect(result.staging.goingAwayReplaced).toBe(1);
      for (const later of result.segments.slice(3)) {
        expect(later.sources).not.toContain(drained);
        expect(later.sources).toHaveLength(2);
      }
      expect(result.segments.map((x) => x.retries)).toEqual([0, 0, 0, 0, 0]);
      const victim = cluster.proxies.find((p) => p.name === drained)!.process;
      const code = victim.exitCode ?? (await new Promise((r) => victim.once('exit', (c) => r(c))));
      expect(code).toBe(0);
    } finally {
      client.close();
      await cluster.stop();
    }
  });

  test('resume: a proxy that crashes and comes back mid-download is reconnected to, and the download goes on from where it was', async () => {
    const cluster = await startCluster({
      proxies: [{ name: 'solo', uploadKBps: 1024 }],
      allowPrivateOrigins: true,
    });
    const client = new MutpClient(createNodeHost(), { origoUrl: cluster.clientUrl, codecs, stallTimeoutMs: 30_000 });
    try {
      const bytes = 2_000_000;
      let restarted: Promise<void> | undefined;
      let dofAtRestart = 0;
      let dofAfterRestart = 0;
      let totalDof = 0;
      const result = await client.get(`${origin.url}/object/${bytes}/12`, {
        mode: 'rlnc',
        proxies: 1,
        onProgress: (p) => {
          totalDof = p.totalDof;
          if (restarted === undefined && p.totalDof > 0 && p.dof > p.totalDof / 3) {
            dofAtRestart = p.dof;
            restarted = cluster.restartProxy('solo');
          } else if (restarted !== undefined) {
            dofAfterRestart++;
          }
        },
      });
      await restarted;
      expect(sha(result.object)).toBe(sha(syntheticObject(bytes, 12)));
      // What was decoded before the crash was kept: the proxy's new transfer only filled the rest.
      expect(dofAtRestart).toBeGreaterThan(0);
      expect(dofAfterRestart).toBeLessThan(totalDof);
      expect(result.sources).toHaveLength(1);
    } finally {
      client.close();
      await cluster.stop();
    }
  });

  // Neither test changes the deployment: one proxy started without --allow-private-origins serves both.
  describe('one proxy, started as in production (no private origins)', () => {
    let cluster: Cluster;

    beforeAll(async () => {
      cluster = await startCluster({ proxies: [{ name: 'strict', uploadKBps: 0 }] });
    });

    afterAll(async () => {
      await cluster?.stop();
    });

    test('a proxy refuses to fetch from a loopback origin (SSRF) unless started for tests', async () => {
      const client = newClient(cluster);
      try {
        await expectClientError(
          client.get(`${origin.url}/object/1000/1`, { mode: 'uncoded', proxies: 1 }),
          'download-failed',
          /bad request \(4\)/,
        );
      } finally {
        client.close();
      }
    });

    test("a proxy with a wrong key for a live proxy's id is refused and exits", async () => {
      const child = spawnService(
        'proxy/src/main.ts',
        ['--origo', cluster.clientUrl.replace('/v1/client', '/v1/proxy'), '--name', 'bad'],
        { MUTP_PROXY_ID: 'strict', MUTP_PROXY_SECRET: 'wrong' },
      );
      let output = '';
      child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
      const code = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          resolve(null);
        }, 30_000);
        child.once('exit', (c) => {
          clearTimeout(timer);
          resolve(c);
        });
      });
      if (code === null) throw new Error(`the proxy with a wrong key did not exit within 30 s:\n${output}`);
      expect(code).not.toBe(0);
      expect(output).toMatch(/unauthori[sz]ed/i);
      expect((await cluster.listProxies()).map((p) => p.name)).toEqual(['strict']);
    });
  });

  test('after an origo restart the proxies re-register by themselves and new downloads work', async () => {
    const cluster = await startCluster({
      proxies: [0, 1].map((i) => ({ name: `r${i}`, uploadKBps: 0 })),
      allowPrivateOrigins: true,
    });
    const client = newClient(cluster);
    try {
      await client.get(`${origin.url}/object/40000/5`, { mode: 'rlnc', proxies: 2 });
      await cluster.restartOrigo();
      const until = Date.now() + 30_000;
      while ((await cluster.listProxies()).length < 2) {
        if (Date.now() > until) throw new Error('proxies did not re-register within 30 s after the origo restart');
        await new Promise((r) => setTimeout(r, 200));
      }
      const result = await client.get(`${origin.url}/object/40000/6`, { mode: 'rlnc', proxies: 2 });
      expect(sha(result.object)).toBe(sha(syntheticObject(40_000, 6)));
    } finally {
      client.close();
      await cluster.stop();
    }
  });
});
