/**
 * Origin shielding over real processes: a local origin, origo, a shield parent (p0) with three
 * children (p1-p3), and one more child (liar-child) whose parent is a lying shield endpoint run
 * by this test (it serves the origin's object with bytes changed). A cold object downloaded at
 * N=4 (rlnc) through p0-p3 costs the origin about its size once, arrives byte-exact, and the
 * children count the parent's bytes apart from the origin's; the lying parent is caught (its
 * bytes differ from the Repr-Digest the origin states) and its child serves the origin's bytes.
 */
import { createHash } from 'node:crypto';
import { createServer, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetResult, MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { Cluster, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';
import { adminProxies, monitoring, parsePrometheus, Sample } from '../src/proxy-metrics';

jest.setTimeout(60_000);

const FAMILY = ['p0', 'p1', 'p2', 'p3'];
const LIAR_CHILD = 'liar-child';

let origin: Origin;
let liar: Server;
let cluster: Cluster;
let client: MutpClient;

/**
 * A shield endpoint that lies: it fetches the object from the origin as an honest parent would
 * and states the origin's validator, but changes one byte of every 4096 (and states their hash).
 */
async function startLyingParent(): Promise<string> {
  liar = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://liar.invalid').searchParams.get('url');
    if (!url) return void res.writeHead(400).end();
    void fetch(url).then(async (answer) => {
      const bytes = Buffer.from(await answer.arrayBuffer());
      for (let i = 100; i < bytes.length; i += 4096) bytes[i] ^= 0x01;
      res.writeHead(200, {
        'content-length': bytes.length,
        'x-mutp-sha256': createHash('sha256').update(bytes).digest('hex'),
        'x-mutp-validator': `etag ${answer.headers.get('etag')}`,
      });
      res.end(bytes);
    });
  });
  await new Promise<void>((resolve) => liar.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(liar.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  const codecs = await loadNodeCodecs();
  origin = await startOrigin();
  const liarUrl = await startLyingParent();
  cluster = await startCluster({
    proxies: [
      ...FAMILY.map((name) => ({ name, uploadKBps: 0 })),
      // Its own --shield-parent comes after the cluster's, and wins.
      { name: LIAR_CHILD, uploadKBps: 0, extraArgs: ['--shield-parent', liarUrl] },
    ],
    allowPrivateOrigins: true,
    shield: { parent: 'p0' },
  });
  client = new MutpClient(createNodeHost(), { origoUrl: cluster.clientUrl, codecs });
});

afterAll(async () => {
  client?.close();
  await cluster?.stop();
  await new Promise((resolve) => (liar ? liar.close(resolve) : resolve(undefined)));
  await origin?.close();
  releaseNodeRtc();
});

/** Body bytes the origin sent for `path` (every request: fetches, probes, fallbacks). */
async function originBytes(path: string): Promise<number> {
  const res = await fetch(`${origin.url}/_bytes?path=${encodeURIComponent(path)}`);
  return ((await res.json()) as { bytes: number }).bytes;
}

async function metricsOf(name: string): Promise<Sample[]> {
  const proxy = (await adminProxies(cluster)).find((p) => p.name === name);
  if (!proxy) throw new Error(`${name} is not registered at origo`);
  const res = await fetch(`${proxy.httpUrl.replace(/\/+$/, '')}/metrics`, monitoring(cluster));
  return parsePrometheus(await res.text());
}

const value = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

test('a cold object at N=4 reaches the origin about once; the children count the parent apart', async () => {
  const size = 3_000_000;
  const path = `/object/${size}/34`;
  const use = (await client.chooseProxies(5, 'rlnc')).filter((p) => FAMILY.includes(p.proxyId));
  expect(use.map((p) => p.proxyId).sort()).toEqual(FAMILY);
  const result = (await client.get(`${origin.url}${path}`, { mode: 'rlnc', proxies: 4, use })) as GetResult;
  expect(sha(result.object)).toBe(sha(syntheticObject(size, 34)));
  expect(result.sources).toHaveLength(4);
  // The parent's fetch and the children's one-byte probes (Repr-Digest checks every byte).
  const sent = await originBytes(path);
  expect(sent).toBeGreaterThanOrEqual(size);
  expect(sent).toBeLessThanOrEqual(size * 1.1);
  for (const child of ['p1', 'p2', 'p3']) {
    const m = await metricsOf(child);
    expect([child, value(m, 'mutp_proxy_shield_fetches_total', { outcome: 'verified' })]).toEqual([child, 1]);
    expect([child, value(m, 'mutp_proxy_parent_bytes_total')]).toEqual([child, size]);
    expect([child, value(m, 'mutp_proxy_origin_bytes_total')]).toEqual([child, 0]);
  }
  const parent = await metricsOf('p0');
  expect(value(parent, 'mutp_proxy_origin_bytes_total')).toBe(size);
  expect(value(parent, 'mutp_proxy_shield_bytes_total', { source: 'served-to-children' })).toBe(3 * size);
});

test('a parent that changes bytes is caught: its child serves the origin bytes, byte-exact', async () => {
  const size = 400_000;
  const path = `/object/${size}/35`;
  const use = (await client.chooseProxies(5, 'rlnc')).filter((p) => p.proxyId === LIAR_CHILD);
  expect(use).toHaveLength(1);
  const result = await client.get(`${origin.url}${path}`, { mode: 'rlnc', proxies: 1, use });
  expect(sha(result.object)).toBe(sha(syntheticObject(size, 35)));
  const m = await metricsOf(LIAR_CHILD);
  expect(value(m, 'mutp_proxy_shield_fetches_total', { outcome: 'parent-lied' })).toBe(1);
  expect(value(m, 'mutp_proxy_shield_fetches_total', { outcome: 'verified' })).toBe(0);
  expect(value(m, 'mutp_proxy_origin_bytes_total')).toBe(size);
  expect(value(m, 'mutp_proxy_parent_bytes_total')).toBe(0);
});
