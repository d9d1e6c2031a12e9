/**
 * One row of the load test: start `instances` origo processes (sharing a private redis-server
 * when more than one), register the proxies, ramp the clients up, drive offers at a bounded rate
 * through a warm-up and a measured steady window, drain, then close everything and stop the
 * processes. Every failure is counted in the row; nothing is retried.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisServer, startRedis } from '@mutp/testing/redis';
import { waitFor } from '@mutp/testing/wait';
import { clientAddresses, proxyAddress } from './addresses';
import { OrigoInstance, origoDropCounters, proxiesKnown, startInstance, writeTokenKey } from './instances';
import { ExchangeSettings, fakeSdp, HandshakeError, RunBook, SimClient, SimProxy } from './peers';
import { cpuSeconds, CpuMeter, memory, ownCpuSeconds, redisPid } from './proc';
import { drive } from './offers';
import { round1, Row, summarise } from './row';
import { LoadSettings } from './settings';

type Say = (line: string) => void;

/** Processes a row has started, so that an interrupted run can kill them. */
export interface Started {
  instances: OrigoInstance[];
  redis?: RedisServer;
  /** Holds the token key. */
  tempDir?: string;
}

/** Runs `task(i)` for i in [0, count), at most `concurrency` at once. */
async function inPool(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, count)) }, worker));
}

const sleep = (msToWait: number) => new Promise<void>((resolve) => setTimeout(resolve, msToWait));
const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);
const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

export async function runRow(s: LoadSettings, instanceCount: number, started: Started, say: Say): Promise<Row> {
  const clients: SimClient[] = [];
  const proxies: SimProxy[] = [];
  try {
    return await measureRow(s, instanceCount, started, say, clients, proxies);
  } finally {
    say('  closing sessions and stopping origo');
    const closeStart = performance.now();
    await Promise.all([...clients, ...proxies].map((peer) => peer.close(2000)));
    for (const instance of started.instances) {
      const code = await instance.stop();
      if (code !== 0) say(`  origo #${instance.index} exited with ${code}:\n${instance.output()}`);
    }
    started.instances.length = 0;
    await started.redis?.stop();
    started.redis = undefined;
    if (started.tempDir !== undefined) rmSync(started.tempDir, { recursive: true, force: true });
    started.tempDir = undefined;
    say(`  closed everything in ${seconds(closeStart)} s`);
  }
}

/** Starts the processes (recorded in `started` as they come up, for the caller to stop). */
async function startProcesses(s: LoadSettings, instanceCount: number, started: Started, say: Say) {
  if (instanceCount > 1) {
    started.redis = await startRedis();
    say(`  redis-server on port ${started.redis.port}`);
  }
  const redisUrl = started.redis?.url;
  started.tempDir = mkdtempSync(join(tmpdir(), 'mutp-bench-origo-'));
  const tokenKeyFile = writeTokenKey(started.tempDir);
  const outcomes = await Promise.allSettled(
    Array.from({ length: instanceCount }, (_, index) =>
      startInstance({
        index,
        heartbeatIntervalMs: s.heartbeatIntervalMs,
        // Global caps raised to the targets so that only the per-address budgets (kept at their
        // defaults, peers spread over loopback addresses) and real overload can refuse anyone.
        maxClients: Math.max(10_000, s.clients),
        maxProxies: Math.max(1000, s.proxies),
        tokenKeyFile,
        redisUrl,
        extraArgs: s.origoArgs,
        nodeArgs: s.origoNodeArgs,
        onSpawn: (instance) => started.instances.push(instance),
      }),
    ),
  );
  const failed = outcomes.find((o) => o.status === 'rejected');
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  const instances = [...started.instances].sort((a, b) => a.index - b.index);
  say(`  origo ${instances.map((i) => `#${i.index} pid ${i.pid} port ${i.port}`).join(', ')}`);
  return instances;
}

async function measureRow(
  s: LoadSettings,
  instanceCount: number,
  started: Started,
  say: Say,
  clients: SimClient[],
  proxies: SimProxy[],
): Promise<Row> {
  const instances = await startProcesses(s, instanceCount, started, say);
  const book = new RunBook();
  const proxyInstance = new Map<string, number>();
  const settings: ExchangeSettings = {
    requestCount: s.requestCount,
    offerSdp: fakeSdp('offer', s.sdpBytes),
    proxyInstance,
  };
  const handshakeFailure = (tally: typeof book.failures.proxyHandshake) => (err: unknown) => {
    if (!(err instanceof HandshakeError)) throw err;
    tally.add(err.kind);
  };

  // Proxies first: each on its own address, instance i % n, heartbeating once registered.
  let t0 = performance.now();
  await inPool(s.proxies, s.handshakeConcurrency, async (i) => {
    const proxyId = `bench-p${i}`;
    const instance = instances[i % instanceCount];
    proxyInstance.set(proxyId, instance.index);
    await SimProxy.connect(
      {
        url: instance.ws,
        localAddress: proxyAddress(i),
        proxyId,
        instance: instance.index,
        timeoutMs: s.connectTimeoutMs,
        sdpBytes: s.sdpBytes,
      },
      book,
    ).then((proxy) => {
      proxy.startHeartbeats();
      proxies.push(proxy);
    }, handshakeFailure(book.failures.proxyHandshake));
  });
  const proxyRampMs = performance.now() - t0;
  say(
    `  proxies: ${proxies.length}/${s.proxies} registered in ${seconds(t0)} s` +
      ` (${book.failures.proxyHandshake.total} failed)`,
  );
  // Every instance must know every proxy before clients ask (sharing Redis: within a refresh).
  const registryProblem = await waitFor(
    `every instance to list the ${proxies.length} proxies`,
    async () => {
      const known = await Promise.all(instances.map(proxiesKnown));
      return known.every((n) => n === proxies.length) ? '' : undefined;
    },
    10_000,
    100,
  ).catch((err: Error) => err.message);
  if (registryProblem) say(`  ${registryProblem}`);
  const baseline = instances.map((i) => memory(i.pid).rssBytes);

  // Clients in bounded batches: round robin over their addresses, at most 4 greeting per address.
  t0 = performance.now();
  const addresses = clientAddresses(s.clients, s.clientsPerAddress);
  const concurrency = Math.min(s.handshakeConcurrency, 4 * addresses.count);
  const step = Math.max(1000, Math.ceil(s.clients / 5));
  let done = 0;
  const connected: (SimClient | undefined)[] = new Array(s.clients);
  await inPool(s.clients, concurrency, async (i) => {
    const instance = instances[i % instanceCount];
    await SimClient.connect(
      {
        url: instance.ws,
        localAddress: addresses.of(i),
        index: i,
        instance: instance.index,
        timeoutMs: s.connectTimeoutMs,
      },
      book,
      settings,
    ).then((client) => {
      connected[i] = client;
    }, handshakeFailure(book.failures.clientHandshake));
    if (++done % step === 0 && done < s.clients) say(`  clients: ${done}/${s.clients} handshakes done`);
  });
  for (const client of connected) if (client) clients.push(client);
  const clientRampMs = performance.now() - t0;
  say(
    `  clients: ${clients.length}/${s.clients} sessions in ${seconds(t0)} s over ${addresses.count} addresses` +
      ` (${book.failures.clientHandshake.total} failed)`,
  );

  // Offers: a scheduler starts them at the set rate on idle active clients; a sweep expires
  // what went unanswered. Warm-up first, then the measured window.
  const active = clients.slice(0, Math.ceil(s.activeFraction * clients.length));
  const stopDriving = drive(book, active, s);
  await sleep(s.warmupMs);
  const instanceCpu = instances.map((i) => new CpuMeter(() => cpuSeconds(i.pid)));
  const generatorCpu = new CpuMeter(ownCpuSeconds);
  const redisProcess = started.redis ? redisPid(started.redis.port) : undefined;
  const redisCpu = redisProcess !== undefined ? new CpuMeter(() => cpuSeconds(redisProcess)) : undefined;
  for (const meter of [...instanceCpu, generatorCpu, redisCpu]) meter?.start();
  const windowStart = performance.now();
  book.measuring = true;
  await sleep(s.steadyMs);
  book.measuring = false;
  const steadyWindowMs = performance.now() - windowStart;
  const cpuPercentPerInstance = instanceCpu.map((m) => round1(m.percent()));
  const generatorCpuPercent = round1(generatorCpu.percent());
  const redisCpuPercent = redisCpu ? round1(redisCpu.percent()) : null;
  const steadyMemory = instances.map((i) => memory(i.pid));
  const clientSessions = clients.filter((c) => c.open).length;
  const proxiesOpen = proxies.filter((p) => p.open).length;
  await stopDriving(s.answerTimeoutMs + 1000);

  const origoCounters: Record<string, number> = {};
  for (const instance of instances) {
    for (const [key, value] of Object.entries(await origoDropCounters(instance))) {
      origoCounters[key] = (origoCounters[key] ?? 0) + value;
    }
  }
  const windowSeconds = steadyWindowMs / 1000;
  const offersPerSecond = book.offers.measured / windowSeconds;
  const row = summarise(s, instanceCount, book, {
    registryProblem,
    clientSessions,
    proxies: proxiesOpen,
    offersPerSecond,
    steadyWindowMs,
    cpuPercentPerInstance,
    steadyMemory,
    baseline,
    generatorCpuPercent,
    redisCpuPercent,
    rampMs: { proxies: Math.round(proxyRampMs), clients: Math.round(clientRampMs) },
    origoCounters,
    origoWarnings: mergeWarnings(instances),
  });
  say(
    `  steady ${windowSeconds.toFixed(1)} s: ${row.offers} offers (${row.offersPerSecond}/s, ${row.crossInstanceOffers} cross-instance),` +
      ` relay p50 ${row.relayP50Ms} ms p99 ${row.relayP99Ms} ms` +
      (instanceCount > 1 ? `, cross p50 ${row.relayCrossP50Ms} ms p99 ${row.relayCrossP99Ms} ms` : '') +
      `, round trip p50 ${row.roundTripP50Ms} ms p99 ${row.roundTripP99Ms} ms`,
  );
  say(
    `  heartbeats ${row.heartbeatsPerSecond}/s; origo CPU ${row.cpuPercentPerInstance.map((c) => `${c}%`).join(' + ')},` +
      ` RSS ${row.rssBytesPerInstance.map(mb).join(' + ')} (peak ${row.rssPeakBytesPerInstance.map(mb).join(' + ')}),` +
      ` ${row.rssBytesPer1000Clients === null ? '?' : mb(row.rssBytesPer1000Clients)} per 1000 clients;` +
      ` generator CPU ${generatorCpuPercent}%` +
      (redisCpuPercent !== null ? `, redis CPU ${redisCpuPercent}%` : ''),
  );
  say(
    `  failures: ${row.failures.total}` +
      (row.failures.total > 0 ? ` ${JSON.stringify(row.failures)}` : '') +
      (row.targetsReached ? '' : `; TARGETS NOT REACHED: ${row.problems.join('; ')}`),
  );
  return row;
}

function mergeWarnings(instances: OrigoInstance[]): Record<string, number> {
  const merged: Record<string, number> = {};
  for (const instance of instances) {
    for (const [msg, n] of instance.warnings) merged[msg] = (merged[msg] ?? 0) + n;
  }
  return merged;
}
