/**
 * `npm run bench:mobility -- [--json] [--profile vehicular] [--sources 2,4] [--segments 32]`:
 * SoftStage's micro-benchmark (seed 000 §V) in the namespace testbed. A series of 2 MB segments
 * is downloaded in play order by the Node client (downloadSeries) while the client's access link
 * follows the profile's schedule (vehicular: 12 s encounters at 27 % loss, 8 s disconnections),
 * in three ways per proxy count N:
 *
 * - `http`: Parallel HTTP through the N proxies (the baseline), fetched on demand;
 * - `unstaged`: MUTP (rlnc by default), each segment fetched on demand;
 * - `staged`: MUTP with staging hints: upcoming segments are fetched into the proxies' caches
 *   as the StagingManager decides (SoftStage's rule from measured latencies).
 *
 * Every series uses fresh URLs (cold caches) and a new client (no connections, no origo session),
 * and starts when the access link comes back from a disconnection (`--align`), so every way meets
 * the same schedule from the same point: where in it a series starts changes how many
 * disconnections it meets more than anything else. Rows report the series' total time, per-segment
 * times, bytes fetched again after a disconnection (by the proxies from the origin beyond once
 * per proxy and segment, and by the client for downloads that failed and were tried again) and
 * whether every segment was byte-exact. `stalls` is null here (no player: the Chromium playback
 * is bench:browser's). With `--drain-at k` one proxy of the set drains (SIGTERM) during segment k
 * of each MUTP series, and the rows say what the handoff cost (the pause after that segment
 * against the median pause).
 */
import { createHash } from 'node:crypto';
import { Command, Option } from 'commander';
import {
  DEFAULT_STAGING_CONFIG,
  downloadSeries,
  MutpClient,
  SegmentRef,
  SeriesResult,
  TransportPreference,
} from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { nextReconnectionMs } from '@mutp/sim';
import { loadProfile } from '@mutp/testbed';
import { createNodeHost } from '@mutp/client';
import { Cluster, startCluster } from './cluster';
import { syntheticObject } from './origin';
import { originBytesByProxy } from './proxy-metrics';
import { enterTestbed, startPlacedOrigin } from './testbed-run';

const program = new Command()
  .name('bench:mobility')
  .description('Staged and unstaged MUTP against Parallel HTTP over a series of segments in the testbed.')
  .option('--json', 'print the rows as JSON on the last line of stdout')
  .option('--profile <name>', 'network profile (testbed/, sim/src/profiles.ts)', 'vehicular')
  .option('--sources <list>', 'proxy counts N, comma-separated', '2,4')
  .option('--segments <n>', 'segments per series', (v) => Number(v), 32)
  .option('--segment-bytes <n>', 'bytes per segment', (v) => Number(v), 2_000_000)
  .option('--ways <list>', 'which series to run, comma-separated: http, unstaged, staged', 'http,unstaged,staged')
  .option('--coding <mode>', 'the MUTP mode of the unstaged and staged series', 'rlnc')
  .option(
    '--max-ahead <n>',
    "most segments staged ahead of the download (the StagingManager's cap; its rule decides below it)",
    (v) => Number(v),
    DEFAULT_STAGING_CONFIG.maxAhead,
  )
  .option(
    '--spread <k>',
    "staged series: stage each segment at and fetch it from k of the N proxies, in turn, or 'auto' (the client's rule from measured rates)",
    'auto',
  )
  .option('--seed <n>', "seed of the profile's schedules and losses", (v) => Number(v), 1)
  .option(
    '--stall-timeout-ms <ms>',
    'a segment download with no progress this long fails (the longest disconnection it survives)',
    (v) => Number(v),
    60_000,
  )
  .option('--attempts <n>', 'tries per segment before the series fails', (v) => Number(v), 3)
  .option(
    '--attempt-timeout-ms <ms>',
    'a segment download taking longer is given up and tried again (every way alike)',
    (v) => Number(v),
    120_000,
  )
  .option(
    '--drain-at <k>',
    'MUTP series: once segment k (1-based) is under way, SIGTERM one proxy of the set (it drains); a spare proxy joins the fleet',
    (v) => Number(v),
  )
  .addOption(
    new Option('--transport <kind>', 'proxy links: webrtc, quic (the proxies run their QUIC endpoint), auto')
      .choices(['webrtc', 'quic', 'auto'])
      .default('webrtc'),
  )
  .option('--timeout-ms <ms>', 'a whole series gives up after this long', (v) => Number(v), 900_000)
  .option(
    '--no-align',
    'start each series at once, not when the access link next comes back from a disconnection (profiles with disconnections)',
  )
  .parse();
const opts = program.opts<{
  json?: boolean;
  profile: string;
  sources: string;
  segments: number;
  segmentBytes: number;
  ways: string;
  coding: 'uncoded' | 'rlnc' | 'fountain';
  maxAhead: number;
  spread: string;
  seed: number;
  stallTimeoutMs: number;
  attempts: number;
  transport: TransportPreference;
  attemptTimeoutMs: number;
  timeoutMs: number;
  drainAt?: number;
  align: boolean;
}>();

type Way = 'http' | 'unstaged' | 'staged';
const WAYS = opts.ways.split(',').map((w) => w.trim()) as Way[];
for (const w of WAYS) if (!['http', 'unstaged', 'staged'].includes(w)) throw new Error(`--ways: unknown ${w}`);
if (!['uncoded', 'rlnc', 'fountain'].includes(opts.coding)) throw new Error(`--coding: unknown ${opts.coding}`);
if (!(Number.isInteger(opts.maxAhead) && opts.maxAhead >= 1 && opts.maxAhead <= 64))
  throw new Error('--max-ahead: 1..64');
const SPREAD: number | 'auto' = opts.spread === 'auto' ? 'auto' : Number(opts.spread);
if (SPREAD !== 'auto' && !(Number.isInteger(SPREAD) && SPREAD >= 1 && SPREAD <= 8))
  throw new Error(`--spread: 1..8 or auto, got ${opts.spread}`);
const SOURCES = opts.sources.split(',').map(Number);
if (SOURCES.some((n) => !Number.isInteger(n) || n < 1 || n > 8))
  throw new Error(`--sources: 1..8, got ${opts.sources}`);
if (!(Number.isInteger(opts.segments) && opts.segments >= 1 && opts.segments <= 1000))
  throw new Error('--segments: 1..1000');
if (!(Number.isInteger(opts.segmentBytes) && opts.segmentBytes >= 1 && opts.segmentBytes <= 16_000_000))
  throw new Error('--segment-bytes: 1..16000000');
if (
  opts.drainAt !== undefined &&
  !(Number.isInteger(opts.drainAt) && opts.drainAt >= 2 && opts.drainAt < opts.segments)
)
  throw new Error(`--drain-at: 2..${opts.segments - 1} (a segment with one before and one after it)`);

/** Roadside proxies: the paper's faster cap (1792 KB/s), as many as the largest N (and a spare to replace a drained one). */
const CAP_KBPS = 1792;
const FLEET = Array.from({ length: Math.max(...SOURCES) + (opts.drainAt !== undefined ? 1 : 0) }, (_, i) => ({
  name: `r${i}`,
  uploadKBps: CAP_KBPS,
}));

interface Row {
  profile: string;
  mode: Way;
  /** What the MUTP series asked for ('tcp' for Parallel HTTP). */
  transport: string;
  coding: string;
  sources: number;
  segments: number;
  segmentBytes: number;
  totalMs: number | null;
  segmentMs: number[];
  medianSegmentMs: number | null;
  refetchedBytes: number | null;
  originBytes: number | null;
  retries: number;
  handoffs: number;
  stalls: null;
  verified: boolean;
  staged: number;
  hints: number;
  wastedHints: number;
  /** The StagingManager's cap, and what its rule asked for at the end (staged rows). */
  maxAhead: number | null;
  neededAhead: number | null;
  /** Its median origin-to-edge staging latency at the end (the rule's input). */
  stagingLatencyMs: number | null;
  /** Proxies each segment went to at the end ('auto': the spread rule's choice), and its moves. */
  spread: number | null;
  spreadMoves: number | null;
  /**
   * With --drain-at: the segment (1-based) during which a proxy of the set was told to drain, that
   * proxy, how many proxies were replaced because they said they were going away, and the pause
   * between that segment's end and the next one's start (the handoff) against the series' median
   * pause between segments.
   */
  drainAt?: number;
  drained?: string | null;
  goingAwayReplaced?: number;
  pauseAfterDrainMs?: number | null;
  medianPauseMs?: number | null;
  error?: string;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length === 0 ? null : s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** The proxies' origin byte counts, asked again while the access link is down (up to 90 s). */
async function originBytes(cluster: Cluster): Promise<Record<string, number>> {
  const deadline = performance.now() + 90_000;
  for (;;) {
    try {
      return await originBytesByProxy(cluster);
    } catch (e) {
      if (performance.now() > deadline) throw e;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

async function main(): Promise<void> {
  const testbed = await enterTestbed(
    __filename,
    opts.profile,
    FLEET.map((f) => f.uploadKBps),
    opts.seed,
  );
  if (!testbed) return; // the outer process: the inner one, in the client's namespace, did the work
  const codecs = await loadNodeCodecs();
  const origin = await startPlacedOrigin(testbed.origin);
  const cluster = await startCluster({
    proxies: FLEET,
    allowPrivateOrigins: true,
    readyTimeoutMs: 60_000,
    placement: { origo: testbed.origo, proxies: testbed.proxies },
    quic: opts.transport !== 'webrtc',
  });
  const host = createNodeHost();
  const benchStart = performance.now();
  // A mobile client: origo and proxy connections get longer to come up over a lossy access link,
  // and a download waits out a disconnection instead of failing (it resumes, resume in receiver.ts).
  const newClient = () =>
    new MutpClient(host, {
      origoUrl: cluster.clientUrl,
      codecs,
      insecureOrigo: true,
      transport: opts.transport,
      origoTimeoutMs: 30_000,
      // Short: an attempt begun in a disconnection is better abandoned and made again than waited for.
      connectTimeoutMs: 5_000,
      stallTimeoutMs: opts.stallTimeoutMs,
      trace: (line) =>
        process.stderr.write(`    [${((performance.now() - benchStart) / 1000).toFixed(1)} s] ${line}\n`),
    });
  let client: MutpClient | undefined;
  const schedule = loadProfile(testbed.profile).links(testbed.capsKBps, testbed.seed).access?.down.schedule;
  /** Until the access link next comes back from a disconnection (at once without --align or a schedule). */
  const aligned = async () => {
    const wait = opts.align && schedule ? nextReconnectionMs(schedule, Date.now() - testbed.startedAtMs) : undefined;
    if (wait === undefined) return;
    process.stderr.write(`  waiting ${(wait / 1000).toFixed(1)} s for the access link's next encounter\n`);
    await new Promise((resolve) => setTimeout(resolve, wait));
  };
  const rows: Row[] = [];
  let seedBase = (Date.now() % 1_000_000) * 1000;
  try {
    for (const n of SOURCES) {
      for (const way of WAYS) {
        const seeds = Array.from({ length: opts.segments }, () => ++seedBase);
        const segments: SegmentRef[] = seeds.map((s) => ({ url: `${origin.url}/object/${opts.segmentBytes}/${s}` }));
        const before = await originBytes(cluster);
        client?.close();
        client = newClient();
        await aligned();
        const abort = new AbortController();
        const timer = setTimeout(() => abort.abort(), opts.timeoutMs);
        let verified = true;
        let result: SeriesResult | undefined;
        let error: string | undefined;
        process.stderr.write(`bench:mobility ${way} N=${n}: ${opts.segments} × ${opts.segmentBytes} B\n`);
        const t0 = benchStart;
        let lastShown = 0;
        const drainAt = way !== 'http' ? opts.drainAt : undefined;
        let lastSources: string[] = [];
        let drained: string | undefined;
        try {
          result = await downloadSeries(client, host.clock, segments, {
            mode: way === 'http' ? 'http' : opts.coding,
            proxies: n,
            staging: way === 'staged',
            stagingConfig: { maxAhead: opts.maxAhead },
            ...(way === 'staged' ? { spread: SPREAD } : {}),
            attempts: opts.attempts,
            attemptTimeoutMs: opts.attemptTimeoutMs,
            signal: abort.signal,
            onProgress: (i, p) => {
              if (drainAt !== undefined && i === drainAt - 1 && drained === undefined && p.dof > 0) {
                drained = lastSources[0];
                process.stderr.write(`  draining ${drained} (SIGTERM) during segment ${drainAt}\n`);
                cluster.proxies.find((x) => x.name === drained)?.process.kill('SIGTERM');
              }
              const now = performance.now();
              if (now - lastShown < 2000) return;
              lastShown = now;
              process.stderr.write(
                `  ${String(i + 1).padStart(3)}/${opts.segments} at ${((now - t0) / 1000).toFixed(1)} s: ${p.dof}/${p.totalDof} DoF\n`,
              );
            },
            onStart: (i) =>
              process.stderr.write(
                `  ${String(i + 1).padStart(3)}/${opts.segments} starts at ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
              ),
            onRetry: (e, i) =>
              process.stderr.write(
                `  ${String(i + 1).padStart(3)}/${opts.segments} failed, trying again: ${String(e)}\n`,
              ),
            onSegment: (s, object, i) => {
              const ok = sha(object) === sha(syntheticObject(opts.segmentBytes, seeds[i]));
              verified &&= ok;
              lastSources = s.sources;
              process.stderr.write(
                `  ${String(i + 1).padStart(3)}/${opts.segments} ${s.durationMs.toFixed(0).padStart(6)} ms` +
                  `${s.staged ? ' staged' : ''}${s.retries > 0 ? ` retried ${s.retries}` : ''}${ok ? '' : ' CORRUPT'}\n`,
              );
            },
          });
        } catch (e) {
          error = e instanceof Error ? e.message : String(e);
          verified = false;
          process.stderr.write(`bench:mobility ${way} N=${n} failed: ${error}\n`);
        } finally {
          clearTimeout(timer);
        }
        if (drained !== undefined) {
          // Back for the next series (it exited once its transfers were done).
          await cluster.restartProxy(drained);
        }
        const after = await originBytes(cluster);
        const fetched = Object.keys(after).reduce((sum, id) => sum + after[id] - (before[id] ?? 0), 0);
        // Each proxy a segment was fetched from fetches it once, staged or on demand; beyond that is refetching.
        const once = result?.segments.reduce((sum, x) => sum + new Set(x.sources).size * x.bytes, 0) ?? 0;
        const lost = result?.segments.reduce((sum, s) => sum + s.lostBytes, 0) ?? 0;
        const segmentMs = result?.segments.map((s) => Math.round(s.durationMs)) ?? [];
        // Between a segment's end and the next one's start: the stager's work, a handoff.
        const pauses =
          result?.segments.slice(1).map((x, i) => {
            const before = result!.segments[i];
            return Math.round(x.startMs - (before.startMs + before.durationMs));
          }) ?? [];
        rows.push({
          profile: opts.profile,
          mode: way,
          transport: way === 'http' ? 'tcp' : opts.transport,
          coding: way === 'http' ? 'http' : opts.coding,
          sources: n,
          segments: opts.segments,
          segmentBytes: opts.segmentBytes,
          totalMs: result ? Math.round(result.totalMs) : null,
          segmentMs,
          medianSegmentMs: median(segmentMs),
          refetchedBytes: result ? Math.max(0, fetched - once) + lost : null,
          originBytes: fetched,
          retries: result?.segments.reduce((sum, s) => sum + s.retries, 0) ?? 0,
          handoffs: result?.handoffs ?? 0,
          stalls: null,
          verified: verified && result !== undefined && result.segments.length === opts.segments,
          staged: result?.segments.filter((s) => s.staged).length ?? 0,
          hints: result?.staging.ordersSent ?? 0,
          wastedHints: result?.staging.wasted ?? 0,
          maxAhead: way === 'staged' ? opts.maxAhead : null,
          neededAhead: way === 'staged' ? (result?.staging.neededAhead ?? null) : null,
          stagingLatencyMs: way === 'staged' ? (result?.staging.stagingLatencyMs ?? null) : null,
          spread: way === 'staged' ? (result?.staging.spread ?? null) : null,
          spreadMoves: way === 'staged' ? (result?.staging.spreadMoves ?? null) : null,
          ...(drainAt !== undefined
            ? {
                drainAt,
                drained: drained ?? null,
                goingAwayReplaced: result?.staging.goingAwayReplaced ?? 0,
                pauseAfterDrainMs: pauses[drainAt - 1] ?? null,
                medianPauseMs: median(pauses),
              }
            : {}),
          ...(error !== undefined ? { error } : {}),
        });
        const r = rows[rows.length - 1];
        process.stderr.write(
          `bench:mobility ${way} N=${n}: total ${r.totalMs ?? '-'} ms, median segment ${r.medianSegmentMs ?? '-'} ms, ` +
            `refetched ${r.refetchedBytes ?? '-'} B, staged ${r.staged}/${opts.segments}, verified ${r.verified}\n`,
        );
        if (r.drainAt !== undefined)
          process.stderr.write(
            `  drained ${r.drained ?? '-'} at segment ${r.drainAt}: ${r.handoffs} handoffs (${r.goingAwayReplaced} going away), ` +
              `pause after it ${r.pauseAfterDrainMs ?? '-'} ms (median ${r.medianPauseMs ?? '-'} ms), retries ${r.retries}\n`,
          );
      }
    }
  } finally {
    client?.close();
    await cluster.stop();
    await origin.close();
    releaseNodeRtc();
  }
  const ratio = (n: number, a: Way, b: Way) => {
    const x = rows.find((r) => r.sources === n && r.mode === a)?.totalMs;
    const y = rows.find((r) => r.sources === n && r.mode === b)?.totalMs;
    return x != null && y != null && y > 0 ? Math.round((x / y) * 1000) / 1000 : null;
  };
  const comparison = SOURCES.map((n) => ({
    sources: n,
    stagedOverUnstaged: ratio(n, 'staged', 'unstaged'),
    stagedOverHttp: ratio(n, 'staged', 'http'),
    unstagedOverHttp: ratio(n, 'unstaged', 'http'),
  }));
  for (const r of rows) {
    console.log(
      `${r.profile} ${r.mode.padEnd(8)} N=${r.sources}: ${r.totalMs === null ? 'failed' : `${(r.totalMs / 1000).toFixed(1)} s`}` +
        `, median segment ${r.medianSegmentMs ?? '-'} ms, refetched ${r.refetchedBytes ?? '-'} B, retries ${r.retries}, ` +
        `staged ${r.staged}/${r.segments}, verified ${r.verified}${r.error ? ` (${r.error})` : ''}`,
    );
  }
  for (const c of comparison)
    console.log(
      `N=${c.sources}: staged/unstaged ${c.stagedOverUnstaged ?? '-'}, staged/http ${c.stagedOverHttp ?? '-'}, unstaged/http ${c.unstagedOverHttp ?? '-'}`,
    );
  if (opts.json) console.log(JSON.stringify({ rows, comparison }));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
