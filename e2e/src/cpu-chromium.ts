/**
 * bench:cpu's Chromium client rows: what a byte costs the extension in a real browser. Headless
 * Chromium with the built extension (launchChromium) downloads objects from the same kind of
 * loopback cluster as the Node rows (the paper's mixed fleet of four, one cluster per transport,
 * the proxies' QUIC endpoints on for quic) and origin. A quiet page (the player page with no
 * player: `hls.html?player=none`) `fetch()`es the origin's /object/<bytes>/<seed>, which the
 * extension serves through MUTP because its `urlPatterns` setting names those URLs; the
 * extension's `transport` setting is the cell's (webrtc never tries QUIC; quic never falls back)
 * and every download's record must name that transport for all four proxies, with no fallback.
 *
 * Per mode and transport: a fresh page (so a fresh downloader frame), one warm-up download
 * (origo, the proxy links, the codecs' WebAssembly, JIT; and the proxies' origin fetch), then
 * `repeats` measurements of `downloads` downloads each, reading the CPU of the browser's
 * processes (every thread's schedstat, ns, of the processes below the browser's pid) before and
 * after. Then an idle baseline: the page left open for the median measurement's wall time.
 *
 * Counted in the rows (cpuMs): the extension's renderer process (`--extension-process`: the
 * downloader frame, the only place the download runs, plus the extension's service worker, which
 * stores each download's record) and the network service (the UDP sockets of WebRTC's ICE
 * transport, and the whole QUIC stack of WebTransport): the two processes that carry the
 * download, as the Node row counts the Node client's process with its transport's native
 * threads. Not counted: the page's renderer (the hook, and the object's arrival as a Response),
 * the browser process and the rest; they are in `processes` beside the rows, with the extension
 * renderer alone (issue 33's target: <= 40 ms/MiB) and the baseline. `mainThreadShare` is the
 * downloader frame's main thread (the extension renderer's main thread) over cpuMs.
 *
 * Packets: the useful packets the extension records per proxy (SegmentRecord.proxies[].useful):
 * the records carry no count of all received packets, so this is a lower bound of the Node rows'
 * `received` (the difference is packets that arrived after the object was decodable, and
 * redundant coded ones).
 */
import { existsSync } from 'node:fs';
import type { Page } from 'puppeteer-core';
import {
  CHROMIUM_PATH,
  ChromiumSession,
  ensureExtensionBuilt,
  hookConfig,
  launchChromium,
  pageCounters,
  SegmentRecord,
  totalFallbacks,
  waitFor,
} from './browser';
import { Cluster, mixedFleetOfFour, startCluster } from './cluster';
import { CpuMode, CpuRow, MIB, round, Transport } from './cpu-row';
import { startOrigin } from './origin';
import { startPlayerPages } from './player-pages';
import { chromiumLabel, commandLine, descendants, threadsCpuNs } from './proc-cpu';

export interface ChromiumCpuOptions {
  repeats: number;
  downloads: number;
  objectBytes: number;
  modes: CpuMode[];
  transports: Transport[];
  capScale: number;
  timeoutMs: number;
}

/** One measurement (or a cell's idle baseline) split by kind of Chromium process, ms of CPU. */
export interface ChromiumProcessCpu {
  mode: CpuMode;
  transport: Transport;
  /** 1.. for measurements, 'idle' for the baseline (the page open, no download, the same wall time). */
  repeat: number | 'idle';
  wallMs: number;
  bytes: number;
  /** CPU ms by process kind (chromiumLabel), every process below the browser and the browser. */
  cpuMsByProcess: Record<string, number>;
  /** The extension renderer alone per MiB (issue 33's target: <= 40); for the baseline, per the measurements' MiB. */
  extensionRendererMsPerMiB: number;
}

/** The processes whose CPU the rows count. */
export const EXTENSION_RENDERER = 'chromium renderer (extension)';
export const NETWORK_SERVICE = 'chromium utility network.mojom.NetworkService';
const COUNTED = [EXTENSION_RENDERER, NETWORK_SERVICE];

const log = (s: string) => process.stderr.write(`bench:cpu chromium ${s}\n`);

interface Reading {
  at: number;
  /** pid → kind, and CPU ns and name by thread id. */
  byPid: Map<number, { label: string; byTid: Map<number, { ns: number; name: string }> }>;
}

function readCpu(browserPid: number): Reading {
  const byPid: Reading['byPid'] = new Map();
  for (const pid of [browserPid, ...descendants(browserPid)]) {
    const cmd = commandLine(pid);
    const label = chromiumLabel(cmd) ?? cmd[0]?.split('/').pop() ?? '?';
    byPid.set(pid, { label, byTid: new Map(threadsCpuNs(pid).map((t) => [t.tid, t])) });
  }
  return { at: Date.now(), byPid };
}

/**
 * CPU ns by process kind between two readings, thread by thread: a thread (or process) new since
 * the first counts from 0; one that ended in between loses its time since the first reading.
 * The extension renderer's main thread (tid = pid; Chromium does not rename a main thread, so it
 * is not called CrRendererMain in /proc) runs the downloader frame's JavaScript.
 */
function cpuBetween(
  a: Reading,
  b: Reading,
): { byLabel: Map<string, number>; extensionMainNs: number; extensionThreads: Map<string, number> } {
  const byLabel = new Map<string, number>();
  const extensionThreads = new Map<string, number>();
  let extensionMainNs = 0;
  for (const [pid, p] of b.byPid) {
    const before = a.byPid.get(pid)?.byTid;
    let ns = 0;
    for (const [tid, t] of p.byTid) {
      const d = t.ns - (before?.get(tid)?.ns ?? 0);
      ns += d;
      if (p.label !== EXTENSION_RENDERER) continue;
      if (tid === pid) extensionMainNs += d;
      const name = tid === pid ? 'main' : t.name;
      extensionThreads.set(name, (extensionThreads.get(name) ?? 0) + d);
    }
    byLabel.set(p.label, (byLabel.get(p.label) ?? 0) + ns);
  }
  return { byLabel, extensionMainNs, extensionThreads };
}

const msByLabel = (byLabel: Map<string, number>) =>
  Object.fromEntries([...byLabel].sort((x, y) => y[1] - x[1]).map(([k, ns]) => [k, round(ns / 1e6, 1)]));

/** The page's fetch of `url`, which the extension must have served through MUTP. */
async function download(page: Page, url: string, timeoutMs: number): Promise<number> {
  const served0 = (await pageCounters(page))?.served ?? 0;
  const got = await page.evaluate(
    async (u: string, ms: number) => {
      const response = await fetch(u, { signal: AbortSignal.timeout(ms) });
      return { status: response.status, bytes: (await response.arrayBuffer()).byteLength };
    },
    url,
    timeoutMs,
  );
  const counters = await pageCounters(page);
  if (got.status !== 200 || !counters || counters.served !== served0 + 1 || totalFallbacks(counters) > 0)
    throw new Error(`${url}: not served by MUTP (HTTP ${got.status}, counters ${JSON.stringify(counters)})`);
  return got.bytes;
}

/** The extension's records of the page's downloads, once `count` are in (checked: mode, 4 proxies, transport). */
async function recordsOf(
  chromium: ChromiumSession,
  pageUrl: string,
  count: number,
  mode: CpuMode,
  transport: Transport,
): Promise<SegmentRecord[]> {
  const segments = await waitFor(
    `${count} download records`,
    async () => {
      const s = (await chromium.tabStats(pageUrl))?.segments ?? [];
      return s.length >= count ? s : undefined;
    },
    30_000,
  );
  for (const s of segments) {
    const transports = s.proxies.map((p) => p.transport);
    if (!s.ok || s.mode !== mode || s.proxies.length !== 4 || transports.some((t) => t !== transport))
      throw new Error(`a ${mode} download over ${transport} went otherwise: ${JSON.stringify(s)}`);
  }
  return segments;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function measureCell(
  chromium: ChromiumSession,
  browserPid: number,
  pageUrl: string,
  url: string,
  mode: CpuMode,
  transport: Transport,
  o: ChromiumCpuOptions,
): Promise<{ rows: CpuRow[]; processes: ChromiumProcessCpu[] }> {
  const page = await chromium.browser.newPage();
  const rows: CpuRow[] = [];
  const processes: ChromiumProcessCpu[] = [];
  try {
    await page.goto(pageUrl, { waitUntil: 'load' });
    await waitFor('the hook to have its settings', async () => ((await hookConfig(page)) ? true : undefined), 10_000);
    await download(page, url, o.timeoutMs); // warm-up: the frame, origo, links, WebAssembly, JIT
    let records = 1;
    const extensionPids = [...readCpu(browserPid).byPid.values()].filter((p) => p.label === EXTENSION_RENDERER);
    if (extensionPids.length !== 1) log(`${extensionPids.length} extension renderers (expected 1): all counted`);
    const walls: number[] = [];
    let measuredBytes = 0;
    for (let r = 0; r < o.repeats; r++) {
      const before = readCpu(browserPid);
      let bytes = 0;
      for (let d = 0; d < o.downloads; d++) bytes += await download(page, url, o.timeoutMs);
      const after = readCpu(browserPid);
      const segments = await recordsOf(chromium, pageUrl, records + o.downloads, mode, transport);
      const packets = segments
        .slice(records, records + o.downloads)
        .reduce((sum, s) => sum + s.proxies.reduce((n, p) => n + p.useful, 0), 0);
      records += o.downloads;
      const { byLabel, extensionMainNs, extensionThreads } = cpuBetween(before, after);
      const ns = COUNTED.reduce((sum, k) => sum + (byLabel.get(k) ?? 0), 0);
      const mib = bytes / MIB;
      walls.push(after.at - before.at);
      measuredBytes = bytes;
      rows.push({
        runtime: 'chromium',
        side: 'client',
        mode,
        transport,
        bytes,
        packets,
        cpuMs: round(ns / 1e6),
        cpuMsPerMiB: round(ns / 1e6 / mib),
        usPerPacket: round(ns / 1e3 / packets),
        mainThreadShare: round(extensionMainNs / ns),
      });
      const extensionMsPerMiB = round((byLabel.get(EXTENSION_RENDERER) ?? 0) / 1e6 / mib);
      processes.push({
        mode,
        transport,
        repeat: r + 1,
        wallMs: after.at - before.at,
        bytes,
        cpuMsByProcess: msByLabel(byLabel),
        extensionRendererMsPerMiB: extensionMsPerMiB,
      });
      const perMiB = (k: string) => round((byLabel.get(k) ?? 0) / 1e6 / mib);
      const threads = [...extensionThreads]
        .filter(([, t]) => t / 1e6 / mib >= 1)
        .sort((x, y) => y[1] - x[1])
        .map(([name, t]) => `${name} ${round(t / 1e6 / mib, 1)}`);
      log(
        `${mode} ${transport} #${r + 1}: ${round(ns / 1e6 / mib)} ms/MiB counted = extension renderer ` +
          `${extensionMsPerMiB} (by thread: ${threads.join(', ')}) + network service ` +
          `${perMiB(NETWORK_SERVICE)}; not counted: page renderer ${perMiB('chromium renderer')}, browser ` +
          `${perMiB('chromium browser')}; ${packets} useful packets, ${round(bytes / 1e3 / (after.at - before.at))} MB/s`,
      );
    }
    const wallMs = median(walls);
    const before = readCpu(browserPid);
    await sleep(wallMs);
    const after = readCpu(browserPid);
    const { byLabel } = cpuBetween(before, after);
    const idle = {
      mode,
      transport,
      repeat: 'idle' as const,
      wallMs: after.at - before.at,
      bytes: 0,
      cpuMsByProcess: msByLabel(byLabel),
      extensionRendererMsPerMiB: round((byLabel.get(EXTENSION_RENDERER) ?? 0) / 1e6 / (measuredBytes / MIB)),
    };
    processes.push(idle);
    const countedMs = COUNTED.reduce((sum, k) => sum + (byLabel.get(k) ?? 0), 0) / 1e6;
    log(
      `${mode} ${transport} idle ${idle.wallMs} ms: counted processes ${round(countedMs)} ms ` +
        `(${round(countedMs / (measuredBytes / MIB))} ms per measured MiB; not subtracted)`,
    );
  } finally {
    await page.close().catch(() => undefined);
  }
  return { rows, processes };
}

/**
 * The Chromium client rows (side 'client'), and every measurement's CPU by process; nothing when
 * Chromium is not installed (said on stderr).
 */
export async function measureChromium(o: ChromiumCpuOptions): Promise<{
  rows: CpuRow[];
  processes: ChromiumProcessCpu[];
}> {
  const rows: CpuRow[] = [];
  const processes: ChromiumProcessCpu[] = [];
  if (!existsSync(CHROMIUM_PATH)) {
    log(`skipped: ${CHROMIUM_PATH} not found (apt-get install chromium, scripts/setup.sh; or set CHROMIUM_PATH)`);
    return { rows, processes };
  }
  ensureExtensionBuilt();
  let origin: Awaited<ReturnType<typeof startOrigin>> | undefined;
  let pages: Awaited<ReturnType<typeof startPlayerPages>> | undefined;
  let chromium: ChromiumSession | undefined;
  let cluster: Cluster | undefined;
  try {
    origin = await startOrigin();
    pages = await startPlayerPages();
    chromium = await launchChromium();
    const browserPid = chromium.browser.process()?.pid;
    if (browserPid === undefined) throw new Error('Chromium has no process id');
    // The player page with no player: a quiet page whose only work is the fetches below.
    const pageUrl = `${pages.url}/hls.html?player=none`;
    let seed = 1000;
    for (const transport of o.transports) {
      cluster = await startCluster({
        proxies: mixedFleetOfFour('cpu').map((p) => ({ ...p, uploadKBps: Math.round(p.uploadKBps * o.capScale) })),
        allowPrivateOrigins: true,
        quic: transport === 'quic',
      });
      for (const mode of o.modes) {
        await chromium.setSettings({
          origoUrl: cluster.clientUrl,
          mode,
          transport,
          proxies: 4,
          exposeCounters: true,
          staging: false,
          urlPatterns: [`${origin.url}/object/*`],
          deadlineMs: Math.min(120_000, o.timeoutMs),
          maxObjectBytes: Math.max(o.objectBytes, 1024),
        });
        const url = `${origin.url}/object/${o.objectBytes}/${seed++}`;
        try {
          const cell = await measureCell(chromium, browserPid, pageUrl, url, mode, transport, o);
          rows.push(...cell.rows);
          processes.push(...cell.processes);
        } catch (e) {
          throw new Error(`bench:cpu chromium ${mode} over ${transport}: ${String(e)}`, { cause: e });
        }
      }
      await cluster.stop();
      cluster = undefined;
    }
  } finally {
    await cluster?.stop();
    await chromium?.close();
    await pages?.close();
    await origin?.close();
  }
  return { rows, processes };
}
