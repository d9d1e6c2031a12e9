/**
 * `npm run bench:origo-outage -- [--runtime node|chromium|firefox] [--outage-s 60] [--period-ms 1000]
 * [--segment-bytes 262144] [--origo-timeout-ms n]`:
 * downloads outlive origo (issue 34). Real processes on loopback (origo, four proxies, the test
 * origin) and the Node client playing a segment series through one proxy set (PlaybackSession, as
 * `mutp playlist` and the extension's loader do), one segment every period:
 *
 * 1. `before`: origo up (the baseline of the same run);
 * 2. `outage`: origo SIGKILLed while the links are up, for `--outage-s`;
 * 3. `after`: origo started again on the same port; at once the client asks it for a new set
 *    (what a player starting another stream does), then the series goes on.
 *
 * A segment whose download fails falls back to the origin (as the extension's page would):
 * counted as failed and as a fallback, and as `noProxies` when the failure was `no-proxies`.
 * Every segment is checked byte-exact. The last stdout line is one JSON document: per phase the
 * counts and the median segment time, and the outage's and the restart's medians over the
 * baseline's. e2e/test/origo-outage.test.ts runs the same scenario, short.
 *
 * `--runtime chromium|firefox [--stream long/hls-ts/index.m3u8] [--buffer-s 12]`: the same phases
 * with a real browser and the built extension playing an HLS stream (origo-outage-browser.ts);
 * its rows count segments, fallbacks to the network, failures, stalls and `no-proxies` answers,
 * with a page opened at origo's restart as a row of its own.
 */
import { createHash } from 'node:crypto';
import { Command, Option } from 'commander';
import { ClientError, MutpClient, PlaybackSession, systemClock } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { waitFor } from '@mutp/testing/wait';
import { Cluster, startCluster } from './cluster';
import { Origin, startOrigin, syntheticObject } from './origin';
import { BrowserOutageResult, BrowserRuntime, runBrowserOutage } from './origo-outage-browser';

export type Phase = 'before' | 'outage' | 'after';

export interface PhaseRow {
  phase: Phase;
  segments: number;
  failed: number;
  fallbacks: number;
  noProxies: number;
  /** Segments whose bytes were not the origin's (none expected). */
  corrupt: number;
  medianSegmentMs: number | null;
  /** The failures' messages (the first few). */
  errors: string[];
}

export interface OutageOptions {
  beforeMs: number;
  outageMs: number;
  afterMs: number;
  /** A segment is asked for every this many ms (sooner when one took longer). */
  periodMs: number;
  segmentBytes: number;
  proxies: number;
  /** Printed as the run goes (the bench); the test keeps it for failures. */
  log?: (line: string) => void;
  /** The client's connection events (MutpClient's trace). */
  trace?: (line: string) => void;
  /**
   * The client's origo limit (default 10 s), which bounds how long the new set asked for after
   * the restart waits for proxies: they re-register on their own reconnection back-off (up to
   * 30 s apart), not origo's.
   */
  origoTimeoutMs?: number;
  /** Waits (up to 60 s) for every proxy to register again after the restart, and reports when. */
  measureReregistration?: boolean;
}

export interface OutageResult {
  rows: PhaseRow[];
  /** The new set asked for at once after the restart: how many proxies origo offered, or its error. */
  restartOffer: { offered: number; waitedMs: number; error?: string };
  /** From origo's restart (listening) to the end of the first segment started after it (NaN: none). */
  restartMs: number;
  /**
   * From origo's restart (listening) until every proxy registered again (null: not measured, or
   * not within 60 s): their own reconnection back-off, which grows while origo is down.
   */
  reregisteredMs: number | null;
}

const MAX_ERRORS = 5;

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts origo, the proxies and the origin; `run` gets them; everything is stopped after. */
export async function withDeployment<T>(
  proxies: number,
  run: (cluster: Cluster, origin: Origin) => Promise<T>,
): Promise<T> {
  const origin = await startOrigin();
  let cluster: Cluster | undefined;
  try {
    cluster = await startCluster({
      proxies: Array.from({ length: proxies }, (_, i) => ({
        name: `p${i}`,
        uploadKBps: 0,
        extraArgs: ['--origin-timeout-ms', '2000'],
      })),
      allowPrivateOrigins: true,
      // A loaded machine (other work beside the bench) may take more than the default 30 s.
      readyTimeoutMs: 90_000,
    });
    return await run(cluster, origin);
  } finally {
    await cluster?.stop();
    await origin.close();
  }
}

/** The scenario (see the top) on a running deployment. */
export async function runOutage(cluster: Cluster, origin: Origin, o: OutageOptions): Promise<OutageResult> {
  const codecs = await loadNodeCodecs();
  const client = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs,
    trace: o.trace,
    ...(o.origoTimeoutMs !== undefined ? { origoTimeoutMs: o.origoTimeoutMs } : {}),
  });
  const session = new PlaybackSession(client, systemClock, { mode: 'rlnc', proxies: o.proxies, staging: false });
  const rows = new Map<Phase, PhaseRow & { times: number[] }>();
  let phase: Phase = 'before';
  let seed = 0;
  let restartedAt = 0;
  let restartMs = NaN;

  /** One segment: through the set, else (counted) from the origin. */
  const segment = async () => {
    const at = phase;
    const row = rows.get(at) ?? {
      phase: at,
      segments: 0,
      failed: 0,
      fallbacks: 0,
      noProxies: 0,
      corrupt: 0,
      medianSegmentMs: null,
      errors: [],
      times: [],
    };
    rows.set(at, row);
    const url = `${origin.url}/object/${o.segmentBytes}/${++seed}`;
    const expected = sha(syntheticObject(o.segmentBytes, seed));
    const started = Date.now();
    row.segments++;
    try {
      const { result } = await session.fetch({ url });
      row.times.push(Date.now() - started);
      o.log?.(`${at}: segment ${seed} in ${Date.now() - started} ms from ${result.sources.length} proxies`);
      if (sha(result.object) !== expected) row.corrupt++;
      if (restartedAt > 0 && started >= restartedAt && Number.isNaN(restartMs)) restartMs = Date.now() - restartedAt;
    } catch (e) {
      row.failed++;
      if (e instanceof ClientError && e.code === 'no-proxies') row.noProxies++;
      if (row.errors.length < MAX_ERRORS) row.errors.push(e instanceof Error ? e.message : String(e));
      o.log?.(`${at}: segment ${seed} failed (${String(e)}), from the origin instead`);
      const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
      row.fallbacks++;
      if (sha(bytes) !== expected) row.corrupt++;
    }
  };

  /** Segments, one per period, until `ms` have passed. */
  const series = async (ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const started = Date.now();
      await segment();
      await sleep(Math.max(0, o.periodMs - (Date.now() - started)));
    }
  };

  let restartOffer: OutageResult['restartOffer'] = { offered: 0, waitedMs: 0 };
  let reregisteredMs: number | null = null;
  try {
    await series(o.beforeMs);
    phase = 'outage';
    o.log?.('origo killed (SIGKILL)');
    cluster.killOrigo(0);
    await series(o.outageMs);
    phase = 'after';
    // The restart runs beside the series: segments go on while origo starts.
    const restarted = cluster.restartOrigo().then(async () => {
      restartedAt = Date.now();
      o.log?.('origo listening again: asking it for a new set at once');
      try {
        const offered = await client.chooseProxies(o.proxies, 'rlnc');
        restartOffer = { offered: offered.length, waitedMs: Date.now() - restartedAt };
      } catch (e) {
        restartOffer = { offered: 0, waitedMs: Date.now() - restartedAt, error: String(e) };
        if (e instanceof ClientError && e.code === 'no-proxies') rows.get('after')!.noProxies++;
      }
      if (!o.measureReregistration) return;
      reregisteredMs = await waitFor(
        'every proxy registered again',
        async () => ((await cluster.listProxies()).length >= o.proxies ? Date.now() - restartedAt : undefined),
        60_000,
      ).catch(() => null);
    });
    await series(o.afterMs);
    await restarted;
  } finally {
    session.close();
    client.close();
    releaseNodeRtc();
  }
  const out = (['before', 'outage', 'after'] as const).flatMap((p) => {
    const r = rows.get(p);
    if (!r) return [];
    const { times, ...row } = r;
    return [{ ...row, medianSegmentMs: median(times) }];
  });
  return { rows: out, restartOffer, restartMs, reregisteredMs };
}

function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const RUNTIMES = ['node', 'chromium', 'firefox'] as const;

interface BenchOptions {
  runtime: (typeof RUNTIMES)[number];
  outageS: number;
  beforeS: number;
  afterS?: number;
  periodMs: number;
  segmentBytes: number;
  proxies: number;
  origoTimeoutMs?: number;
  stream: string;
  restartStream: string;
  bufferS: number;
  restartSegments: number;
}

const timestamped = (line: string) => console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);

async function main(): Promise<void> {
  const opts = new Command()
    .name('bench:origo-outage')
    .description(
      'A segment series (the Node client, or a browser with the extension) while origo is killed and restarted.',
    )
    .addOption(new Option('--runtime <r>', 'who downloads').choices(RUNTIMES).default('node'))
    .option('--outage-s <s>', 'how long origo stays down', (v) => Number(v), 60)
    .option('--before-s <s>', 'the baseline phase, origo up', (v) => Number(v), 10)
    .option('--after-s <s>', 'after the restart (default 10; 20 in a browser)', (v) => Number(v))
    .option('--period-ms <ms>', 'node: one segment every this many ms', (v) => Number(v), 1000)
    .option('--segment-bytes <n>', 'node: bytes per segment', (v) => Number(v), 256 * 1024)
    .option('--proxies <n>', 'proxies in the set', (v) => Number(v), 4)
    .option('--origo-timeout-ms <ms>', "node: the client's origo limit (default the client's own, 10 s)", (v) =>
      Number(v),
    )
    .option('--stream <path>', 'browser: the HLS playlist played (on the test origin)', 'long/hls-ts/index.m3u8')
    .option(
      '--restart-stream <path>',
      "browser: the page opened at origo's restart plays this",
      'low/hls-fmp4/index.m3u8',
    )
    .option('--buffer-s <s>', "browser: hls.js's buffer goal (maxBufferLength)", (v) => Number(v), 12)
    .option('--restart-segments <n>', 'browser: media requests the restart page waits for', (v) => Number(v), 4)
    .option('--json', 'accepted for symmetry: the last line is JSON either way')
    .parse()
    .opts<BenchOptions>();
  if (opts.runtime === 'node') await nodeBench(opts);
  else await browserBench(opts, opts.runtime);
}

async function nodeBench(opts: BenchOptions): Promise<void> {
  const result = await withDeployment(opts.proxies, (cluster, origin) =>
    runOutage(cluster, origin, {
      beforeMs: opts.beforeS * 1000,
      outageMs: opts.outageS * 1000,
      afterMs: (opts.afterS ?? 10) * 1000,
      periodMs: opts.periodMs,
      segmentBytes: opts.segmentBytes,
      proxies: opts.proxies,
      ...(opts.origoTimeoutMs !== undefined ? { origoTimeoutMs: opts.origoTimeoutMs } : {}),
      measureReregistration: true,
      log: timestamped,
      ...(process.env.MUTP_TRACE ? { trace: (line: string) => console.log(`  trace ${line}`) } : {}),
    }),
  );
  const baseline = result.rows.find((r) => r.phase === 'before')?.medianSegmentMs ?? null;
  const ratio = (p: Phase) => {
    const m = result.rows.find((r) => r.phase === p)?.medianSegmentMs ?? null;
    return m !== null && baseline ? Math.round((m / baseline) * 1000) / 1000 : null;
  };
  for (const r of result.rows) {
    console.log(
      `${r.phase.padEnd(6)} segments ${r.segments}, failed ${r.failed}, fallbacks ${r.fallbacks}, ` +
        `no-proxies ${r.noProxies}, corrupt ${r.corrupt}, median ${r.medianSegmentMs ?? '-'} ms`,
    );
  }
  console.log(
    `after the restart: a new set of ${result.restartOffer.offered} offered in ${result.restartOffer.waitedMs} ms` +
      `${result.restartOffer.error ? ` (${result.restartOffer.error})` : ''}; ` +
      `every proxy registered again after ${result.reregisteredMs ?? '(not within 60 s)'} ms`,
  );
  const total = (k: 'failed' | 'fallbacks' | 'noProxies') =>
    result.rows.filter((r) => r.phase !== 'before').reduce((sum, r) => sum + r[k], 0);
  console.log(
    JSON.stringify({
      outageS: opts.outageS,
      rows: result.rows,
      restartOffer: result.restartOffer,
      restartMs: result.restartMs,
      reregisteredMs: result.reregisteredMs,
      // Outage and restart against origo up, same run: counts (target 0) and median ratios.
      comparison: {
        failed: total('failed'),
        fallbacks: total('fallbacks'),
        noProxies: total('noProxies'),
        outageMedianOverBaseline: ratio('outage'),
        afterMedianOverBaseline: ratio('after'),
      },
    }),
  );
}

async function browserBench(opts: BenchOptions, runtime: BrowserRuntime): Promise<void> {
  const result: BrowserOutageResult = await withDeployment(opts.proxies, (cluster, origin) =>
    runBrowserOutage(cluster, origin, {
      runtime,
      stream: opts.stream,
      restartStream: opts.restartStream,
      beforeMs: opts.beforeS * 1000,
      outageMs: opts.outageS * 1000,
      afterMs: (opts.afterS ?? 20) * 1000,
      bufferS: opts.bufferS,
      proxies: opts.proxies,
      restartSegments: opts.restartSegments,
      log: timestamped,
    }),
  );
  console.log(
    `restart page: first segment served ${result.restartPageFirstServedMs ?? '(none)'} ms after origo listened; ` +
      `every proxy registered again after ${result.reregisteredMs ?? '(not within 60 s)'} ms`,
  );
  const total = (k: 'failed' | 'fallbacks' | 'noProxies' | 'stalls' | 'corrupt') =>
    result.rows.filter((r) => r.phase !== 'before').reduce((sum, r) => sum + r[k], 0);
  const mean = (p: string) => result.rows.find((r) => r.phase === p)?.meanServedMs ?? null;
  const baseline = mean('before');
  const ratio = (p: string) => {
    const m = mean(p);
    return m !== null && baseline ? Math.round((m / baseline) * 1000) / 1000 : null;
  };
  console.log(
    JSON.stringify({
      runtime,
      outageS: opts.outageS,
      stream: opts.stream,
      bufferS: opts.bufferS,
      rows: result.rows,
      restartPageFirstServedMs: result.restartPageFirstServedMs,
      reregisteredMs: result.reregisteredMs,
      // Outage, after and the restart page against origo up, same run: counts (target 0) and mean ratios.
      comparison: {
        failed: total('failed'),
        fallbacks: total('fallbacks'),
        noProxies: total('noProxies'),
        stalls: total('stalls'),
        corrupt: total('corrupt'),
        outageMeanServedOverBaseline: ratio('outage'),
        afterMeanServedOverBaseline: ratio('after'),
      },
    }),
  );
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
}
