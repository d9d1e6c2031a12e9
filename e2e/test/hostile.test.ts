/**
 * One proxy process under 1,000 hostile clients while honest clients download. Each hostile
 * client opens its own origo session and peer connection to the proxy and then, by turn:
 * - storms REQUEST/STOP pairs (origin fetches it starts and abandons),
 * - asks for a huge object in fountain mode (the codec would need more than the budget),
 * - asks for tiny symbols (16 bytes: refused) and the smallest allowed ones, then goes silent,
 * - connects and does nothing (an idle peer).
 * The proxy's resident memory, sampled from /proc, must stay under --cache-bytes +
 * --transfer-memory + the idle process's own footprint + a fixed allowance (docs/security.md
 * "Memory"), the proxy must stay up, and every honest download must complete byte-exact.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { encodeRequest, encodeStop, Mode, StopReason } from '@mutp/shared/internal';
import {
  ClientError,
  GetResult,
  MutpClient,
  OrigoSession,
  openWebRtcTransport,
  ProxyLink,
  systemClock,
  WebSocketLike,
} from '@mutp/shared/client';
import { createNodeRtcFactory, releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import WebSocket from 'ws';
import { Cluster, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';

jest.setTimeout(300_000);

const MiB = 1 << 20;
const CACHE_BYTES = 16 * MiB;
const TRANSFER_MEMORY = 48 * MiB;
/** What the proxy may hold beyond its idle footprint and the two budgets: V8 heap slack, buffers. */
const FIXED_ALLOWANCE = 128 * MiB;
const HOSTILE_CLIENTS = 1000;
const CONCURRENT_HOSTILE = 24;
/**
 * How long a hostile client's turn lasts after it connected (it then closes). The proxy acts on
 * each behaviour within it (the loopback origin answers in milliseconds); most of the suite's time
 * is these turns: at 1.5 s it took 26 s more with the same peak RSS (265 and 275 MiB, back to back).
 */
const HOSTILE_CLIENT_MS = 750;

let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
let origin: Origin;
let cluster: Cluster;

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startOrigin();
  cluster = await startCluster({
    proxies: [
      {
        name: 'target',
        uploadKBps: 0,
        extraArgs: [
          ...['--cache-bytes', String(CACHE_BYTES), '--transfer-memory', String(TRANSFER_MEMORY)],
          ...['--max-object-bytes', String(32 * MiB), '--max-peers', '128', '--max-peers-per-client', '2'],
          ...['--peer-idle-timeout-ms', '2000', '--origin-timeout-ms', '3000'],
        ],
      },
    ],
    allowPrivateOrigins: true,
    // Every hostile client comes from 127.0.0.1: origo's per-address socket budgets (8 greeting,
    // 32 open) would refuse most of them before they reach the proxy, which is what this test
    // attacks (those budgets have their own tests in origo/test).
    origoArgs: ['--max-pending-per-address', '64', '--max-sockets-per-address', '128'],
  });
});

afterAll(async () => {
  await cluster?.stop();
  await origin?.close();
  releaseNodeRtc();
});

function residentBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  if (!kb) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb[1]) * 1024;
}

function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function request(
  transferId: number,
  url: string,
  over: { mode?: Mode; symbolSize?: number; generationSize?: number } = {},
): Uint8Array {
  const mode = over.mode ?? 'rlnc';
  return encodeRequest({
    transferId,
    mode,
    scheduler: 'partitioned',
    sourceIndex: 0,
    sourceCount: 1,
    window: 240,
    generationSize: over.generationSize ?? (mode === 'rlnc' ? 24 : 1),
    symbolSize: over.symbolSize ?? 1120,
    url,
  });
}

const rtc = createNodeRtcFactory({ bindAddress: '127.0.0.1' });
const webSocket = (url: string) => new WebSocket(url, { maxPayload: 1 << 20 }) as unknown as WebSocketLike;

/** One hostile client: its own origo session and peer connection, one behaviour, then gone. */
/** Why hostile clients were refused (the first words of each error), for the log line. */
const refusals = new Map<string, number>();

async function hostileClient(index: number): Promise<'served' | 'refused'> {
  const session = new OrigoSession(cluster.clientUrl, webSocket, systemClock, 10_000);
  let link: ProxyLink | undefined;
  try {
    await session.connect();
    const [proxy] = await session.requestProxies(1, 'rlnc');
    if (!proxy) throw new Error('no-proxy: origo offered none (the proxy is full or missed its heartbeats)');
    link = new ProxyLink(proxy, { clock: systemClock });
    await link.connect((ms) => openWebRtcTransport(session, rtc, proxy, `h${index}`, systemClock, ms), 10_000);
    const send = (bytes: Uint8Array) => link!.send(bytes);
    const base = `${origin.url}`;
    switch (index % 4) {
      case 0: // REQUEST/STOP storm over objects nobody will finish fetching
        for (let k = 1; k <= 25; k++) {
          send(request(k, k % 2 ? `${base}/hang?c=${index}&k=${k}` : `${base}/object/${2 * MiB}/${index * 100 + k}`));
          send(encodeStop({ transferId: k, reason: StopReason.Cancelled }));
        }
        break;
      case 1: // a huge object in fountain mode, then silence
        send(request(1, `${base}/big/${30 * MiB}`, { mode: 'fountain' }));
        break;
      case 2: // tiny symbols (refused), then the smallest allowed ones on a shared object, then silence
        send(request(1, `${base}/object/${4 * MiB}/7`, { symbolSize: 16 }));
        send(request(2, `${base}/object/${4 * MiB}/7`, { symbolSize: 256, mode: 'uncoded' }));
        break;
      default: // an idle peer: the proxy closes it
        break;
    }
    await sleep(HOSTILE_CLIENT_MS);
    return 'served';
  } catch (e) {
    // Refused (the proxy's peer limit) or closed by the proxy: both are the proxy defending itself.
    const message = e instanceof Error ? e.message : String(e);
    const why = message.split(/[:(]/)[0].slice(0, 60);
    if (!refusals.has(why)) console.log(`hostile client ${index} refused: ${message}`);
    refusals.set(why, (refusals.get(why) ?? 0) + 1);
    return 'refused';
  } finally {
    link?.close();
    session.close();
  }
}

test('RSS stays bounded under 1,000 hostile clients and honest clients still download', async () => {
  const pid = cluster.proxies[0].process.pid!;
  // Warm up with one honest download so the idle footprint includes the loaded codecs.
  // The honest client's connection events, printed with the result when a download failed.
  const connectionEvents: string[] = [];
  const honest = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs,
    trace: (line) => connectionEvents.push(`${new Date().toISOString().slice(11, 23)} ${line}`),
  });
  const warm = (await honest.get(`${origin.url}/object/${MiB}/1`, { mode: 'rlnc', proxies: 1 })) as GetResult;
  expect(sha(warm.object)).toBe(sha(syntheticObject(MiB, 1)));
  await sleep(500);
  const idle = residentBytes(pid);
  const bound = idle + CACHE_BYTES + TRANSFER_MEMORY + FIXED_ALLOWANCE;

  let peak = idle;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, residentBytes(pid));
    } catch {
      // The process is gone: the liveness check below reports it.
    }
  }, 50);

  const outcomes = { served: 0, refused: 0 };
  let next = 0;
  const worker = async () => {
    while (next < HOSTILE_CLIENTS) {
      const outcome = await hostileClient(next++);
      outcomes[outcome]++;
      // A refused client's turn lasts as long too: if it returned at once the next ones would
      // come faster, and on a slow machine the refusals would snowball.
      if (outcome === 'refused') await sleep(HOSTILE_CLIENT_MS);
    }
  };
  const honestRuns: string[] = [];
  const honestLoop = async () => {
    // Honest downloads go on during the whole attack.
    for (let i = 0; next < HOSTILE_CLIENTS; i++) {
      const mode: Mode = i % 2 ? 'fountain' : 'rlnc';
      const bytes = 2 * MiB + i;
      // A download may fail under the attack (one proxy, starved of CPU: its source falls silent,
      // the client's reconnection is refused while hostile peers hold the slots); it must never
      // be wrong, and nearly all must go through. (One in ~300 stalled in a CI run.)
      try {
        const r = (await honest.get(`${origin.url}/object/${bytes}/${50 + i}`, { mode, proxies: 1 })) as GetResult;
        honestRuns.push(sha(r.object) === sha(syntheticObject(bytes, 50 + i)) ? 'ok' : 'corrupt');
      } catch (e) {
        if (!(e instanceof ClientError)) throw e;
        honestRuns.push(`failed: ${e.message}`);
        console.log(`honest download ${i} failed: ${e.message}\n${connectionEvents.slice(-20).join('\n')}`);
      }
    }
  };
  try {
    await Promise.all([...Array.from({ length: CONCURRENT_HOSTILE }, worker), honestLoop()]);
  } finally {
    clearInterval(sampler);
    honest.close();
  }
  const mib = (n: number) => `${(n / MiB).toFixed(1)} MiB`;
  console.log(
    `hostile clients: ${JSON.stringify(outcomes)} (refused: ${JSON.stringify([...refusals])}); honest downloads: ${honestRuns.length} ` +
      `(${JSON.stringify(honestRuns.filter((r) => r !== 'ok').slice(0, 3))} failed); proxy RSS idle ${mib(idle)}, ` +
      `peak ${mib(peak)}, bound ${mib(bound)}`,
  );
  expect(cluster.proxies[0].process.exitCode).toBeNull();
  expect(outcomes.served + outcomes.refused).toBe(HOSTILE_CLIENTS);
  expect(outcomes.served).toBeGreaterThan(HOSTILE_CLIENTS / 2);
  expect(honestRuns.length).toBeGreaterThan(0);
  expect(honestRuns.filter((r) => r === 'corrupt')).toEqual([]);
  // At most 1 in 20 failed (the failures are in the log line above).
  expect(honestRuns.filter((r) => r !== 'ok').length).toBeLessThanOrEqual(Math.floor(honestRuns.length / 20));
  expect(peak).toBeLessThan(bound);
});
