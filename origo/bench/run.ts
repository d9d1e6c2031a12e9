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
import { mergeBook } from './book-wire';
import { benchProxyId } from './exchange-id';
import { clientAddresses, proxyAddress } from './addresses';
import { Generator } from './generator';
import { OrigoInstance, origoDropCounters, proxiesKnown, startInstance, writeTokenKey } from './instances';
import { RunBook } from './peers';
import { cpuSeconds, CpuMeter, memory, ownCpuSeconds, redisPid } from './proc';
import { round1, Row, summarise } from './row';
import { LoadSettings } from './settings';

type Say = (line: string) => void;

/** Processes a row has started, so that an interrupted run can kill them. */
export interface Started {
  instances: OrigoInstance[];
  redis?: RedisServer;
  generator?: Generator;
  /** Holds the token key. */
  tempDir?: string;
}

const sleep = (msToWait: number) => new Promise<void>((resolve) => setTimeout(resolve, msToWait));
const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);
const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** Runs a row with `workers` generator processes; stops everything it started, whatever happens. */
export async function runRow(
  s: LoadSettings,
  instanceCount: number,
  workers: number,
  started: Started,
  say: Say,
): Promise<Row> {
  try {
    return await measureRow(s, instanceCount, workers, started, say);
  } finally {
    say('  closing sessions and stopping origo');
    const closeStart = performance.now();
    await stopStarted(started, 2000, (instance, code) =>
      say(`  origo #${instance.index} exited with ${code}:\n${instance.output()}`),
    );
    say(`  closed everything in ${seconds(closeStart)} s`);
  }
}

/** Closes the generator's sessions, then stops origo, redis-server and the workers (bounded). */
export async function stopStarted(
  started: Started,
  closeTimeoutMs: number,
  onBadExit?: (instance: OrigoInstance, code: number | null) => void,
): Promise<void> {
  const generator = started.generator;
  started.generator = undefined;
  if (generator !== undefined) {
    await generator.all(() => ({ op: 'close', timeoutMs: closeTimeoutMs })).catch(() => undefined);
  }
  const instances = started.instances.splice(0);
  const codes = await Promise.all(instances.map((instance) => instance.stop()));
  codes.forEach((code, i) => code !== 0 && onBadExit?.(instances[i], code));
  await generator?.end();
  await started.redis?.stop();
  started.redis = undefined;
  if (started.tempDir !== undefined) rmSync(started.tempDir, { recursive: true, force: true });
  started.tempDir = undefined;
}

/**
 * Interrupted (Ctrl-C): every process is signalled in this same tick, since whatever runs this
 * (tsx relays the signal, then kills) may not wait; workers also exit when their IPC channel
 * closes. Then waits (bounded) for them to go.
 */
export async function abortStarted(started: Started): Promise<void> {
  const instances = started.instances.splice(0);
  const { generator, redis, tempDir } = started;
  Object.assign(started, { generator: undefined, redis: undefined, tempDir: undefined });
  await Promise.all([...instances.map((instance) => instance.stop(2000)), generator?.end(1000), redis?.stop()]);
  if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true });
}

/** Starts the processes (recorded in `started` as they come up, for the caller to stop). */
async function startProcesses(s: LoadSettings, instanceCount: number, workers: number, started: Started, say: Say) {
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
  started.generator = await Generator.start(workers);
  say(`  generator: ${workers} worker process(es), pids ${started.generator.pids.join(' ')}`);
  // A large ramp takes minutes: say how far it got, about every fifth of each kind of peer.
  const done = { proxies: new Map<number, number>(), clients: new Map<number, number>() };
  const total = { proxies: s.proxies, clients: s.clients };
  started.generator.onProgress = (worker, op, n) => {
    const before = sum([...done[op].values()]);
    done[op].set(worker, n);
    const after = sum([...done[op].values()]);
    const fifth = Math.max(1, Math.ceil(total[op] / 5));
    if (Math.floor(after / fifth) > Math.floor(before / fifth) && after < total[op]) {
      say(`  ${op}: ${after}/${total[op]} handshakes done`);
    }
  };
  return { instances, generator: started.generator };
}

async function measureRow(
  s: LoadSettings,
  instanceCount: number,
  workerCount: number,
  started: Started,
  say: Say,
): Promise<Row> {
  const { instances, generator } = await startProcesses(s, instanceCount, workerCount, started, say);
  const book = new RunBook();
  const perWorker = (n: number) => Math.max(1, Math.ceil(n / generator.count));

  // Proxies first: each on its own address, instance i % n, heartbeating once registered.
  let t0 = performance.now();
  const registered = await generator.all((w) => ({
    op: 'proxies',
    peers: generator.share(s.proxies, w, (i) => ({
      id: benchProxyId(i),
      url: instances[i % instanceCount].ws,
      localAddress: proxyAddress(i),
      instance: i % instanceCount,
    })),
    concurrency: perWorker(s.handshakeConcurrency),
    timeoutMs: s.connectTimeoutMs,
    sdpBytes: s.sdpBytes,
  }));
  const proxyCount = sum(registered.map((r) => r.peers));
  const proxyRampMs = performance.now() - t0;
  say(`  proxies: ${proxyCount}/${s.proxies} registered in ${seconds(t0)} s`);
  // Every instance must know every proxy before clients ask (sharing Redis: within a refresh).
  const registryProblem = await waitFor(
    `every instance to list the ${proxyCount} proxies`,
    async () => {
      const known = await Promise.all(instances.map(proxiesKnown));
      return known.every((n) => n === proxyCount) ? '' : undefined;
    },
    10_000,
    100,
  ).catch((err: Error) => err.message);
  if (registryProblem) say(`  ${registryProblem}`);
  const baseline = instances.map((i) => memory(i.pid).rssBytes);

  // Clients: round robin over their addresses, at most 4 greeting per address (all workers together).
  t0 = performance.now();
  const addresses = clientAddresses(s.clients, s.clientsPerAddress);
  const concurrency = Math.min(s.handshakeConcurrency, 4 * addresses.count);
  const connected = await generator.all((w) => ({
    op: 'clients',
    peers: generator.share(s.clients, w, (i) => ({
      index: i,
      url: instances[i % instanceCount].ws,
      localAddress: addresses.of(i),
      instance: i % instanceCount,
    })),
    concurrency: perWorker(concurrency),
    timeoutMs: s.connectTimeoutMs,
    sdpBytes: s.sdpBytes,
    requestCount: s.requestCount,
    instances: instanceCount,
  }));
  const clientCount = sum(connected.map((r) => r.peers));
  const clientRampMs = performance.now() - t0;
  say(`  clients: ${clientCount}/${s.clients} sessions in ${seconds(t0)} s over ${addresses.count} addresses`);

  // Offers: each worker starts its share at the set rate on its idle active clients and expires
  // what went unanswered. Warm-up first, then the measured window.
  const activeBelow = Math.ceil(s.activeFraction * s.clients);
  await generator.all((w) => ({
    op: 'drive',
    activeBelow,
    offerRate: (s.offerRate * generator.share(activeBelow, w, () => 1).length) / activeBelow,
    settings: s,
  }));
  await sleep(s.warmupMs);
  const instanceCpu = instances.map((i) => new CpuMeter(() => cpuSeconds(i.pid)));
  const generatorCpu = new CpuMeter(() => ownCpuSeconds() + sum(generator.pids.map(cpuSeconds)));
  const redisProcess = started.redis ? redisPid(started.redis.port) : undefined;
  const redisCpu = redisProcess !== undefined ? new CpuMeter(() => cpuSeconds(redisProcess)) : undefined;
  await generator.all(() => ({ op: 'measure', on: true }));
  for (const meter of [...instanceCpu, generatorCpu, redisCpu]) meter?.start();
  const windowStart = performance.now();
  await sleep(s.steadyMs);
  const open = await generator.all(() => ({ op: 'measure', on: false }));
  const steadyWindowMs = performance.now() - windowStart;
  const cpuPercentPerInstance = instanceCpu.map((m) => round1(m.percent()));
  const generatorCpuPercent = round1(generatorCpu.percent());
  const redisCpuPercent = redisCpu ? round1(redisCpu.percent()) : null;
  const steadyMemory = instances.map((i) => memory(i.pid));
  const generatorRssBytes = process.memoryUsage.rss() + sum(generator.pids.map((pid) => memory(pid).rssBytes));
  const clientSessions = sum(open.map((r) => r.open!.clients));
  const proxiesOpen = sum(open.map((r) => r.open!.proxies));
  for (const part of await generator.all(() => ({ op: 'stop', drainMs: s.answerTimeoutMs + 1000 }))) {
    mergeBook(book, part.book!);
  }

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
    generatorRssBytes,
    generatorProcesses: generator.count,
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
    `  heartbeats ${row.heartbeatsPerSecond}/s; origo CPU ${row.cpuCores.map((c) => `${c} core`).join(' + ')},` +
      ` RSS ${row.rssBytesPerInstance.map(mb).join(' + ')} (peak ${row.rssPeakBytesPerInstance.map(mb).join(' + ')}),` +
      ` ${row.rssBytesPer1000Clients === null ? '?' : mb(row.rssBytesPer1000Clients)} per 1000 clients;` +
      ` generator CPU ${generatorCpuPercent}% over ${generator.count} process(es)` +
      (redisCpuPercent !== null ? `, redis CPU ${redisCpuPercent}%` : ''),
  );
  say(
    `  failures: ${row.failures.total}` +
      (row.failures.total > 0 ? ` ${JSON.stringify(row.failures)}` : '') +
      (row.targetsReached ? '' : `; TARGETS NOT REACHED: ${row.problems.join('; ')}`),
  );
  say(
    `  issue 34 scale targets (relay p99 < 50 ms, cross < 80 ms, < 1 core, < 2 GiB per instance): ` +
      (row.scaleTargetsMissed.length === 0 ? 'met' : `MISSED: ${row.scaleTargetsMissed.join('; ')}`),
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
