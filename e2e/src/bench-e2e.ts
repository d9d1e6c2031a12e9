/**
 * `npm run bench:e2e -- [--json] [--repeats N] [--quick] [--profile P] [--sources 4,6]`: the Node
 * client over real WebRTC against shaped proxy processes: every mode × N ∈ {1, 2, 4} × caps (all
 * 896 KB/s; half 896, half 1792 KB/s) × 1 and 2 MiB objects. Each row carries the simulator's
 * prediction for the same scenario and network profile, computed in the same run
 * (`simEfficiency`). Without --profile (`loopback`) everything runs on loopback and a last
 * measurement loads one unshaped proxy from several clients (throughput and CPU); with a profile
 * the run happens in the namespace testbed (testbed/), every path through its emulated link.
 *
 * The simulator's proxies hold the object from the start. So each cell first downloads a fresh
 * URL once (cold: every proxy fetches it from the origin first; reported as `coldEfficiency`),
 * then measures `repeats` downloads of that URL from the proxies' caches (`efficiency`, the
 * figure to hold against the simulator). With `--stage` the cell's proxies are chosen once and
 * each cold object is staged at them (a hint through origo with the mode's layout, answered:
 * fetched and its encoder prepared) `--stage-lead-ms` before its download, so `coldEfficiency` is
 * that of a staged first download. `--cold-repeats` cold downloads per cell, each of a fresh
 * object, give the median (one cold download per cell is a noisy figure). `originBytesPerByte`:
 * body bytes the origin sent for a cell's cold objects per byte of them (about N without
 * shielding; `--shield` makes the fleet's first proxy the others' shield parent).
 */
import { readFileSync } from 'node:fs';
import { Command, Option } from 'commander';
import { DEFAULT_SCHEDULER } from '@mutp/shared';
import { ClientError, GetResult, MutpClient, TransportPreference } from '@mutp/shared/client';
import type { ProxyInfo } from '@mutp/shared';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { CodecSet, idealMs, Scenario } from '@mutp/sim';
import type { NetworkProfile } from '@mutp/sim/profiles';
import { loadProfile, readLinkStats, TestbedDescription } from '@mutp/testbed';
import { Cluster, startCluster } from './cluster';
import { startOrigin } from './origin';
import { simulateCell } from './sim-prediction';
import { SenderLog } from './sender-log';
import { enterTestbed, startPlacedOrigin } from './testbed-run';

const program = new Command()
  .name('bench:e2e')
  .description('End-to-end goodput over real loopback WebRTC against shaped proxies, with the simulator alongside.')
  .option('--json', 'print the rows as a JSON array on the last line of stdout')
  .option('--repeats <n>', "downloads per cell from the proxies' caches (medians), after one cold", (v) => Number(v), 3)
  .option(
    '--cold-repeats <n>',
    'cold downloads per cell, each of a fresh object (coldEfficiency is their median; one is noisy)',
    (v) => Number(v),
    1,
  )
  .option('--quick', 'only 2 MiB objects and N = 4')
  .option('--profile <name>', 'network profile (testbed/ and sim/src/profiles.ts); loopback = no testbed', 'loopback')
  .option('--sources <list>', 'proxy counts N, comma-separated (default 1,2,4; --quick: 4)')
  .option('--seed <n>', "seed of the profile's schedules and losses", (v) => Number(v), 1)
  .option('--sender-stats', "add the proxies' sender counters per row (lost, expired, srtt: from their debug logs)")
  .option('--timeline', "add each cell's last download as the fraction decoded every 25 ms (where the time goes)")
  .option(
    '--cap-scale <x>',
    "multiply every proxy's upload cap (896 and 1792 KB/s) by x: at x = 0.5 the same cells move half the packets, which tells the machine's limits from the protocol's",
    (v) => Number(v),
    1,
  )
  .option(
    '--stage',
    "stage each cell's fresh object at the cell's proxies (a staging hint through origo, answered) before its cold download: coldEfficiency then measures a staged first download",
  )
  .option(
    '--stage-lead-ms <ms>',
    "with --stage, how long before its download each cold object is staged (a player stages ahead; on one machine the proxies' staging work would otherwise overlap the download)",
    (v) => Number(v),
    1000,
  )
  .addOption(
    new Option(
      '--transport <kind>',
      'proxy links: webrtc (data channels), quic (the proxies run their QUIC endpoint; WebTransport datagrams), auto (QUIC first, WebRTC beside it)',
    )
      .choices(['webrtc', 'quic', 'auto'])
      .default('webrtc'),
  )
  .option(
    '--integrity-baseline',
    'each warm repeat of a coded mode also downloads once without integrity (no quorum, digests, signatures or polluter log), the order alternating; rows gain uncheckedEfficiency and integrityCost',
  )
  .option(
    '--shield [proxy]',
    "origin shielding: one proxy of the fleet, by name (default its first, which every cell uses) is every other proxy's shield parent (cold objects then reach the origin about once; originBytesPerByte shows it)",
  )
  .option(
    '--origin-process',
    "run the origin in a process of its own (as on the testbed) instead of the client's: its answers then do not wait for the client's event loop (a proxy's origin fetch made while the client is busy, e.g. a shield child's check)",
  )
  .option('--modes <list>', 'modes to run, comma-separated (default http,uncoded,rlnc,fountain)')
  .option('--object-bytes <list>', 'object sizes, comma-separated (default 1 MiB and 2 MiB; --quick: 2 MiB)')
  .option(
    '--timeout-ms <ms>',
    'a download (and its direct-fetch fallback) gives up after this long',
    (v) => Number(v),
    120_000,
  )
  .parse();
const opts = program.opts<{
  json?: boolean;
  repeats: number;
  coldRepeats: number;
  quick?: boolean;
  profile: string;
  sources?: string;
  seed: number;
  objectBytes?: string;
  senderStats?: boolean;
  capScale: number;
  timeline?: boolean;
  stage?: boolean;
  stageLeadMs: number;
  timeoutMs: number;
  transport: TransportPreference;
  modes?: string;
  integrityBaseline?: boolean;
  shield?: boolean | string;
  originProcess?: boolean;
}>();

const ALL_MODES = ['http', 'uncoded', 'rlnc', 'fountain'] as const;
type BenchMode = (typeof ALL_MODES)[number];
/** The modes asked for, in the usual order (http, the baseline of speedupVsHttp, only when asked). */
const MODES: readonly BenchMode[] = opts.modes
  ? ALL_MODES.filter((m) => opts.modes!.split(',').includes(m))
  : ALL_MODES;
if (MODES.length === 0) throw new Error(`--modes: some of ${ALL_MODES.join(', ')}; got ${opts.modes}`);
if (!(opts.capScale > 0 && opts.capScale <= 4))
  throw new Error(`--cap-scale: above 0, at most 4; got ${opts.capScale}`);
if (!(opts.stageLeadMs >= 0 && opts.stageLeadMs <= 60_000))
  throw new Error(`--stage-lead-ms: 0 to 60000; got ${opts.stageLeadMs}`);
if (!(Number.isInteger(opts.coldRepeats) && opts.coldRepeats >= 1 && opts.coldRepeats <= 999))
  throw new Error(`--cold-repeats: an integer from 1 to 999; got ${opts.coldRepeats}`);
/** The paper's two proxy caps, KB/s (scaled by --cap-scale). */
const SLOW_KBPS = Math.round(896 * opts.capScale);
const FAST_KBPS = Math.round(1792 * opts.capScale);
function capsFor(n: number, kind: 'uniform' | 'mixed'): number[] {
  return Array.from({ length: n }, (_, i) => (kind === 'mixed' && i >= Math.ceil(n / 2) ? FAST_KBPS : SLOW_KBPS));
}

const SOURCES = opts.sources ? opts.sources.split(',').map(Number) : opts.quick ? [4] : [1, 2, 4];
if (SOURCES.some((n) => !Number.isInteger(n) || n < 1 || n > 8))
  throw new Error(`--sources: 1..8, got ${opts.sources}`);

/**
 * The proxy set every cell picks its subset from: as many 896 KB/s proxies as the largest N needs
 * (uniform) and as many 1792 KB/s ones as its mixed cell needs (four and two for N = 4).
 */
const FLEET = (() => {
  const maxN = Math.max(...SOURCES);
  const fast = capsFor(maxN, 'mixed').filter((c) => c === FAST_KBPS).length;
  return [
    ...Array.from({ length: maxN }, (_, i) => ({ name: `e${SLOW_KBPS}-${i}`, uploadKBps: SLOW_KBPS })),
    ...Array.from({ length: fast }, (_, i) => ({ name: `e${FAST_KBPS}-${i}`, uploadKBps: FAST_KBPS })),
  ];
})();

/** The fleet's names for a cap list, so origo can be told to use exactly those proxies. */
function namesFor(caps: number[]): string[] {
  const used = new Set<string>();
  return caps.map((cap) => {
    const p = FLEET.find((f) => f.uploadKBps === cap && !used.has(f.name))!;
    used.add(p.name);
    return p.name;
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? NaN : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

/** Round trip of a small HTTP request on loopback, for the ideal time's RTT term. */
async function loopbackRttMs(url: string): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await (await fetch(url)).arrayBuffer();
    samples.push(performance.now() - t);
  }
  return median(samples);
}

/**
 * The simulator's median efficiency over 5 seeds for the same cell; with a profile, its links for
 * the proxies the cell uses (`fleetIndices`), efficiency against the same ideal time as the row's.
 */
function simEfficiency(
  mode: BenchMode,
  caps: number[],
  objectBytes: number,
  rttMs: number,
  codecs: CodecSet,
  network?: { profile: NetworkProfile; fleetIndices: number[]; offsetMs: number },
): number {
  const runs = simulateCell(
    {
      mode,
      capsKBps: caps,
      objectBytes,
      rttMs,
      network: network && {
        profile: network.profile,
        seed: opts.seed,
        fleetCaps: FLEET.map((f) => f.uploadKBps),
        hosts: network.fleetIndices,
        offsetMs: network.offsetMs,
      },
    },
    codecs,
  );
  return round(median(runs.map((r) => idealMs(r.scenario) / r.result.downloadMs)));
}

/** CPU seconds (user + system) a process has used, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

async function main(): Promise<void> {
  const loopback = opts.profile === 'loopback';
  const profile = loopback ? undefined : loadProfile(opts.profile);
  const testbed = profile
    ? await enterTestbed(
        __filename,
        opts.profile,
        FLEET.map((f) => f.uploadKBps),
        opts.seed,
      )
    : undefined;
  // The outer process of a testbed run: the inner one (in the client's namespace) did the work.
  if (profile && !testbed) return;
  const codecs = await loadNodeCodecs();
  // --origin-process: the testbed's way of running it, in this namespace (no netns) on loopback.
  const origin = testbed
    ? await startPlacedOrigin(testbed.origin)
    : opts.originProcess
      ? await startPlacedOrigin({ netns: '', address: '127.0.0.1' })
      : await startOrigin();
  const senderLog = opts.senderStats ? new SenderLog() : undefined;
  const cluster: Cluster = await startCluster({
    proxies: FLEET,
    allowPrivateOrigins: true,
    ...(senderLog
      ? { logLevel: 'debug', onLog: (source: string, line: string) => senderLog.onLine(source, line) }
      : {}),
    readyTimeoutMs: 60_000,
    placement: testbed ? { origo: testbed.origo, proxies: testbed.proxies } : undefined,
    quic: opts.transport !== 'webrtc',
    ...(opts.shield ? { shield: { parent: opts.shield === true ? FLEET[0].name : opts.shield } } : {}),
  });
  // The testbed's origo is plain ws:// on a private address (no TLS inside the testbed).
  const client = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs,
    insecureOrigo: !!testbed,
    transport: opts.transport,
  });
  const rows: Record<string, unknown>[] = [];
  try {
    const fleet = await cluster.listProxies();
    const idOf = (name: string) => fleet.find((p) => p.name === name)!.proxyId;
    const rttMs = profile ? profile.rttMs : round(await loopbackRttMs(`${origin.url}/object/1/1`), 2);
    const objects = opts.objectBytes
      ? opts.objectBytes.split(',').map(Number)
      : opts.quick
        ? [2 << 20]
        : [1 << 20, 2 << 20];
    const sources = SOURCES;
    for (const objectBytes of objects)
      for (const n of sources)
        for (const kind of ['uniform', 'mixed'] as const) {
          if (n === 1 && kind === 'mixed') continue;
          const caps = capsFor(n, kind);
          const names = namesFor(caps);
          const use = new Set(names);
          const fleetIndices = names.map((name) => FLEET.findIndex((f) => f.name === name));
          const exclude = FLEET.filter((f) => !use.has(f.name)).map((f) => idOf(f.name));
          const scenario = { capsKBps: caps, objectBytes, rttMs, jitterMs: 0, loss: 0 } as Scenario;
          const ideal = idealMs(scenario);
          const byMode = new Map<BenchMode, number>();
          for (const mode of MODES) {
            const results: GetResult[] = [];
            let failed = 0;
            const failures: Record<string, number> = {};
            const fallbackMs: number[] = [];
            const colds: GetResult[] = [];
            const url = `${origin.url}/object/${objectBytes}/${rows.length + 1}`;
            // Every cold download is of a fresh object; the warm repeats are of the first one.
            const coldUrls = Array.from({ length: opts.coldRepeats }, (_, c) =>
              c === 0 ? url : `${origin.url}/object/${objectBytes}/${(rows.length + 1) * 1000 + c}`,
            );
            const linksBefore = testbed ? sumLinkDrops(testbed) : undefined;
            senderLog?.take();
            // Where the links' schedules stood when the measured repeats began (after the cold downloads).
            let offsetMs = 0;
            let timeline: number[] = [];
            let shares: string[] = [];
            // --stage: the cell's proxies, chosen once, fetch each cold object before its download.
            let staged: ProxyInfo[] | undefined;
            if (opts.stage) {
              try {
                staged = await client.chooseProxies(n, mode, { exclude });
              } catch (e) {
                process.stderr.write(`bench:e2e ${mode} N=${n} ${kind}: no proxies to stage at: ${String(e)}\n`);
              }
            }
            const stage = async (coldUrl: string) => {
              if (!staged) return;
              const answers = await client.stage(coldUrl, staged, { timeoutMs: GET_TIMEOUT_MS, mode });
              const notStaged = answers.filter((a) => a.status !== 'staged');
              if (notStaged.length > 0)
                process.stderr.write(
                  `bench:e2e ${mode} N=${n} ${kind}: not staged at ${notStaged.map((a) => `${a.proxyId} (${a.error})`).join(', ')}\n`,
                );
              await new Promise((resolve) => setTimeout(resolve, opts.stageLeadMs));
            };
            const unchecked: GetResult[] = [];
            let uncheckedFailed = 0;
            for (let r = -opts.coldRepeats; r < opts.repeats; r++) {
              const target = r < 0 ? coldUrls[r + opts.coldRepeats] : url;
              if (r < 0) await stage(target);
              if (r === 0 && testbed) offsetMs = Date.now() - testbed.startedAtMs;
              const track = opts.timeline && mode !== 'http' && r === opts.repeats - 1;
              const cellGet = { mode, proxies: n, exclude, ...(staged ? { use: staged } : {}) };
              const checkedOnce = async () => {
                const t0 = performance.now();
                timeline = [];
                try {
                  const result = await client.get(target, {
                    ...cellGet,
                    signal: AbortSignal.timeout(GET_TIMEOUT_MS),
                    ...(track
                      ? {
                          onProgress: (p: { dof: number; totalDof: number }) => {
                            const bin = Math.floor((performance.now() - t0) / TIMELINE_BIN_MS);
                            while (timeline.length <= bin) timeline.push(timeline.at(-1) ?? 0);
                            timeline[bin] = round(p.dof / Math.max(1, p.totalDof));
                          },
                        }
                      : {}),
                  });
                  if (r < 0) colds.push(result);
                  else results.push(result);
                  if (track) shares = result.sources.map((x) => `${x.name}:${round(x.share)}`);
                } catch (e) {
                  failed++;
                  const code = e instanceof ClientError ? e.code : 'timeout';
                  failures[code] = (failures[code] ?? 0) + 1;
                  process.stderr.write(`bench:e2e ${mode} N=${n} ${kind}: ${String(e)}\n`);
                  // What the extension does: fetch from the origin directly; the time it took is the row's fallback.
                  if (r >= 0) fallbackMs.push(await directFetchMs(url));
                }
              };
              const uncheckedOnce = async () => {
                try {
                  const result = await client.get(target, {
                    ...cellGet,
                    integrity: 'unchecked',
                    signal: AbortSignal.timeout(GET_TIMEOUT_MS),
                  });
                  unchecked.push(result);
                } catch (e) {
                  uncheckedFailed++;
                  process.stderr.write(`bench:e2e ${mode} N=${n} ${kind} unchecked: ${String(e)}\n`);
                }
              };
              // --integrity-baseline: each warm repeat also downloads once without integrity, the
              // order alternating, so both series see the same machine at the same moments.
              if (opts.integrityBaseline && mode !== 'http' && r >= 0)
                for (const once of r % 2 === 0 ? [checkedOnce, uncheckedOnce] : [uncheckedOnce, checkedOnce])
                  await once();
              else await checkedOnce();
            }
            const linkDrops = testbed && linksBefore ? diffDrops(sumLinkDrops(testbed), linksBefore) : undefined;
            const originBytes = await originBytesFor(origin.url, coldUrls);
            const goodput = median(results.map((x) => x.goodputBps));
            byMode.set(mode, goodput);
            // Transfers end at the proxies a little after the client completes: wait for their lines.
            if (senderLog && mode !== 'http') await new Promise((r) => setTimeout(r, 500));
            const senders = senderLog && mode !== 'http' ? senderLog.take() : undefined;
            const row = {
              profile: opts.profile,
              mode,
              transport: mode === 'http' ? 'tcp' : transportOf(results),
              scheduler: mode === 'http' ? '-' : DEFAULT_SCHEDULER[mode],
              sources: n,
              capsKBps: caps,
              objectBytes,
              rttMs,
              loss: 0,
              seeds: opts.repeats,
              failed,
              failures,
              fallbackMedianMs: fallbackMs.length ? round(median(fallbackMs), 1) : null,
              ...(linkDrops ? { linkDrops } : {}),
              ...(senders ? { senders } : {}),
              ...(opts.timeline && mode !== 'http' ? { timelineBinMs: TIMELINE_BIN_MS, timeline, shares } : {}),
              medianDownloadMs: round(median(results.map((x) => x.durationMs)), 1),
              goodputBps: Math.round(goodput),
              efficiency: round(median(results.map((x) => ideal / x.durationMs))),
              normalizedGoodput: round(median(results.map((x) => Math.min(1, x.normalizedGoodput)))),
              speedupVsHttp: null as number | null,
              simEfficiency: simEfficiency(
                mode,
                caps,
                objectBytes,
                rttMs,
                codecs,
                profile && { profile, fleetIndices, offsetMs },
              ),
              coldDownloadMs: colds.length ? round(median(colds.map((x) => x.durationMs)), 1) : null,
              coldEfficiency: colds.length ? round(median(colds.map((x) => ideal / x.durationMs))) : null,
              // What the origin sent for the cell's cold objects, per byte of them (N without shielding).
              originBytesPerByte:
                originBytes === undefined ? null : round(originBytes / (objectBytes * coldUrls.length)),
              shieldParent: opts.shield === undefined ? null : opts.shield === true ? FLEET[0].name : opts.shield,
              ...(opts.integrityBaseline && mode !== 'http'
                ? integrityColumns(results, unchecked, uncheckedFailed, ideal)
                : {}),
            };
            rows.push(row);
            process.stderr.write(
              `bench:e2e ${mode} N=${n} ${kind} ${sizeLabel(objectBytes)}: eff ${row.efficiency} (sim ${row.simEfficiency}, cold ${row.coldEfficiency}, origin ${row.originBytesPerByte} B/B), ${(goodput / 1e6).toFixed(2)} MB/s, ng ${row.normalizedGoodput}` +
                (senders
                  ? `, senders lost ${senders.lost}/${senders.dataSent} (expired ${senders.expired}), srtt ${senders.srttMs} min ${senders.minRttMs}`
                  : '') +
                (linkDrops ? `, link drops ${JSON.stringify(linkDrops)}` : '') +
                '\n',
            );
          }
          const http = byMode.get('http') ?? NaN;
          for (const r of rows.slice(-MODES.length)) r.speedupVsHttp = round((r.goodputBps as number) / http, 2);
        }
  } finally {
    client.close();
    await cluster.stop();
  }
  // The proxy-load figure is a loopback measurement (one unshaped proxy, CPU-bound).
  const load = loopback ? await proxyLoad(origin.url, codecs) : undefined;
  await origin.close();
  releaseNodeRtc();
  printTable(rows);
  if (load)
    console.log(
      `\nOne unshaped proxy, ${load.clients} clients x ${load.downloads} downloads of 2 MiB (rlnc, N = 1): ` +
        `${(load.bytesPerSecond / 1e6).toFixed(1)} MB/s served, proxy CPU ${load.cpuPercent.toFixed(0)}% of one core.`,
    );
  const extra = load ? [{ mode: 'rlnc', measurement: 'proxy-load', ...load }] : [];
  if (opts.json) console.log(JSON.stringify([...rows, ...extra]));
}

/**
 * --integrity-baseline: the same warm downloads without integrity (ReceiverConfig.integrity), and
 * what integrity costs: 1 - efficiency / uncheckedEfficiency (0.01 = 1 %), from the medians.
 */
function integrityColumns(checked: GetResult[], unchecked: GetResult[], failed: number, ideal: number) {
  const efficiency = median(checked.map((x) => ideal / x.durationMs));
  const uncheckedEfficiency = median(unchecked.map((x) => ideal / x.durationMs));
  return {
    uncheckedEfficiency: round(uncheckedEfficiency),
    uncheckedFailed: failed,
    integrityCost: round(1 - efficiency / uncheckedEfficiency, 4),
  };
}

/**
 * Body bytes the origin sent for these URLs (every request: proxies' fetches, checks, fallbacks),
 * as it counts them (origin.ts `/_bytes`, wherever it runs); undefined if it cannot say.
 */
async function originBytesFor(originUrl: string, urls: string[]): Promise<number | undefined> {
  const query = new URLSearchParams(urls.map((u): [string, string] => ['path', new URL(u).pathname]));
  try {
    const res = await fetch(`${originUrl}/_bytes?${query}`, { signal: AbortSignal.timeout(5000) });
    return ((await res.json()) as { bytes: number }).bytes;
  } catch {
    return undefined;
  }
}

const sizeLabel = (bytes: number) => (bytes >= 1 << 20 ? `${bytes / (1 << 20)} MiB` : `${bytes >> 10} KiB`);

const TIMELINE_BIN_MS = 25;

/** A download that neither completes nor fails by itself (a proxy gone silent) ends here. */
const GET_TIMEOUT_MS = opts.timeoutMs;

async function directFetchMs(url: string): Promise<number> {
  const t = performance.now();
  try {
    await (await fetch(url, { signal: AbortSignal.timeout(GET_TIMEOUT_MS) })).arrayBuffer();
  } catch {
    return NaN;
  }
  return performance.now() - t;
}

type Drops = { disconnected: number; queue: number; loss: number };

/** Drops on every emulated link, both directions. */
function sumLinkDrops(tb: TestbedDescription): Drops {
  const total: Drops = { disconnected: 0, queue: 0, loss: 0 };
  for (const stats of Object.values(readLinkStats(tb)))
    for (const d of stats ? [stats.up, stats.down] : []) {
      total.disconnected += d.dropped.disconnected;
      total.queue += d.dropped.queue;
      total.loss += d.dropped.loss;
    }
  return total;
}

const diffDrops = (a: Drops, b: Drops): Drops => ({
  disconnected: a.disconnected - b.disconnected,
  queue: a.queue - b.queue,
  loss: a.loss - b.loss,
});

/** One proxy without an upload limit, several clients at once: throughput and the proxy's CPU. */
async function proxyLoad(originUrl: string, codecs: Awaited<ReturnType<typeof loadNodeCodecs>>) {
  const cluster = await startCluster({ proxies: [{ name: 'unshaped', uploadKBps: 0 }], allowPrivateOrigins: true });
  const clientCount = 3;
  const downloads = 6;
  const clients = Array.from(
    { length: clientCount },
    () => new MutpClient(createNodeHost(), { origoUrl: cluster.clientUrl, codecs }),
  );
  try {
    const pid = cluster.proxies[0].process.pid!;
    // Warm the proxy's cache and the connections first, so the measurement is the serving path.
    await Promise.all(
      clients.map((c, i) => c.get(`${originUrl}/object/${2 << 20}/${900 + i}`, { mode: 'rlnc', proxies: 1 })),
    );
    const cpu0 = cpuSeconds(pid);
    const t0 = performance.now();
    let bytes = 0;
    await Promise.all(
      clients.map(async (c, i) => {
        for (let k = 0; k < downloads; k++) {
          const r = await c.get(`${originUrl}/object/${2 << 20}/${900 + i}`, { mode: 'rlnc', proxies: 1 });
          bytes += r.object.length;
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    return {
      clients: clientCount,
      downloads,
      bytesPerSecond: bytes / seconds,
      cpuPercent: ((cpuSeconds(pid) - cpu0) / seconds) * 100,
    };
  } finally {
    clients.forEach((c) => c.close());
    await cluster.stop();
  }
}

function printTable(rows: Record<string, unknown>[]): void {
  console.log(
    'mode      N  caps KB/s        object  median ms  goodput MB/s  eff    sim eff  norm.gp  x http  cold eff  origin B/B  fail',
  );
  for (const r of rows) {
    const caps = r.capsKBps as number[];
    console.log(
      `${String(r.mode).padEnd(9)} ${String(r.sources).padStart(1)}  ${caps.join('/').padEnd(16)} ` +
        `${sizeLabel(r.objectBytes as number).padStart(6)} ${String(r.medianDownloadMs).padStart(10)} ` +
        `${((r.goodputBps as number) / 1e6).toFixed(2).padStart(13)}  ${String(r.efficiency).padEnd(6)} ` +
        `${String(r.simEfficiency).padEnd(8)} ${String(r.normalizedGoodput).padEnd(8)} ${String(r.speedupVsHttp).padStart(6)}  ` +
        `${String(r.coldEfficiency).padEnd(8)}  ${String(r.originBytesPerByte).padEnd(10)}  ${r.failed}`,
    );
  }
}

main().catch((e: unknown) => {
  // The testbed runner takes the testbed down in its own finally.
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});

/** What carried the cell's sources: one kind, or 'mixed' (auto fell back for some), or '-' (none completed). */
function transportOf(results: GetResult[]): string {
  const kinds = new Set(
    results.flatMap((r) => r.sources.map((s) => ('transport' in s ? (s.transport ?? 'lost') : 'tcp'))),
  );
  return kinds.size === 0 ? '-' : kinds.size === 1 ? [...kinds][0] : 'mixed';
}
