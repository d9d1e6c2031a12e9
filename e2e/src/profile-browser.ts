/**
 * `npm run profile:browser -- [--mode rlnc] [--sources 4] [--plays 2] [--transport quic] [--profile P]
 * [--out DIR]`: where the browser path spends its time. With `--profile P` (not `loopback`) the
 * run happens in the namespace testbed, as bench:browser's (Chromium in the client's namespace,
 * each proxy behind its emulated path, origo through a loopback relay). One bench:browser cell
 * (hls.js playing the high stream through the extension from N shaped proxies) is played
 * `--plays` times with:
 *
 * - a CPU profile (CDP Profiler, `--interval-us` sampling) of the extension's downloader frame,
 *   its functions named through the bundle's source map and summed per source file and per kind
 *   (WebAssembly codec, SHA-256, receiver core, data channel glue, GC, idle);
 * - a Chromium trace (all processes) for the busy time of every thread, the lateness of the
 *   downloader's timers (TimerInstall → TimerFire against the delay asked for), and its event
 *   dispatches (data channel and port messages);
 * - the frame's own timeline of its downloads (profile-browser-timeline.ts): per segment the gap
 *   since the previous one, the time to its first datagram and the transfer; and how its
 *   WebTransport links batched their datagrams and how many they sent;
 * - the proxies' senders per play (sender-log.ts: lost, expired, blocked by the in-flight limit,
 *   RTT) and, in the testbed, each emulated link's packets and drops (profile-browser-links.ts):
 *   the senders' "lost" against what the links really dropped;
 * - the CPU seconds of every process of the run (Chromium's, the proxies', origo's) from /proc,
 *   against the wall time: on a 2-core machine, whether the cores were the limit.
 *
 * Writes DIR/profile-<mode>.json (the summary, also printed), DIR/downloader-<mode>-<play>.cpuprofile
 * (open in DevTools) and DIR/trace-<mode>-<play>.json (open in chrome://tracing or Perfetto).
 */
import { readFileSync, readdirSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import type { CDPSession, Target } from 'puppeteer-core';
import { CHROME_EXTENSION, ensureExtensionBuilt, launchChromium } from './browser';
import { capsFor, playOnce, PlayResult, segmentUrlsOf, warmProxies } from './browser-play';
import { startCluster } from './cluster';
import { startOrigin } from './origin';
import { enterTestbed, loopbackRelay, startPlacedOrigin } from './testbed-run';
import { readFrameTimeline } from './profile-browser-timeline';
import { linkDeltasSince, snapshotLinks } from './profile-browser-links';
import { SenderLog } from './sender-log';
import { startPlayerPages } from './player-pages';
import { chromiumLabel } from './proc-cpu';
import { SourceMapConsumer } from 'source-map';

const program = new Command()
  .name('profile:browser')
  .description('CPU profile and trace of the extension downloader during a bench:browser cell.')
  .option('--mode <mode>', 'extension mode', 'rlnc')
  .option('--sources <n>', 'number of proxies', (v) => Number(v), 4)
  .option('--plays <n>', 'profiled plays (fresh page each)', (v) => Number(v), 1)
  .option('--stream <path>', 'HLS manifest under e2e/media/out', 'high/hls-ts/index.m3u8')
  .option('--interval-us <n>', 'CPU profile sampling interval, microseconds', (v) => Number(v), 250)
  .option('--no-trace', 'no Chromium trace (the CPU profile and /proc only)')
  .addOption(
    new Option('--transport <kind>', 'proxy links: webrtc, or quic (the proxies run their QUIC endpoint)')
      .choices(['webrtc', 'quic'])
      .default('webrtc'),
  )
  .option('--settings <json>', 'extra extension settings (JSON)', '{}')
  .option('--profile <name>', 'network profile (testbed/); loopback = no testbed', 'loopback')
  .option('--seed <n>', "seed of the profile's schedules and losses", (v) => Number(v), 1)
  .option('--out <dir>', 'output directory', join(__dirname, '..', 'results', 'profile'))
  .option('--extension <dir>', 'an unpacked Chromium extension to use instead of extension/dist/chrome')
  .parse();
const opts = program.opts<{
  mode: string;
  sources: number;
  plays: number;
  stream: string;
  intervalUs: number;
  trace: boolean;
  settings: string;
  transport: string;
  profile: string;
  seed: number;
  out: string;
  extension?: string;
}>();
const log = (s: string) => process.stderr.write(`profile:browser ${s}\n`);
const round = (x: number, d = 3) => Math.round(x * 10 ** d) / 10 ** d;

// ------------------------------------------------------------------ CPU profile of the frame

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The kind of work a source file (or V8 pseudo-function) stands for. */
function kindOf(file: string, functionName: string): string {
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(garbage collector)') return 'gc';
  if (functionName === '(program)') return 'program (native, outside JS)';
  // The codecs and hash-wasm's SHA-256 are both WebAssembly; their modules cannot be told apart here.
  if (file.startsWith('wasm://') || file.endsWith('.wasm')) return 'wasm (codecs, SHA-256)';
  if (file.includes('@noble/hashes')) return 'sha256 (noble, JS)';
  if (file.includes('shared/src/receiver/')) return 'receiver core';
  if (file.includes('shared/src/codec/') || file.includes('wasm/src/')) return 'codec glue (JS)';
  if (file.includes('shared/src/wire') || file.includes('shared/src/client/'))
    return 'client core (wire, links, download)';
  if (file.includes('shared/src/')) return 'other core';
  if (file.includes('src/downloader/rtc')) return 'data channel glue (send, onmessage)';
  if (file.includes('src/downloader/sha256') || file.includes('hash-wasm')) return 'sha256 glue (JS)';
  if (file.startsWith('./src/') || file.includes('extension/src/')) return 'extension downloader';
  if (file === '' || file === '(native)') return `native: ${functionName || '(anonymous)'}`;
  return 'other JS';
}

function summarizeProfile(profile: CpuProfile, maps: Map<string, SourceMapConsumer>) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i + 1] ?? 0; // a sample's time runs to the next one
    selfUs.set(profile.samples[i], (selfUs.get(profile.samples[i]) ?? 0) + dt);
  }
  const totalUs = profile.endTime - profile.startTime;
  const byKind = new Map<string, number>();
  const byFile = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const cf = byId.get(id)!.callFrame;
    let file = cf.url;
    let where = `${cf.functionName || '(anonymous)'} ${cf.url.split('/').pop()}:${cf.lineNumber + 1}`;
    const bundle = cf.url.split('/').pop() ?? '';
    const map = maps.get(bundle);
    // The profile's positions are 0-based; source-map takes 1-based lines and 0-based columns.
    const original =
      map && cf.lineNumber >= 0
        ? map.originalPositionFor({
            line: cf.lineNumber + 1,
            column: cf.columnNumber,
            bias: SourceMapConsumer.GREATEST_LOWER_BOUND,
          })
        : undefined;
    if (original?.source) {
      file = original.source.replace(/^webpack:\/\/\/(\.\.\/)?/, '');
      where = `${original.name ?? cf.functionName ?? '?'} ${file}:${original.line}`;
    }
    if (cf.url.startsWith('wasm://')) where = `${cf.functionName} (wasm)`;
    const kind = kindOf(file, cf.functionName);
    byKind.set(kind, (byKind.get(kind) ?? 0) + us);
    byFile.set(file || cf.functionName, (byFile.get(file || cf.functionName) ?? 0) + us);
    byFunction.set(where, (byFunction.get(where) ?? 0) + us);
  }
  const table = (m: Map<string, number>, top: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => ({ what: k, ms: round(us / 1000, 1), share: round(us / totalUs) }));
  const idleUs = byKind.get('idle') ?? 0;
  return {
    wallMs: round(totalUs / 1000, 1),
    busyShare: round(1 - idleUs / totalUs),
    byKind: table(byKind, 30),
    byFile: table(byFile, 25),
    topFunctions: table(byFunction, 30),
  };
}

function loadMaps(dir: string): Map<string, SourceMapConsumer> {
  const maps = new Map<string, SourceMapConsumer>();
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.js.map')))
    maps.set(f.replace(/\.map$/, ''), new SourceMapConsumer(JSON.parse(readFileSync(join(dir, f), 'utf8'))));
  return maps;
}

// ------------------------------------------------------------------ trace

interface TraceEvent {
  name: string;
  cat: string;
  ph: string;
  pid: number;
  tid: number;
  ts: number;
  dur?: number;
  /** The thread's CPU time within `dur` (the rest it was descheduled or blocked). */
  tdur?: number;
  /** Flow events (toplevel.flow): a task's post ('s') and run ('f') share an id. */
  id?: string | number;
  bind_id?: string | number;
  args?: { name?: string; data?: Record<string, unknown>; labels?: string };
}

const quantiles = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => (s.length ? round(s[Math.min(s.length - 1, Math.floor(p * s.length))], 2) : null);
  return { n: s.length, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: s.length ? round(s[s.length - 1], 2) : null };
};

function summarizeTrace(events: TraceEvent[]) {
  const threadNames = new Map<string, string>();
  const processNames = new Map<number, string>();
  for (const e of events) {
    if (e.ph !== 'M') continue;
    if (e.name === 'thread_name') threadNames.set(`${e.pid}:${e.tid}`, e.args?.name ?? '?');
    if (e.name === 'process_name') processNames.set(e.pid, e.args?.name ?? '?');
    if (e.name === 'process_labels' && e.args?.labels)
      processNames.set(e.pid, `${processNames.get(e.pid) ?? ''} (${e.args.labels})`);
  }
  // The downloader frame's process: the one that committed downloader.html.
  let downloaderPid: number | undefined;
  const framePids = new Map<string, number>();
  for (const e of events) {
    const d = e.args?.data;
    if (!d) continue;
    if (e.name === 'FrameCommittedInBrowser' || e.name === 'TracingStartedInBrowser') {
      const frames = (d.frames as { url?: string; processId?: number; frame?: string }[] | undefined) ?? [d];
      for (const f of frames as { url?: string; processId?: number; frame?: string }[]) {
        if (f.frame && f.processId) framePids.set(f.frame, f.processId);
        if (typeof f.url === 'string' && f.url.includes('/downloader.html') && f.processId) downloaderPid = f.processId;
      }
    }
  }
  const timed = events.filter((e) => e.ph === 'X' || e.ph === 'B' || e.ph === 'I' || e.ph === 'i');
  const t0 = timed.reduce((m, e) => Math.min(m, e.ts), Infinity);
  const t1 = timed.reduce((m, e) => Math.max(m, e.ts + (e.dur ?? 0)), -Infinity);
  const spanUs = t1 - t0;
  // Busy time per thread: top-level tasks, wall and the thread's own CPU (the difference: it was
  // descheduled, or waited in a blocking call).
  const busy = new Map<string, { wall: number; cpu: number }>();
  for (const e of events)
    if (e.ph === 'X' && e.name === 'ThreadControllerImpl::RunTask' && e.dur) {
      const b = busy.get(`${e.pid}:${e.tid}`) ?? { wall: 0, cpu: 0 };
      b.wall += e.dur;
      b.cpu += e.tdur ?? e.dur;
      busy.set(`${e.pid}:${e.tid}`, b);
    }
  const threads = [...busy]
    .sort((a, b) => b[1].wall - a[1].wall)
    .slice(0, 25)
    .map(([key, b]) => {
      const pid = Number(key.split(':')[0]);
      return {
        thread: threadNames.get(key) ?? key,
        process: `${processNames.get(pid) ?? '?'}${pid === downloaderPid ? ' [downloader frame]' : ''}`,
        busyShare: round(b.wall / spanUs),
        cpuShare: round(b.cpu / spanUs),
      };
    });
  // How long the frame's tasks waited in its queue, by the posting thread (needs toplevel.flow).
  const posted = new Map<string, { ts: number; from: string }>();
  for (const e of events)
    if (e.ph === 's' && e.id !== undefined)
      posted.set(String(e.id), { ts: e.ts, from: threadNames.get(`${e.pid}:${e.tid}`) ?? '?' });
  const queueDelays = new Map<string, number[]>();
  for (const e of events) {
    if (e.ph !== 'f' || e.id === undefined || e.pid !== downloaderPid) continue;
    if (threadNames.get(`${e.pid}:${e.tid}`) !== 'CrRendererMain') continue;
    const post = posted.get(String(e.id));
    if (!post) continue;
    (queueDelays.get(post.from) ?? queueDelays.set(post.from, []).get(post.from)!).push((e.ts - post.ts) / 1000);
  }
  // Timers of the downloader's main thread: lateness against the delay asked for.
  const installs = new Map<string, { ts: number; timeout: number }>();
  const lateByDelay = new Map<string, number[]>();
  const dispatches = new Map<string, { n: number; us: number }>();
  const mainTid = [...threadNames].find(
    ([k, v]) => v === 'CrRendererMain' && Number(k.split(':')[0]) === downloaderPid,
  );
  const mainKey = mainTid?.[0];
  for (const e of events) {
    if (`${e.pid}:${e.tid}` !== mainKey) continue;
    const d = e.args?.data;
    if (e.name === 'TimerInstall' && d) installs.set(String(d.timerId), { ts: e.ts, timeout: Number(d.timeout) });
    else if (e.name === 'TimerFire' && d) {
      const i = installs.get(String(d.timerId));
      if (!i) continue;
      const bucket = i.timeout <= 1 ? '0-1 ms' : i.timeout <= 25 ? '2-25 ms' : '>25 ms';
      const late = (e.ts - i.ts) / 1000 - i.timeout;
      (lateByDelay.get(bucket) ?? lateByDelay.set(bucket, []).get(bucket)!).push(late);
    } else if (e.name === 'EventDispatch' && d && e.dur !== undefined) {
      const k = String(d.type);
      const x = dispatches.get(k) ?? { n: 0, us: 0 };
      x.n++;
      x.us += e.dur;
      dispatches.set(k, x);
    }
  }
  return {
    spanMs: round(spanUs / 1000, 1),
    downloaderPid,
    threads,
    downloaderQueueDelayMsByPoster: Object.fromEntries(
      [...queueDelays].filter(([, v]) => v.length >= 10).map(([k, v]) => [k, quantiles(v)]),
    ),
    downloaderTimerLatenessMs: Object.fromEntries([...lateByDelay].map(([k, v]) => [k, quantiles(v)])),
    downloaderEventDispatch: Object.fromEntries(
      [...dispatches].map(([k, v]) => [k, { count: v.n, ms: round(v.us / 1000, 1), meanUs: round(v.us / v.n, 1) }]),
    ),
  };
}

// ------------------------------------------------------------------ /proc CPU

function cpuSeconds(): Map<number, { command: string; seconds: number }> {
  const ticks = 100; // USER_HZ on Linux
  const out = new Map<number, { command: string; seconds: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const seconds = (Number(rest[11]) + Number(rest[12])) / ticks;
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      out.set(Number(name), { command: labelOf(cmd), seconds });
    } catch {
      // the process ended meanwhile
    }
  }
  return out;
}

function labelOf(cmd: string[]): string {
  const joined = cmd.join(' ');
  const chromium = chromiumLabel(cmd);
  if (chromium) return chromium;
  if (joined.includes('proxy/src/main.ts')) return 'proxy';
  if (joined.includes('origo/src/main.ts')) return 'origo';
  if (joined.includes('profile-browser')) return 'this tool (origin, page server)';
  return cmd[0].split('/').pop() ?? '?';
}

function cpuDelta(before: Map<number, { command: string; seconds: number }>, wallS: number) {
  const after = cpuSeconds();
  const byLabel = new Map<string, number>();
  for (const [pid, a] of after) {
    const d = a.seconds - (before.get(pid)?.seconds ?? 0);
    if (d > 0) byLabel.set(a.command, (byLabel.get(a.command) ?? 0) + d);
  }
  const total = [...byLabel.values()].reduce((x, y) => x + y, 0);
  return {
    wallS: round(wallS, 2),
    coresUsed: round(total / wallS, 2),
    byProcess: [...byLabel]
      .sort((a, b) => b[1] - a[1])
      .filter(([, s]) => s >= 0.05)
      .map(([k, s]) => ({ process: k, cpuS: round(s, 2), cores: round(s / wallS, 2) })),
  };
}

// ------------------------------------------------------------------ main

const TRACE_CATEGORIES = [
  'toplevel',
  'devtools.timeline',
  'disabled-by-default-devtools.timeline',
  'v8.execute',
  'toplevel.flow',
  '__metadata',
];

/**
 * Times every RTCDataChannel.send of the frame (the core's requests and feedback): Chromium may
 * block the calling thread until its WebRTC thread takes the message.
 */
const SEND_TIMING = `(() => {
  const proto = RTCDataChannel.prototype;
  if (proto.__mutpTimed) return;
  proto.__mutpTimed = true;
  const send = proto.send;
  const stats = (globalThis.__mutpSendStats = { count: 0, ms: 0, over1ms: 0, maxMs: 0 });
  proto.send = function (data) {
    const t = performance.now();
    try { return send.call(this, data); } finally {
      const ms = performance.now() - t;
      stats.count++; stats.ms += ms; if (ms > 1) stats.over1ms++; if (ms > stats.maxMs) stats.maxMs = ms;
    }
  };
})()`;

async function startFrameProfiler(target: Target): Promise<CDPSession> {
  const session = await target.createCDPSession();
  await session.send('Profiler.enable');
  await session.send('Profiler.setSamplingInterval', { interval: opts.intervalUs });
  await session.send('Profiler.start');
  await session.send('Runtime.evaluate', { expression: SEND_TIMING }).catch(() => undefined);
  return session;
}

async function sendStats(session: CDPSession): Promise<unknown> {
  const r = (await session
    .send('Runtime.evaluate', { expression: 'globalThis.__mutpSendStats', returnByValue: true })
    .catch(() => undefined)) as { result?: { value?: { count: number; ms: number; over1ms: number; maxMs: number } } };
  const v = r?.result?.value;
  return v
    ? { ...v, ms: round(v.ms, 1), meanUs: round((v.ms / Math.max(1, v.count)) * 1000, 1), maxMs: round(v.maxMs, 2) }
    : 'none';
}

async function main(): Promise<void> {
  if (!opts.extension) ensureExtensionBuilt();
  mkdirSync(opts.out, { recursive: true });
  const maps = loadMaps(opts.extension ?? CHROME_EXTENSION);
  const caps = capsFor(opts.sources);
  // With a profile this process re-runs itself in the testbed's client namespace (as bench:browser).
  const testbed =
    opts.profile === 'loopback' ? undefined : await enterTestbed(__filename, opts.profile, caps, opts.seed);
  if (opts.profile !== 'loopback' && !testbed) return;
  const summaries: unknown[] = [];
  // Started one by one inside the try: whatever started is stopped, whatever failed.
  let origin: { url: string; close(): Promise<void> } | undefined;
  let pages: Awaited<ReturnType<typeof startPlayerPages>> | undefined;
  let chromium: Awaited<ReturnType<typeof launchChromium>> | undefined;
  let cluster: Awaited<ReturnType<typeof startCluster>> | undefined;
  let relay: Awaited<ReturnType<typeof loopbackRelay>> | undefined;
  const senderLog = new SenderLog();
  try {
    origin = testbed ? await startPlacedOrigin(testbed.origin) : await startOrigin();
    pages = await startPlayerPages();
    chromium = await launchChromium({ extensionDir: opts.extension, loopbackPeers: !testbed });
    cluster = await startCluster({
      proxies: caps.map((uploadKBps, i) => ({ name: `p${i}-${uploadKBps}`, uploadKBps })),
      allowPrivateOrigins: true,
      readyTimeoutMs: 60_000,
      placement: testbed ? { origo: testbed.origo, proxies: testbed.proxies } : undefined,
      quic: opts.transport === 'quic',
      // The proxies' "transfer ended" lines: each sender's lost, expired and window-blocked counts.
      logLevel: 'debug',
      onLog: (source: string, line: string) => senderLog.onLine(source, line),
    });
    // The extension takes plain ws:// only to this machine: in the testbed, origo through a loopback relay.
    const origoUrl = new URL(cluster.clientUrl);
    relay = testbed ? await loopbackRelay({ host: origoUrl.hostname, port: Number(origoUrl.port) }) : undefined;
    const manifestUrl = `${origin.url}/${opts.stream}`;
    const segmentUrls = await segmentUrlsOf(manifestUrl);
    await warmProxies(cluster, segmentUrls);
    await chromium.setSettings({
      origoUrl: relay ? `ws://127.0.0.1:${relay.port}${origoUrl.pathname}` : cluster.clientUrl,
      mode: opts.mode as 'rlnc',
      proxies: opts.sources,
      exposeCounters: true,
      transport: opts.transport as 'webrtc' | 'quic',
      ...(JSON.parse(opts.settings) as object),
    });
    for (let play = 0; play < opts.plays; play++) {
      let frame: Promise<CDPSession> | undefined;
      let trace: Uint8Array | undefined;
      let profile: CpuProfile | undefined;
      let sends: unknown;
      let timeline: unknown;
      senderLog.take(); // the warm-up's and earlier plays' transfers
      const linksBefore = testbed ? snapshotLinks(testbed) : undefined;
      const cpuBefore = cpuSeconds();
      const t0 = Date.now();
      let cpu: ReturnType<typeof cpuDelta> | undefined;
      const result: PlayResult = await playOnce(
        chromium,
        pages.playerUrl('hls', manifestUrl),
        segmentUrls.length,
        play,
        150_000,
        {
          beforeLoad: async (page) => {
            frame = page
              .browser()
              .waitForTarget((t) => t.url().includes('/downloader.html'), { timeout: 20_000 })
              .then(startFrameProfiler);
            if (opts.trace) await page.tracing.start({ categories: TRACE_CATEGORIES });
          },
          beforeClose: async (page) => {
            cpu = cpuDelta(cpuBefore, (Date.now() - t0) / 1000);
            const session = await frame!;
            sends = await sendStats(session);
            timeline = await readFrameTimeline(session);
            profile = ((await session.send('Profiler.stop')) as { profile: CpuProfile }).profile;
            await session.detach().catch(() => undefined);
            if (opts.trace) trace = await page.tracing.stop();
          },
        },
      );
      // The senders log a transfer's end when its STOP arrives; linkem rewrites its counters each second.
      await new Promise((r) => setTimeout(r, 1100));
      const senders = senderLog.take();
      const links = testbed && linksBefore ? linkDeltasSince(testbed, linksBefore) : undefined;
      writeFileSync(join(opts.out, `downloader-${opts.mode}-${play}.cpuprofile`), JSON.stringify(profile ?? {}));
      let traceSummary: unknown = 'no trace';
      if (trace) {
        writeFileSync(join(opts.out, `trace-${opts.mode}-${play}.json`), trace);
        const parsed = JSON.parse(Buffer.from(trace).toString('utf8')) as { traceEvents: TraceEvent[] } | TraceEvent[];
        traceSummary = summarizeTrace(Array.isArray(parsed) ? parsed : parsed.traceEvents);
      }
      const segs = result.segments.filter((s) => s.ok && !s.cached);
      const sorted = segs.map((s) => s.goodputBps).sort((a, b) => a - b);
      const summary: Record<string, unknown> = {
        mode: opts.mode,
        play,
        capsKBps: caps,
        medianSegmentGoodputBps: Math.round(sorted[sorted.length >> 1] ?? 0),
        segments: segs.map((s) => ({
          ms: round(s.durationMs, 1),
          MBps: round(s.goodputBps / 1e6, 2),
          norm: round(s.normalizedGoodput),
          shares: s.proxies.map((p) => `${p.name}:${round(p.share, 3)}`).join(' '),
        })),
        frameTimeline: timeline,
        senders,
        links,
        cpu,
        dataChannelSends: sends,
        downloaderProfile: profile ? summarizeProfile(profile, maps) : 'no profile',
        trace: traceSummary,
      };
      summaries.push(summary);
      log(`play ${play + 1}/${opts.plays}: median ${(Number(summary.medianSegmentGoodputBps) / 1e6).toFixed(2)} MB/s`);
    }
  } finally {
    await relay?.close();
    await cluster?.stop();
    await chromium?.close();
    await pages?.close();
    await origin?.close();
  }
  const file = join(opts.out, `profile-${opts.mode}.json`);
  writeFileSync(file, `${JSON.stringify(summaries, null, 2)}\n`);
  console.log(JSON.stringify(summaries, null, 2));
  log(`written ${file}`);
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
