/**
 * FETCHING through the proxy's real parts (issue 31, races): three TransferHosts over real
 * node-datachannel loopback connections, each with its own cache and the proxy's assertion key,
 * objects fetched through the SSRF guard from a local origin. Two "rogue" proxies get their bytes
 * at once from another path (what answering from memory looks like to the client); the honest
 * one's origin takes 2 s. The client's Receiver holds every proxy's published key.
 */
import { Admission, ALL_CAPABILITIES, Codec, decodeAssertionKey, seededRandom } from '@mutp/shared/internal';
import { createNodeRtcFactory, releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { fetchOrigin } from '@mutp/origin-fetch';
import { AssertionKey } from '../src/assertion-key';
import { ProxyMetrics } from '../src/metrics';
import { ObjectCache } from '../src/object-cache';
import { ObjectSource } from '../src/object-source';
import { RateMeter } from '../src/rate-meter';
import { TokenBucket } from '../src/token-bucket';
import { TransferHost, TransferServices } from '../src/transfer-host';
import {
  ClientSource,
  connectedLoopbackPair,
  download,
  LoopbackPair,
  makeObject,
  silentLogger,
  startServer,
  TestServer,
  within,
} from './helpers';

const GENUINE = makeObject(3_000, 7);
const FAKE = makeObject(3_000, 8);
const HONEST_FETCH_MS = 2_000;
let rlnc: Codec;
let origin: TestServer;
const factory = createNodeRtcFactory({ bindAddress: '127.0.0.1' });

beforeAll(async () => {
  rlnc = (await loadNodeCodecs()).rlnc;
  origin = await startServer((req, res) => {
    const send = (body: Uint8Array) =>
      res.writeHead(200, { 'content-type': 'video/mp2t', 'content-length': body.length }).end(body);
    if (req.url === '/fake.ts') send(FAKE);
    else if (req.url === '/seg.ts') setTimeout(() => send(GENUINE), HONEST_FETCH_MS);
    else res.writeHead(404).end();
  });
});

afterAll(async () => {
  await origin.close();
  releaseNodeRtc();
});

/** One proxy's services; a rogue's cache fetches /fake.ts whatever it is asked for. */
function services(id: string, key: AssertionKey, rogue: boolean, seed: number): TransferServices {
  const policy = {
    allowedOrigins: '*' as const,
    allowPrivateOrigins: false,
    allowedClasses: new Set(['loopback' as const]),
  };
  const cache = new ObjectCache({
    maxBytes: 16 << 20,
    fetch: (url, control) =>
      fetchOrigin(rogue ? url.replace('/seg.ts', '/fake.ts') : url, {
        ...policy,
        maxBytes: 1 << 20,
        headersTimeoutMs: 5000,
        totalTimeoutMs: 5000,
        signal: control.signal,
        reserve: control.reserve,
      }),
  });
  return {
    codecs: { rlnc },
    objects: new ObjectSource(policy, cache),
    bucket: new TokenBucket(0, undefined, performance.now()),
    admission: new Admission({ maxTransfers: 8, maxPerClient: 8, memoryBytes: 64 << 20 }),
    metrics: new ProxyMetrics(),
    meter: new RateMeter(),
    logger: silentLogger(),
    seed: seededRandom(seed),
    signer: key.signer(() => id),
  };
}

test('two agreeing rogues and an honest proxy whose origin takes 2 s: a conflict, never the rogues’ object', async () => {
  const ids = ['edge-0', 'edge-1', 'edge-2'];
  const keys = ids.map(() => new AssertionKey());
  const hosts = ids.map((id, i) => new TransferHost(`client-${i}`, services(id, keys[i], i < 2, 50 + i)));
  const pairs: LoopbackPair[] = [];
  try {
    for (const host of hosts) pairs.push(await connectedLoopbackPair(factory, (channel) => host.attach(channel)));
    const sources: ClientSource[] = pairs.map((p) => ({ data: p.data, feedback: p.feedback }));
    const startedAt = performance.now();
    const rx = await within(
      download(sources, {
        url: `${origin.url}/seg.ts`,
        mode: 'rlnc',
        codec: rlnc,
        generationSize: 8,
        symbolSize: 1024,
        receiver: {
          signers: ids.map((proxyId, i) => ({ proxyId, publicKey: decodeAssertionKey(keys[i].publicKey)! })),
          sourceCapabilities: ids.map(() => ALL_CAPABILITIES),
        },
      }),
      15_000,
      'the download to end',
    );
    const tookMs = performance.now() - startedAt;
    // The honest proxy said it was fetching, signed, over its real data channel (a rogue's own
    // fetch of a few ms may have been asked about too).
    expect(hosts[2].stats().fetchingSent).toBeGreaterThan(0);
    expect(rx.stats().sources[2].invalid).toBe(0);
    expect(rx.status).toBe('failed');
    expect(rx.error?.code).toBe('metadata-conflict');
    // Decided by the honest META after its 2 s fetch; before FETCHING the rogues' object was taken at ~1 s.
    expect(tookMs).toBeGreaterThanOrEqual(HONEST_FETCH_MS);
    expect(
      rx
        .conflictEvidence()
        .map((e) => e.source)
        .sort(),
    ).toEqual([0, 1, 2]);
  } finally {
    for (const h of hosts) h.close();
    for (const p of pairs) p.close();
  }
});
