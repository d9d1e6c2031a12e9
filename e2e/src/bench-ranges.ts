/**
 * `npm run bench:ranges -- [--repeats 3] [--large]`: what byte-range addressing costs a player
 * through the extension (issue 14), on this machine, in one run: Chromium with the built
 * extension, rlnc from four shaped proxies (2 × 896 KB/s, 2 × 1792 KB/s, as the playback tests),
 * the local origin, the "high" content (about 3.5 Mbit/s, 40 s):
 *
 * - (a) per-segment URLs: shaka-player on the per-segment DASH (high/dash);
 * - (b) the hand-written MSE range player on one fragmented MP4 (high/fmp4);
 * - (c) shaka-player on single-file SegmentBase DASH (high/dash-sb);
 *
 * each played `--play-seconds` (15) `--repeats` times, interleaved, each play under a URL no cache
 * has seen (the origin's /fresh/<tag>/ alias: the proxies and the extension start cold, so every
 * play pays its origin fetches). Per play: start-up (page script to the first `playing`; and
 * first media request to first media appended), stalls, bytes the page got (all byte-exact
 * against the file, checked here), the bytes the proxies fetched from the origin (counted at the
 * origin), and the hook's counters. Figures: median start-up of each, b/a and c/a (target
 * ≤ 1.3), origin bytes per page byte (all proxies together, and per proxy: with rlnc each of the
 * N proxies must hold the whole object or range it encodes, so N is the floor of the former;
 * target per proxy ≤ 1.05).
 *
 * `--large` adds a ~2 GB fragmented MP4 (e2e/media/generate.sh --large: the high fMP4 looped with
 * -c copy) played by the MSE page at `--large-rate` (4) with `--large-seeks` (6) seeks spread over
 * the file, each played `--large-seconds` (8) of media; meanwhile the peak RSS of the page's
 * renderer, the extension's process (its downloader frame and service worker) and each proxy
 * process is sampled (/proc/<pid>/status VmRSS every 250 ms, VmHWM at the end).
 *
 * The last line of stdout is one JSON document with every figure.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import type { Page } from 'puppeteer-core';
import { quantile } from './box-plot';
import {
  ChromiumSession,
  Counters,
  ensureExtensionBuilt,
  launchChromium,
  playerState,
  totalFallbacks,
  waitFor,
} from './browser';
import { Cluster, mixedFleetOfFour, startCluster } from './cluster';
import { MEDIA_DIR, Origin, startOrigin } from './origin';
import { PageKind, PlayerPages, startPlayerPages } from './player-pages';
import {
  browserMediaRequests,
  byteMismatches,
  pauseAndSettle,
  proxyOriginBytes,
  RangePlayerState,
} from './range-pages';

const program = new Command()
  .name('bench:ranges')
  .description('Start-up and origin bytes of byte-range players through the extension, against per-segment URLs.')
  .option('--repeats <n>', 'plays of each page (0: only the --large play)', (v) => Number(v), 3)
  .option('--play-seconds <s>', 'seconds of media each play reaches', (v) => Number(v), 15)
  .option('--large', 'also play a ~2 GB fragmented MP4 with the MSE page and sample memory')
  .option('--large-seeks <n>', 'seeks spread over the large file', (v) => Number(v), 6)
  .option('--large-rate <r>', 'playbackRate of the large play', (v) => Number(v), 4)
  .option('--large-seconds <s>', 'seconds of media played after each seek', (v) => Number(v), 8)
  .parse();
const opts = program.opts<{
  repeats: number;
  playSeconds: number;
  large?: boolean;
  largeSeeks: number;
  largeRate: number;
  largeSeconds: number;
}>();

const PROXIES = mixedFleetOfFour('p');

interface Subject {
  key: 'perSegment' | 'mse' | 'shakaSegmentBase';
  label: string;
  kind: PageKind;
  src: string;
}

const SUBJECTS: Subject[] = [
  { key: 'perSegment', label: '(a) per-segment DASH, shaka', kind: 'shaka', src: 'high/dash/manifest.mpd' },
  { key: 'mse', label: '(b) MSE range player, one fMP4', kind: 'mse', src: 'high/fmp4/stream.mp4' },
  { key: 'shakaSegmentBase', label: '(c) SegmentBase DASH, shaka', kind: 'shaka', src: 'high/dash-sb/manifest.mpd' },
];

const log = (s: string) => process.stderr.write(`bench:ranges ${s}\n`);
const median = (xs: number[]) => {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return v.length ? quantile(v, 0.5) : NaN;
};
const round = (x: number, d = 3) => (Number.isFinite(x) ? Math.round(x * 10 ** d) / 10 ** d : null);

interface PlayFigures {
  startupMs: number;
  firstRequestToAppendMs: number | null;
  stalls: number;
  pageBytes: number;
  responses: number;
  originBytes: number;
  originRequests: number;
  originBytesPerPageByte: number;
  counters: Counters;
  mismatches: string[];
  browserMediaRequests: number;
  wallMs: number;
}

/** Opens a page and waits until `done` says so (or a player error), returning its last state. */
async function openAndWait(
  chromium: ChromiumSession,
  url: string,
  what: string,
  done: (s: RangePlayerState) => boolean,
  timeoutMs: number,
): Promise<{ page: Page; state: RangePlayerState; counters?: Counters }> {
  const page = await chromium.browser.newPage({ type: 'window' });
  const pageErrors: string[] = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.goto(url, { waitUntil: 'load' });
  let state: RangePlayerState | undefined;
  await waitFor(
    what,
    async () => {
      state = (await playerState(page)) as RangePlayerState;
      if (state.errors.length > 0 || pageErrors.length > 0)
        throw new Error(`player error: ${[...state.errors, ...pageErrors].join('; ')}`);
      return done(state) ? true : undefined;
    },
    timeoutMs,
    250,
  ).catch(async (e: unknown) => {
    await page.close();
    throw new Error(
      `${String(e)}; currentTime ${state?.currentTime}, events ${JSON.stringify(state?.events.slice(-8))}`,
    );
  });
  const settled = await pauseAndSettle(page);
  return { page, ...settled };
}

function figures(state: RangePlayerState, counters: Counters | undefined, originLog: Origin['log'], wallMs: number) {
  const playing = state.events.find(([name]) => name === 'playing');
  const pageBytes = state.loaded.reduce((a, l) => a + l.bytes, 0);
  const fetched = proxyOriginBytes(originLog);
  return {
    startupMs: playing ? playing[2] : NaN,
    firstRequestToAppendMs:
      state.firstRequestAt !== null && state.firstAppendAt !== null ? state.firstAppendAt - state.firstRequestAt : null,
    stalls: state.stalls,
    pageBytes,
    responses: state.loaded.length,
    originBytes: fetched.bytes,
    originRequests: fetched.requests,
    originBytesPerPageByte: fetched.bytes / Math.max(1, pageBytes),
    counters: counters ?? ({} as Counters),
    mismatches: byteMismatches(state, MEDIA_DIR),
    browserMediaRequests: browserMediaRequests(originLog).length,
    wallMs,
  };
}

async function playSubject(
  chromium: ChromiumSession,
  pages: PlayerPages,
  origin: Origin,
  s: Subject,
  tag: string,
): Promise<PlayFigures> {
  const from = origin.log.length;
  const t0 = Date.now();
  // The MSE page fetches at once: it waits for the hook's settings first (included in its start-up).
  const url = pages.playerUrl(s.kind, `${origin.url}/fresh/${tag}/${s.src}`, s.kind === 'mse' ? { afterHook: 1 } : {});
  const { page, state, counters } = await openAndWait(
    chromium,
    url,
    `${s.label} to play ${opts.playSeconds} s`,
    (st) => st.currentTime >= opts.playSeconds,
    120_000,
  );
  await page.close();
  await new Promise((r) => setTimeout(r, 300)); // the proxies finish what they were sending
  return figures(state, counters, origin.log.slice(from), Date.now() - t0);
}

// ------------------------------------------------------------------- memory of the processes

interface Memory {
  /** RSS when sampling started (before the large play), the largest sample, VmHWM at the end. */
  startRssKB: number;
  peakRssKB: number;
  hwmKB: number;
}

function procStatus(pid: number): { rssKB: number; hwmKB: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
    return { rssKB: kb('VmRSS'), hwmKB: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

/** Every process below `root` (Chromium's browser process), with its command line. */
function descendants(root: number): { pid: number; cmdline: string }[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone
    }
  }
  const out: { pid: number; cmdline: string }[] = [];
  const isBelow = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === root) return true;
    return false;
  };
  for (const pid of parent.keys()) {
    if (pid !== root && !isBelow(pid)) continue;
    try {
      out.push({ pid, cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ') });
    } catch {
      // gone
    }
  }
  return out;
}

/** Chromium's processes by role: renderers of web pages, the extension's renderer, the rest by --type. */
function chromiumRole(cmdline: string): string {
  const type = /--type=([\w-]+)/.exec(cmdline)?.[1] ?? 'browser';
  if (type !== 'renderer') return type;
  return cmdline.includes('--extension-process') ? 'extension' : 'renderer';
}

/** Samples VmRSS of Chromium's processes and the proxies until stopped; keeps each process's peak. */
function memorySampler(chromium: ChromiumSession, cluster: Cluster) {
  const browserPid = chromium.browser.process()?.pid;
  const peaks = new Map<number, { role: string; startRssKB: number; peakRssKB: number }>();
  const sample = () => {
    const procs = browserPid ? descendants(browserPid).map((p) => ({ pid: p.pid, role: chromiumRole(p.cmdline) })) : [];
    for (const p of cluster.proxies) if (p.process.pid) procs.push({ pid: p.process.pid, role: `proxy ${p.name}` });
    for (const p of procs) {
      const s = procStatus(p.pid);
      if (!s) continue;
      const e = peaks.get(p.pid) ?? { role: p.role, startRssKB: s.rssKB, peakRssKB: 0 };
      e.peakRssKB = Math.max(e.peakRssKB, s.rssKB);
      peaks.set(p.pid, e);
    }
  };
  sample();
  const timer = setInterval(sample, 250);
  return {
    /** Peak RSS and VmHWM per role (the largest process of a role: one page renderer, one extension process). */
    stop(): Record<string, Memory & { processes: number }> {
      clearInterval(timer);
      sample();
      const byRole: Record<string, Memory & { processes: number }> = {};
      for (const [pid, e] of peaks) {
        const hwm = procStatus(pid)?.hwmKB ?? NaN;
        const r = (byRole[e.role] ??= { startRssKB: 0, peakRssKB: 0, hwmKB: 0, processes: 0 });
        r.processes++;
        if (e.peakRssKB > r.peakRssKB) r.startRssKB = e.startRssKB;
        r.peakRssKB = Math.max(r.peakRssKB, e.peakRssKB);
        if (Number.isFinite(hwm)) r.hwmKB = Math.max(r.hwmKB, hwm);
      }
      return byRole;
    },
  };
}

// ------------------------------------------------------------------------------ the large file

async function playLarge(chromium: ChromiumSession, pages: PlayerPages, origin: Origin, cluster: Cluster) {
  const src = 'large/stream.mp4';
  const from = origin.log.length;
  const t0 = Date.now();
  const sampler = memorySampler(chromium, cluster);
  const url = pages.playerUrl('mse', `${origin.url}/${src}`, { rate: opts.largeRate, afterHook: 1 });
  let memory: ReturnType<ReturnType<typeof memorySampler>['stop']> | undefined;
  let page: Page | undefined;
  const seeks: { to: number; reachedMs: number | null }[] = [];
  let state: RangePlayerState | undefined;
  let counters: Counters | undefined;
  let failure: string | undefined;
  try {
    const opened = await openAndWait(
      chromium,
      url,
      `the large file to play ${opts.largeSeconds} s`,
      (s) => s.currentTime >= opts.largeSeconds,
      120_000,
    );
    page = opened.page;
    // openAndWait paused it to read a settled state: play on.
    await page.evaluate(async () => {
      const doc = (globalThis as unknown as { document: { querySelector(s: string): { play(): Promise<void> } } })
        .document;
      await doc.querySelector('video').play();
    });
    const duration = opened.state.duration;
    log(
      `large: ${Math.round(duration)} s of media, ${opened.state.fragments} fragments, playing at ${opts.largeRate}x`,
    );
    for (let k = 1; k <= opts.largeSeeks; k++) {
      const to = Math.floor((duration * k) / (opts.largeSeeks + 1));
      const seekAt = Date.now();
      await page.evaluate((t) => {
        const doc = (globalThis as unknown as { document: { getElementById(id: string): { currentTime: number } } })
          .document;
        doc.getElementById('v').currentTime = t;
      }, to);
      const reached = await waitFor(
        `the large file to play ${opts.largeSeconds} s after a seek to ${to} s`,
        async () => {
          const s = (await playerState(page!)) as RangePlayerState;
          if (s.errors.length) throw new Error(s.errors.join('; '));
          return s.currentTime >= to + opts.largeSeconds ? Date.now() - seekAt : undefined;
        },
        90_000,
        250,
      ).catch((e: unknown) => {
        log(`large: ${String(e)}`);
        return null;
      });
      seeks.push({ to, reachedMs: reached });
      log(`large: seek ${k}/${opts.largeSeeks} to ${to} s: ${reached === null ? 'NOT reached' : `${reached} ms`}`);
    }
    ({ state, counters } = await pauseAndSettle(page));
  } catch (e) {
    failure = String(e);
    log(`large: ${failure}`);
  } finally {
    memory = sampler.stop();
    await page?.close();
  }
  const f = state ? figures(state, counters, origin.log.slice(from), Date.now() - t0) : undefined;
  const mb = (kb?: number) => (kb === undefined ? null : round(kb / 1024, 1));
  const proxies = Object.entries(memory)
    .filter(([role]) => role.startsWith('proxy '))
    .map(([role, m]) => ({
      proxy: role.slice(6),
      startRssMB: mb(m.startRssKB),
      peakRssMB: mb(m.peakRssKB),
      hwmMB: mb(m.hwmKB),
    }));
  return {
    file: src,
    bytes: f ? state?.completeLength : null,
    rate: opts.largeRate,
    seeks,
    failure: failure ?? null,
    stalls: f?.stalls ?? null,
    /** Media time and page time (ms) of every `waiting` and `seeking` event, to tell seek waits from stalls. */
    waitingEvents:
      state?.events.filter(([name]) => name === 'waiting' || name === 'seeking' || name === 'seeked') ?? [],
    pageBytes: f?.pageBytes ?? null,
    appendedBytes: state?.appendedBytes ?? null,
    maxBufferedSeconds: round(state?.maxBufferedSeconds ?? NaN, 1),
    removedSeconds: round(state?.removedSeconds ?? NaN, 1),
    originBytes: f?.originBytes ?? null,
    originBytesPerPageByte: f ? round(f.originBytesPerPageByte) : null,
    originBytesPerPageBytePerProxy: f ? round(f.originBytesPerPageByte / PROXIES.length) : null,
    mismatches: f?.mismatches.length ?? null,
    browserMediaRequests: f?.browserMediaRequests ?? null,
    counters: f?.counters ?? null,
    peakRssMB: {
      pageRenderer: mb(memory.renderer?.peakRssKB),
      extensionProcess: mb(memory.extension?.peakRssKB),
      proxies,
    },
    startRssMB: {
      pageRenderer: mb(memory.renderer?.startRssKB),
      extensionProcess: mb(memory.extension?.startRssKB),
    },
    hwmMB: {
      pageRenderer: mb(memory.renderer?.hwmKB),
      extensionProcess: mb(memory.extension?.hwmKB),
    },
    allChromiumProcesses: Object.fromEntries(
      Object.entries(memory)
        .filter(([role]) => !role.startsWith('proxy '))
        .map(([role, m]) => [
          role,
          { processes: m.processes, startRssMB: mb(m.startRssKB), peakRssMB: mb(m.peakRssKB), hwmMB: mb(m.hwmKB) },
        ]),
    ),
    wallMs: Date.now() - t0,
  };
}

// --------------------------------------------------------------------------------------- main

interface SubjectSummary {
  medianStartupMs: number | null;
  medianFirstRequestToAppendMs: number | null;
  stalls: number;
  originBytesPerPageBytePerProxy: number | null;
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const generateStarted = Date.now();
  execFileSync('bash', [join(__dirname, '..', 'media', 'generate.sh'), ...(opts.large ? ['--large'] : [])], {
    stdio: ['ignore', process.stderr, process.stderr],
  });
  const generateMs = Date.now() - generateStarted;
  ensureExtensionBuilt();
  const origin = await startOrigin();
  const pages = await startPlayerPages();
  const cluster = await startCluster({ proxies: PROXIES, allowPrivateOrigins: true, readyTimeoutMs: 60_000 });
  const chromium = await launchChromium();
  const plays: Record<Subject['key'], PlayFigures[]> = { perSegment: [], mse: [], shakaSegmentBase: [] };
  let large: Awaited<ReturnType<typeof playLarge>> | undefined;
  try {
    await chromium.setSettings({ origoUrl: cluster.clientUrl, mode: 'rlnc', proxies: 4, exposeCounters: true });
    const runTag = Date.now().toString(36);
    for (let r = 0; r < opts.repeats; r++) {
      // Interleaved, so a slow moment of the machine does not land on one subject only.
      for (const s of SUBJECTS) {
        const f = await playSubject(chromium, pages, origin, s, `${runTag}-${s.key}-${r}`);
        plays[s.key].push(f);
        log(
          `${s.label} play ${r + 1}/${opts.repeats}: start-up ${f.startupMs} ms (first request to first append ` +
            `${f.firstRequestToAppendMs} ms), stalls ${f.stalls}, ${(f.pageBytes / 1e6).toFixed(1)} MB to the page, ` +
            `${(f.originBytes / 1e6).toFixed(1)} MB from the origin, served ${f.counters.served}/${f.counters.media}, ` +
            `fallbacks ${JSON.stringify(f.counters.fallbacks)}, mismatches ${f.mismatches.length}`,
        );
      }
    }
    if (opts.large) large = await playLarge(chromium, pages, origin, cluster);
  } finally {
    await chromium.close();
    await cluster.stop();
    await pages.close();
    await origin.close();
  }

  const summary = Object.fromEntries(
    SUBJECTS.map((s) => {
      const ps = plays[s.key];
      const pageBytes = ps.reduce((a, p) => a + p.pageBytes, 0);
      const originBytes = ps.reduce((a, p) => a + p.originBytes, 0);
      return [
        s.key,
        {
          label: s.label,
          src: s.src,
          startupMs: ps.map((p) => p.startupMs),
          medianStartupMs: round(median(ps.map((p) => p.startupMs)), 0),
          medianFirstRequestToAppendMs: round(median(ps.map((p) => p.firstRequestToAppendMs ?? NaN)), 0),
          stalls: ps.reduce((a, p) => a + p.stalls, 0),
          pageBytes,
          originBytes,
          originRequests: ps.reduce((a, p) => a + p.originRequests, 0),
          originBytesPerPageByte: pageBytes ? round(originBytes / pageBytes) : null,
          originBytesPerPageBytePerProxy: pageBytes ? round(originBytes / pageBytes / PROXIES.length) : null,
          served: ps.reduce((a, p) => a + p.counters.served, 0),
          media: ps.reduce((a, p) => a + p.counters.media, 0),
          fallbacks: ps.reduce((a, p) => a + totalFallbacks(p.counters), 0),
          fallbackReasons: ps.reduce<Record<string, number>>((acc, p) => {
            for (const [k, v] of Object.entries(p.counters.fallbacks)) acc[k] = (acc[k] ?? 0) + v;
            return acc;
          }, {}),
          byteMismatches: ps.flatMap((p) => p.mismatches).slice(0, 5),
          browserMediaRequests: ps.reduce((a, p) => a + p.browserMediaRequests, 0),
        },
      ];
    }),
  ) as unknown as Record<Subject['key'], SubjectSummary>;
  const a = summary.perSegment.medianStartupMs ?? NaN;
  const ratios = {
    mseVsPerSegment: round((summary.mse.medianStartupMs ?? NaN) / a, 2),
    shakaSegmentBaseVsPerSegment: round((summary.shakaSegmentBase.medianStartupMs ?? NaN) / a, 2),
  };

  console.log(
    'page                                 median start-up  first req→append  stalls  origin B / page B / proxy',
  );
  for (const s of SUBJECTS) {
    const x = summary[s.key];
    console.log(
      `${s.label.padEnd(36)} ${`${x.medianStartupMs} ms`.padStart(15)}  ${`${x.medianFirstRequestToAppendMs} ms`.padStart(16)}  ` +
        `${String(x.stalls).padStart(6)}  ${String(x.originBytesPerPageBytePerProxy).padStart(10)}`,
    );
  }
  const met = (v: number | null, limit: number) => (v !== null && v <= limit ? 'met' : 'NOT met');
  console.log(
    `target start-up b/a <= 1.3: ${ratios.mseVsPerSegment} (${met(ratios.mseVsPerSegment, 1.3)}); ` +
      `c/a <= 1.3: ${ratios.shakaSegmentBaseVsPerSegment} (${met(ratios.shakaSegmentBaseVsPerSegment, 1.3)})`,
  );
  for (const key of ['mse', 'shakaSegmentBase'] as const) {
    const v = summary[key].originBytesPerPageBytePerProxy;
    console.log(`target origin bytes per page byte per proxy <= 1.05, ${key}: ${v} (${met(v, 1.05)})`);
  }
  if (large) {
    console.log(
      `large: ${large.bytes} B file, ${large.seeks.filter((s) => s.reachedMs !== null).length}/${large.seeks.length} seeks played, ` +
        `stalls ${large.stalls}, page got ${large.pageBytes} B, served ${large.counters?.served}/${large.counters?.media} ` +
        `fallbacks ${JSON.stringify(large.counters?.fallbacks)}; peak RSS MB: page renderer ${large.peakRssMB.pageRenderer}, ` +
        `extension process ${large.peakRssMB.extensionProcess}, proxies ${large.peakRssMB.proxies.map((p) => p.peakRssMB).join('/')}`,
    );
  }
  console.log(
    JSON.stringify({
      bench: 'ranges',
      at: new Date().toISOString(),
      repeats: opts.repeats,
      playSeconds: opts.playSeconds,
      proxies: PROXIES,
      mode: 'rlnc',
      generateMs,
      subjects: summary,
      ratios,
      large: large ?? null,
      wallMs: Date.now() - t0,
    }),
  );
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
