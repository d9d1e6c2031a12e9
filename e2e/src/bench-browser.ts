/**
 * `npm run bench:browser -- [--json] [--stream high/hls-ts/index.m3u8] [--repeats 1] [--sources 4]
 * [--modes rlnc,fountain] [--cold] [--settings JSON] [--seeks 40,80] [--runtime chromium|firefox]
 * [--transport webrtc|quic] [--sender-stats] [--extension DIR]` (DIR: another unpacked
 * build, for A/B runs): a real player (hls.js in headless Chromium with the built extension)
 * plays a stream from the local origin through the extension in each mode (http = Parallel HTTP
 * through the proxies, uncoded, rlnc, fountain) with N ∈ {1, 2, 4} shaped proxies (N = 1:
 * 896 KB/s; N = 2: 896 + 1792; N = 4: 2 × 896 + 2 × 1792). Each N gets its own origo + proxies
 * (the extension only chooses how many proxies, so the set must be exactly the cell's), with the
 * proxies' caches warmed first.
 * `--stream long/hls-ts/index.m3u8` plays 120 s of the high stream instead of 40 s
 * (e2e/media/generate.sh; give it a longer `--play-timeout`).
 *
 * `--cold` skips the warming: every play (each mode, N and repeat) starts with proxies that never
 * fetched the stream, so the segments' first requests pay the proxies' origin fetches. The modes
 * and repeats of one N share its cluster (origo, its records, the testbed relay), so before each
 * play its proxies are restarted (`Cluster.restartProxy`: SIGKILL, relaunch under the same id,
 * wait until origo lists the new registration), which empties their in-memory caches; a new
 * cluster per play would restart origo and the relay as well for nothing. A play's page opens
 * fresh connections, so none reaches a killed process. `--settings '{"staging":false}'` merges
 * extension settings into every play's (not the ones the bench sets per cell: origoUrl, mode,
 * proxies, exposeCounters). Each row says whether it ran `cold` and with which `settings`.
 * `--seeks 40,80` seeks to those media times in each play (each once playback went 1 s past the
 * last), which then ends when the player fetched the last segment; rows count the seeks and the
 * extension's staging at the end of each play (hints, and segments staged but never asked for:
 * `wasted`, `wastedPerSeek`, the staging overhead of issue 12).
 *
 * A play runs until the player has fetched every segment of the playlist (the rest of the
 * stream is then buffered: no later rebuffering can come from the network). Per segment, the
 * extension's own download records (per-tab statistics in chrome.storage.session: transfer time,
 * goodput, normalized goodput, per-proxy shares) are collected; origo's records are counted
 * alongside. Rebuffering (`waiting` after the first `playing`) and fallbacks come from the page.
 *
 * `--runtime firefox` plays in Firefox ESR instead (bench-browser-runtime.ts: a fresh Firefox per
 * cell, its add-on installed with the cell's settings): the add-on's records are out of BiDi's
 * reach, so a Firefox row's segment times are the page's (hls.js's loader, from its request to the
 * answer; `timing: 'page'`), its shares the proxies' bytes sent, and it has no normalized goodput
 * or staging (bench-browser-rows.ts). Every row also has the page-timed median (both runtimes),
 * the QUIC sessions the proxies accepted (`quicSessionsAccepted`: whether WebTransport was used)
 * and how many segments MUTP served. `--sender-stats` adds the proxies' sender counters per row
 * (sender-log.ts: blocked by the in-flight limit, nothing to send, lost, RTT); `--proxy-log FILE`
 * keeps every proxy's log lines (debug level).
 *
 * With `--profile P` (not `loopback`) the whole run happens in the namespace testbed: Chromium
 * in the client's namespace, each proxy behind its emulated path, no loopback ICE flag; `paper`
 * is the paper's Fig. 2 in a real browser. Results then go to e2e/results/<profile>/.
 *
 * Writes e2e/results/bench-browser.csv (one line per segment), bench-browser.json (rows),
 * SVG/HTML box plots of goodput and normalized goodput per mode and N, and PNGs of them
 * (screenshots by the same Chromium), prints a table, and with --json the rows as a JSON array
 * on the last line of stdout.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Browser } from 'puppeteer-core';
import { boxPlotSvg, BoxSeries, boxStats } from './box-plot';
import { ensureExtensionBuilt, ExtensionSettings } from './browser';
import { capsFor, playOnce, segmentUrlsOf, warmProxies } from './browser-play';
import {
  BenchMode,
  Cell,
  csvOf,
  measuredSegments,
  MeasuredSegment,
  median,
  MODES,
  printTable,
  round,
  Row,
  rowOf,
  stagingOf,
} from './bench-browser-rows';
import { BenchRuntime, cellBrowsers, RUNTIMES } from './bench-browser-runtime';
import { Cluster, startCluster } from './cluster';
import { DEFAULT_SETTINGS } from '@mutp/extension/settings';
import { CodecSet } from '@mutp/sim';
import type { NetworkProfile } from '@mutp/sim/profiles';
import { loadProfile } from '@mutp/testbed';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { Origin, startOrigin } from './origin';
import { simulateCell } from './sim-prediction';
import { enterTestbed, loopbackRelay, PlacedOrigin, startPlacedOrigin } from './testbed-run';
import { startPlayerPages } from './player-pages';
import { countsDelta, origoRecords, proxyCounts } from './proxy-metrics';
import { SenderLog } from './sender-log';

const COLORS: Record<BenchMode, string> = {
  http: '#9e9e9e',
  uncoded: '#4e79a7',
  rlnc: '#e15759',
  fountain: '#59a14f',
};

/** What the bench sets per cell; --settings may not change them. */
const CELL_SETTINGS = ['origoUrl', 'mode', 'proxies', 'exposeCounters'];

/** --settings: a JSON object of extension settings. */
function parseSettings(value: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (e) {
    throw new InvalidArgumentError(`not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new InvalidArgumentError(`a JSON object of extension settings is expected, e.g. '{"staging":false}'`);
  const fixed = Object.keys(parsed).filter((k) => CELL_SETTINGS.includes(k));
  if (fixed.length > 0)
    throw new InvalidArgumentError(
      `${fixed.join(', ')}: set per cell by the bench (--modes, --sources), not by --settings`,
    );
  return parsed as Record<string, unknown>;
}

const program = new Command()
  .name('bench:browser')
  .description('Per-segment goodput of a real player (hls.js, Chromium, the extension) by mode and number of proxies.')
  .option('--json', 'print the rows as a JSON array on the last line of stdout')
  .option('--stream <path>', 'HLS manifest under e2e/media/out', 'high/hls-ts/index.m3u8')
  .option('--repeats <n>', 'plays per mode and N (fresh page, fresh connections)', (v) => Number(v), 1)
  .option('--sources <list>', 'numbers of proxies', '1,2,4')
  .option('--modes <list>', 'modes', MODES.join(','))
  .option('--out <dir>', 'results directory', join(__dirname, '..', 'results'))
  .option('--play-timeout <s>', 'longest a play may take, seconds', (v) => Number(v), 150)
  .option('--profile <name>', 'network profile (testbed/); loopback = no testbed', 'loopback')
  .option('--seed <n>', "seed of the profile's schedules and losses", (v) => Number(v), 1)
  .option('--extension <dir>', 'an unpacked Chromium extension to use instead of extension/dist/chrome (A/B runs)')
  .option('--cold', "don't warm the proxies: each play starts with restarted proxies, their caches empty")
  .addOption(
    new Option(
      '--transport <kind>',
      'quic: the proxies also run their QUIC endpoint, which the extension prefers (WebTransport); webrtc: they do not',
    )
      .choices(['webrtc', 'quic'])
      .default('webrtc'),
  )
  .addOption(
    new Option(
      '--runtime <browser>',
      "the browser: chromium (segment times from the extension's records) or firefox (Firefox ESR, a fresh one per cell; segment times from the page)",
    )
      .choices(RUNTIMES)
      .default('chromium'),
  )
  .option('--settings <json>', "extension settings (a JSON object) merged into every play's", parseSettings, {})
  .option(
    '--sender-stats',
    "add the proxies' sender counters per row (blocked by in-flight, lost, srtt: from their debug logs)",
  )
  .option(
    '--proxy-log <file>',
    "append every proxy's log lines (debug level) to this file, each after its proxy's name",
  )
  .option(
    '--seeks <list>',
    'media seconds to seek to during each play, in order (e.g. 40,80): staging overhead per seek',
    (v) => v.split(',').map(Number),
    [] as number[],
  )
  .parse();
const opts = program.opts<{
  json?: boolean;
  transport: 'webrtc' | 'quic';
  runtime: BenchRuntime;
  senderStats?: boolean;
  proxyLog?: string;
  stream: string;
  repeats: number;
  sources: string;
  modes: string;
  out: string;
  playTimeout: number;
  profile: string;
  seed: number;
  extension?: string;
  cold?: boolean;
  settings: Record<string, unknown>;
  seeks: number[];
}>();
if (opts.seeks.some((t) => !(t >= 0))) throw new Error(`--seeks takes media seconds, got ${opts.seeks.join(',')}`);
const cold = opts.cold === true;
if (opts.profile !== 'loopback' && opts.out === join(__dirname, '..', 'results'))
  opts.out = join(opts.out, opts.profile.replace(/[^a-z0-9-]/gi, '_'));

/** "2 × 896 + 2 × 1792": short enough for a box plot's group label. */
function capsLabel(caps: number[]): string {
  const counts = new Map<number, number>();
  for (const c of caps) counts.set(c, (counts.get(c) ?? 0) + 1);
  return [...counts].map(([cap, k]) => (k > 1 ? `${k} × ${cap}` : String(cap))).join(' + ');
}

/** Fleet indices with the caps a cell needs, each used once. */
function hostsFor(fleetCaps: number[], caps: number[]): number[] {
  const used = new Set<number>();
  return caps.map((cap) => {
    const i = fleetCaps.findIndex((c, k) => c === cap && !used.has(k));
    if (i < 0) throw new Error(`no proxy host with cap ${cap} in ${fleetCaps.join(',')}`);
    used.add(i);
    return i;
  });
}

const log = (s: string) => process.stderr.write(`bench:browser ${s}\n`);

/**
 * The simulator's prediction for a cell: one object of the median segment size from the cell's
 * proxies, through the profile's links for the hosts the cell used (none on loopback).
 */
function simSegmentGoodput(
  row: Row,
  segmentBytes: number,
  codecs: CodecSet,
  network?: { profile: NetworkProfile; fleetCaps: number[]; hosts: number[] },
): number | null {
  if (!Number.isFinite(segmentBytes) || segmentBytes <= 0) return null;
  const runs = simulateCell(
    {
      mode: row.mode,
      capsKBps: row.capsKBps,
      objectBytes: segmentBytes,
      rttMs: network?.profile.rttMs ?? 1,
      network: network && { ...network, seed: opts.seed },
    },
    codecs,
  );
  return runs.length ? Math.round(median(runs.map((r) => r.result.goodputBps))) : null;
}

/** Restarts every proxy of the cluster: their caches are empty again (--cold). */
async function restartProxies(cluster: Cluster): Promise<number> {
  const t = Date.now();
  await Promise.all(cluster.proxies.map((p) => cluster.restartProxy(p.name)));
  return Date.now() - t;
}

async function renderPng(browser: Browser, svg: string, file: string): Promise<void> {
  const page = await browser.newPage();
  try {
    await page.setViewport({ width: 900, height: 460, deviceScaleFactor: 2 });
    await page.setContent(`<!doctype html><html><body style="margin:0">${svg}</body></html>`);
    const svgElement = await page.$('svg');
    if (!svgElement) throw new Error('plot page has no svg');
    await svgElement.screenshot({ path: file as `${string}.png` });
  } finally {
    await page.close();
  }
}

async function main(): Promise<void> {
  const sources = opts.sources.split(',').map(Number);
  const modes = opts.modes.split(',') as BenchMode[];
  for (const m of modes) if (!MODES.includes(m)) throw new Error(`unknown mode ${m}`);
  if (!opts.extension) ensureExtensionBuilt();
  const unknown = Object.keys(opts.settings).filter((k) => !(k in DEFAULT_SETTINGS));
  if (unknown.length > 0)
    log(`--settings: ${unknown.join(', ')} not among extension/src/common/settings.ts's settings (passed as given)`);
  log(
    `${opts.stream}: proxies ${cold ? 'cold (restarted before each play, never warmed)' : 'warmed before each N'}, ` +
      `extra settings ${JSON.stringify(opts.settings)}`,
  );
  // The testbed's fleet: the largest N's caps; each N uses the hosts whose caps it needs.
  const fleetCaps = capsFor(Math.max(...sources));
  const testbed =
    opts.profile === 'loopback' ? undefined : await enterTestbed(__filename, opts.profile, fleetCaps, opts.seed);
  if (opts.profile !== 'loopback' && !testbed) return;
  mkdirSync(opts.out, { recursive: true });
  const origin: Origin | PlacedOrigin = testbed ? await startPlacedOrigin(testbed.origin) : await startOrigin();
  const pages = await startPlayerPages();
  // In the testbed the proxies are other hosts: no loopback ICE flag.
  const browsers = await cellBrowsers(opts.runtime, {
    loopbackPeers: !testbed,
    extensionDir: opts.extension,
    pagesUrl: pages.url,
  });
  const run = {
    stream: opts.stream,
    transport: opts.transport,
    profile: opts.profile,
    cold,
    settings: opts.settings,
  };
  const cells: Cell[] = [];
  const senderLog = opts.senderStats ? new SenderLog() : undefined;
  const t0 = Date.now();
  try {
    const manifestUrl = `${origin.url}/${opts.stream}`;
    const segmentUrls = await segmentUrlsOf(manifestUrl);
    const playerUrl = pages.playerUrl('hls', manifestUrl);
    for (const n of sources) {
      const caps = capsFor(n);
      const hosts = hostsFor(fleetCaps, caps);
      const cluster = await startCluster({
        proxies: caps.map((uploadKBps, i) => ({ name: `p${i}-${uploadKBps}`, uploadKBps })),
        ...(senderLog || opts.proxyLog
          ? {
              logLevel: 'debug',
              onLog: (source: string, line: string) => {
                senderLog?.onLine(source, line);
                if (opts.proxyLog) appendFileSync(opts.proxyLog, `${source} ${line}\n`);
              },
            }
          : {}),
        allowPrivateOrigins: true,
        readyTimeoutMs: 60_000,
        placement: testbed ? { origo: testbed.origo, proxies: hosts.map((h) => testbed.proxies[h]) } : undefined,
        quic: opts.transport === 'quic',
      });
      const origoUrl = new URL(cluster.clientUrl);
      const relay = testbed ? await loopbackRelay({ host: origoUrl.hostname, port: Number(origoUrl.port) }) : undefined;
      // In the testbed the extension reaches origo through a loopback relay (it takes ws:// only to this machine).
      const extensionOrigoUrl = relay ? `ws://127.0.0.1:${relay.port}${origoUrl.pathname}` : cluster.clientUrl;
      try {
        if (!cold) await warmProxies(cluster, segmentUrls);
        for (const mode of modes) {
          const browser = await browsers.forCell({
            ...(opts.settings as ExtensionSettings),
            origoUrl: extensionOrigoUrl,
            mode,
            proxies: n,
            exposeCounters: true,
          });
          const recordsBefore = (await origoRecords(cluster, mode)).length;
          const cell: Cell = {
            runtime: opts.runtime,
            mode,
            sources: n,
            capsKBps: caps,
            plays: [],
            origoRecords: 0,
            stageHints: {},
            proxyBytes: {},
            quicSessionsAccepted: 0,
          };
          for (let r = 0; r < opts.repeats; r++) {
            // Every cold play restarts the proxies, the cluster's first too: one rule, and each play
            // is known to start on empty caches whatever ran before it.
            const restartMs = cold ? await restartProxies(cluster) : 0;
            const countsBefore = await proxyCounts(cluster);
            const play = await playOnce(browser, playerUrl, segmentUrls.length, r, opts.playTimeout * 1000, {
              seekTo: opts.seeks,
              lastSegmentUrl: segmentUrls[segmentUrls.length - 1],
            });
            cell.plays.push(play);
            const hints: Record<string, number> = {};
            for (const p of countsDelta(countsBefore, await proxyCounts(cluster))) {
              for (const [outcome, k] of Object.entries(p.stageHints)) hints[outcome] = (hints[outcome] ?? 0) + k;
              const sent = Object.values(p.bytesSent).reduce((a, b) => a + b, 0);
              cell.proxyBytes[p.name] = (cell.proxyBytes[p.name] ?? 0) + sent;
              cell.quicSessionsAccepted += p.quicSessions.accepted ?? 0;
            }
            for (const [outcome, k] of Object.entries(hints))
              cell.stageHints[outcome] = (cell.stageHints[outcome] ?? 0) + k;
            const ok = measuredSegments({ ...cell, plays: [play] });
            log(
              `${opts.runtime} ${mode} N=${n} play ${r + 1}/${opts.repeats} ` +
                `(${cold ? `cold: proxies restarted in ${(restartMs / 1000).toFixed(1)} s` : 'warm'}): ` +
                `${play.counters.served}/${segmentUrls.length} segments served by MUTP (${ok.length} timed), ` +
                `median ${(median(ok.map((s) => s.goodputBps)) / 1e6).toFixed(2)} MB/s, stalls ${play.state.stalls}, ` +
                `fallbacks ${JSON.stringify(play.counters.fallbacks)}, stage hints ${JSON.stringify(hints)}, ` +
                `staging ${JSON.stringify(stagingOf([play]))}${play.seeks ? ` over ${play.seeks} seeks` : ''}, ` +
                `${(play.wallMs / 1000).toFixed(1)} s`,
            );
            await new Promise((res) => setTimeout(res, 500)); // the proxies end their transfers
          }
          cell.origoRecords = (await origoRecords(cluster, mode)).length - recordsBefore;
          // The transfers' lines come a little after the plays (the 500 ms above); http has none.
          const senders = senderLog?.take();
          if (senders && mode !== 'http') cell.senders = senders;
          await browsers.endCell();
          cells.push(cell);
        }
      } finally {
        await relay?.close();
        await cluster.stop();
      }
    }

    const rows = cells.map((c) => rowOf(c, run));
    const codecs = await loadNodeCodecs();
    const profile = testbed ? loadProfile(opts.profile) : undefined;
    for (const [i, r] of rows.entries()) {
      const segs = measuredSegments(cells[i]);
      const network = profile && { profile, fleetCaps, hosts: hostsFor(fleetCaps, r.capsKBps) };
      r.simSegmentGoodputBps = simSegmentGoodput(r, median(segs.map((x) => x.objectBytes)), codecs, network);
    }
    for (const r of rows) {
      const http = rows.find((x) => x.mode === 'http' && x.sources === r.sources);
      r.speedupVsHttp = http ? round(r.medianSegmentGoodputBps / http.medianSegmentGoodputBps, 2) : null;
    }

    // Files: per-segment CSV, rows, plots.
    writeFileSync(join(opts.out, 'bench-browser.csv'), csvOf(cells));
    writeFileSync(join(opts.out, 'bench-browser.json'), `${JSON.stringify(rows, null, 2)}\n`);
    const groups = sources.map((n) => `N = ${n} (${capsLabel(capsFor(n))} KB/s)`);
    const series = (value: (s: MeasuredSegment) => number | null): BoxSeries[] =>
      cells.map((c) => ({
        group: groups[sources.indexOf(c.sources)],
        series: c.mode,
        values: measuredSegments(c).flatMap((s) => {
          const v = value(s);
          return v === null ? [] : [v];
        }),
      }));
    const browserName = opts.runtime === 'firefox' ? 'Firefox ESR' : 'Chromium';
    const plots = [
      {
        file: 'bench-browser-goodput',
        svg: boxPlotSvg(
          series((s) => s.goodputBps / 1e6),
          {
            title: `Per-segment goodput in ${browserName} (hls.js, ${opts.stream}${cold ? ', cold proxies' : ''})`,
            yLabel: 'goodput (MB/s)',
            groups,
            series: modes,
            colors: COLORS,
            reference: {
              label: 'sum of caps',
              values: Object.fromEntries(
                sources.map((n, i) => [groups[i], (capsFor(n).reduce((a, b) => a + b, 0) * 1024) / 1e6]),
              ),
            },
          },
        ),
      },
      {
        file: 'bench-browser-normalized-goodput',
        svg: boxPlotSvg(
          series((s) => (s.normalizedGoodput === null ? null : Math.min(1, s.normalizedGoodput))),
          {
            title: `Per-segment normalized goodput in ${browserName} (hls.js, ${opts.stream}${cold ? ', cold proxies' : ''})`,
            yLabel: 'normalized goodput (useful / received)',
            groups,
            series: modes,
            colors: COLORS,
            yMax: 1,
          },
        ),
      },
    ];
    for (const p of plots) {
      writeFileSync(join(opts.out, `${p.file}.svg`), `${p.svg}\n`);
      writeFileSync(
        join(opts.out, `${p.file}.html`),
        `<!doctype html><html><head><meta charset="utf-8"><title>${p.file}</title></head><body>${p.svg}</body></html>\n`,
      );
      await renderPng(await browsers.renderer(), p.svg, join(opts.out, `${p.file}.png`));
    }

    console.log(`${opts.stream}, proxies ${cold ? 'cold' : 'warm'}, extra settings ${JSON.stringify(opts.settings)}:`);
    printTable(rows);
    // Issue 13's targets for Chromium at N = 4: coded median segment goodput >= 0.85 of the caps'
    // sum (>= 2.6 x Parallel HTTP), normalized goodput >= 0.97.
    const n4 = (mode: BenchMode) => rows.find((r) => r.mode === mode && r.sources === 4);
    const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
    for (const mode of ['rlnc', 'fountain'] as const) {
      const r = n4(mode);
      if (!r) continue;
      const capsBps = r.capsKBps.reduce((a, b) => a + b, 0) * 1024;
      const ofCaps = r.medianSegmentGoodputBps / capsBps;
      console.log(
        `target N=4 ${mode}: median segment goodput ${round(ofCaps)} of the caps' sum (>= 0.85: ${met(ofCaps >= 0.85)}), ` +
          `${r.speedupVsHttp ?? '-'} x http (>= 2.6: ${r.speedupVsHttp === null ? '-' : met(r.speedupVsHttp >= 2.6)}), ` +
          `normalized goodput ${r.normalizedGoodput} (>= 0.97: ${met((r.normalizedGoodput ?? 0) >= 0.97)})`,
      );
      // Issue 30's over QUIC (paper-loss2): >= 2.5 x http, every segment by MUTP, 0 stalls.
      if (opts.transport === 'quic')
        console.log(
          `target N=4 ${mode} over QUIC (issue 30): ${r.speedupVsHttp ?? '-'} x http (>= 2.5: ` +
            `${r.speedupVsHttp === null ? '-' : met(r.speedupVsHttp >= 2.5)}), ${r.served} served by MUTP, ` +
            `${r.fallbacks} fallbacks, ${r.stalls} stalls, ${r.quicSessionsAccepted} QUIC sessions`,
        );
    }
    const codedStalls = rows.filter((r) => r.mode !== 'http').reduce((a, r) => a + r.stalls, 0);
    console.log(
      `target zero stalls in coded modes: ${codedStalls} stalls (${codedStalls === 0 ? 'met' : 'NOT met'}); ` +
        `results in ${opts.out} (bench-browser.csv, bench-browser-*.png/svg/html); ${((Date.now() - t0) / 1000).toFixed(0)} s`,
    );
    for (const c of cells) {
      const st = boxStats(measuredSegments(c).map((s) => s.goodputBps));
      if (!st) log(`${c.mode} N=${c.sources}: no segment served by MUTP`);
    }
    if (opts.json) console.log(JSON.stringify(rows));
  } finally {
    await browsers.close();
    await pages.close();
    await origin.close();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
