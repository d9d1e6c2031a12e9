/**
 * `npx tsx proxy/bench/shield-stream-lag.ts [--runs 20]`: how much later than its shield parent a
 * child holds a verified cold object, with the parent streaming its fetch under way to the child
 * (A) and without (B), alternating run by run. One process on loopback: a paced local origin
 * (2 MiB in 16 writes 10 ms apart, strong ETag), a parent cache behind the real shield endpoint,
 * a child cache whose misses go through the real shield fetch (samples from the origin). The
 * figure is the median of (child's copy verified − parent's own fetch done); on loopback the
 * copy streaming overlaps is short, so expect a few to tens of ms, and noise on a busy machine.
 */
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { fetchOrigin, type OriginPolicy } from '@mutp/origin-fetch';
import { ProxyMetrics } from '../src/metrics';
import { ObjectCache } from '../src/object-cache';
import { ObjectSource } from '../src/object-source';
import type { ObjectFetcher } from '../src/origin-fetches';
import { ShieldEndpoint } from '../src/shield-endpoint';
import { shieldFetcher } from '../src/shield-fetch';

const SIZE = 2 << 20;
const WRITES = 16;
const WRITE_GAP_MS = 10;
const KEY = 'k'.repeat(40);
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 20;
const policy: OriginPolicy = { allowedOrigins: '*', allowPrivateOrigins: true };
const logger = pino({ level: 'silent' });
const body = Buffer.alloc(SIZE, 7);

/** Ranges (the child's probe and samples) at once; the whole body paced. */
function pacedOrigin(req: IncomingMessage, res: ServerResponse): void {
  const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  const [first, last] = m ? [Number(m[1]), Math.min(Number(m[2]), SIZE - 1)] : [0, SIZE - 1];
  const part = body.subarray(first, last + 1);
  res.writeHead(m ? 206 : 200, {
    etag: '"v1"',
    'content-length': part.length,
    'cache-control': 'max-age=60',
    ...(m ? { 'content-range': `bytes ${first}-${last}/${SIZE}` } : {}),
  });
  if (m) return void res.end(part);
  const step = part.length / WRITES;
  let i = 0;
  const next = () => {
    res.write(part.subarray(i * step, (i + 1) * step));
    if (++i < WRITES) setTimeout(next, WRITE_GAP_MS);
    else res.end();
  };
  next();
}

const originFetch: ObjectFetcher = (url, control) =>
  fetchOrigin(url, {
    ...policy,
    maxBytes: 64 << 20,
    headersTimeoutMs: 5000,
    totalTimeoutMs: 10_000,
    signal: control.signal,
    reserve: control.reserve,
    onBody: control.onBody,
    range: control.range,
  });

/** One cold object: ms from the parent's own fetch done to the child's verified copy. */
async function lagMs(originUrl: string, streaming: boolean, run: number): Promise<number> {
  const parent = new ObjectSource(policy, new ObjectCache({ maxBytes: 64 << 20, fetch: originFetch }));
  if (streaming) parent.streamFetches();
  const endpoint = new ShieldEndpoint({
    key: KEY,
    self: 'parent',
    objects: parent,
    logger,
    metrics: new ProxyMetrics(),
    maxConcurrent: 8,
    maxPerChild: 8,
    bytesPerChildPerMinute: 1 << 30,
  });
  const server = endpoint.server();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const cache = new ObjectCache({ maxBytes: 64 << 20, fetch: originFetch });
    cache.shieldWith((origin) =>
      shieldFetcher(origin, {
        parentUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        key: KEY,
        child: 'child',
        maxBytes: 64 << 20,
        timeoutMs: 10_000,
        sampleFraction: 0.02,
        samples: 2,
        metrics: new ProxyMetrics(),
        logger,
      }),
    );
    const child = new ObjectSource(policy, cache);
    const url = `${originUrl}/object-${run}`;
    let parentDone = 0;
    const parentOwn = parent.get(url).then(() => (parentDone = performance.now()));
    const copy = await child.get(url);
    const childDone = performance.now();
    await parentOwn;
    if (!Buffer.from(copy.bytes).equals(body) || cache.stats().parentBytes !== SIZE)
      throw new Error(`run ${run}: the child's copy did not come verified from the parent`);
    return childDone - parentDone;
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

async function main(): Promise<void> {
  const origin = createServer(pacedOrigin);
  await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
  const originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const lags: Record<'streaming' | 'whole', number[]> = { streaming: [], whole: [] };
  for (let run = 0; run < RUNS; run++) {
    const streaming = run % 2 === 0;
    lags[streaming ? 'streaming' : 'whole'].push(await lagMs(originUrl, streaming, run));
  }
  origin.close();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const row = {
    objectBytes: SIZE,
    runsEach: RUNS / 2,
    medianLagMsStreaming: Math.round(median(lags.streaming) * 10) / 10,
    medianLagMsWhole: Math.round(median(lags.whole) * 10) / 10,
  };
  console.log(JSON.stringify(row));
}

void main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
