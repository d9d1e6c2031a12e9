/**
 * `npx tsx e2e/src/bench-quic-clients.ts [--profile paper-loss2] [--cap-kbps 1792] [--seconds 6] [--repeats 3]
 * [--clients node,chromium,firefox] [--json]`: how fast one proxy's QUIC sender (MutpRate, capped
 * as a proxy caps it) gets datagrams to each kind of client over the same emulated path, with no
 * MUTP above it: the Node client's QUIC (quinn, @mutp/quic), Chromium's and Firefox ESR's
 * WebTransport (a page reading `datagrams.readable`, no extension). The clients take turns, in
 * the same testbed, so a busy machine weighs on each alike.
 *
 * Why: on `paper-loss2` the extension in Chromium reached ~2.1x Parallel HTTP where the Node
 * client reached 2.5x. One suspect is below MUTP: the sender paces by a window of rate x RTT that
 * counts bytes until the client acknowledges them, and a client that delays its ACKs (Chromium's
 * QUIC decimates them) could hold that window shut for longer than the RTT the controller
 * measures (quinn leaves the reported ACK delay out). This bench measures, per client, the
 * delivered rate against the cap, the sender's view (RTT, window, rate, delivery rate, send
 * buffer) and the client's ACK frequency, with nothing of MUTP or the extension in the way.
 *
 * The sender is e2e/src/quic-rate-server.ts in the proxy host's namespace; each row: the client,
 * datagrams sent and received, received bytes over the time from the first to the last datagram
 * (goodput), its fraction of the cap, and the sender's medians. Last stdout line with --json: rows.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { QuicClient } from '@mutp/quic';
import { launchChromium } from './browser';
import { spawnService } from './cluster';
import { launchFirefoxWithoutExtension } from './firefox-sessions';
import { startPlayerPages } from './player-pages';
import { enterTestbed } from './testbed-run';
import { readLinkStats, TestbedDescription } from '@mutp/testbed';
import type { Browser } from 'puppeteer-core';

const CLIENTS = ['node', 'chromium', 'firefox'] as const;
type ClientKind = (typeof CLIENTS)[number];
const DATAGRAM_BYTES = 1200;
/** The reader stops after this long without a datagram (the sender stopped). */
const QUIET_MS = 1000;
/** The first datagram may take this long (a busy machine). */
const FIRST_WAIT_MS = 5000;

const opts = new Command()
  .name('bench:quic-clients')
  .description("One QUIC sender's delivered rate to the Node client, Chromium and Firefox over the same path.")
  .option('--profile <name>', 'network profile (testbed/)', 'paper-loss2')
  .option('--seed <n>', "seed of the profile's losses", (v) => Number(v), 1)
  .option('--cap-kbps <n>', 'the proxy host and its cap, KB/s (1 KB = 1024 B)', (v) => Number(v), 1792)
  .option('--seconds <s>', 'how long each client is sent to', (v) => Number(v), 6)
  .option('--repeats <n>', 'turns of every client', (v) => Number(v), 3)
  .option('--clients <list>', 'node,chromium,firefox', CLIENTS.join(','))
  .option('--json', 'the rows as JSON on the last line')
  .parse()
  .opts<{
    profile: string;
    seed: number;
    capKbps: number;
    seconds: number;
    repeats: number;
    clients: string;
    json?: boolean;
  }>();

interface Received {
  /** What the client's transport says it can send (WebTransport's datagrams.maxDatagramSize). */
  maxDatagramSize: number | null;
  /** Probe datagrams (PROBE_SIZES) the client's transport refused to send. */
  refusedSizes: number[];
  received: number;
  firstMs: number;
  lastMs: number;
}

interface ServerLine {
  session: number;
  sent: number;
  received: number;
  largestReceived: number;
  rttMs: number | null;
  minRttMs: number | null;
  congestionWindow: number | null;
  rateBps: number | null;
  deliveryRateBps: number | null;
  bufferedBytes: number | null;
  lostPackets: number | null;
  sentPackets: number | null;
}

/** Packets into the emulated links so far, both directions summed over the links (down: towards the client). */
function linkPackets(testbed: TestbedDescription): { up: number; down: number } {
  const sum = { up: 0, down: 0 };
  for (const l of Object.values(readLinkStats(testbed))) {
    sum.up += l?.up.packetsIn ?? 0;
    sum.down += l?.down.packetsIn ?? 0;
  }
  return sum;
}

/** Client-to-proxy datagrams sent first, up to MUTP's largest message: which sizes get through. */
const PROBE_SIZES = [100, 600, 1000, 1100, 1150, 1200];

/** linkem rewrites its counters every second: this long after a session they include it. */
const STATS_SETTLE_MS = 1500;

/** Reads a WebTransport session's datagrams in a page until QUIET_MS pass without one. A string: see origo-outage-browser.ts. */
function pageReader(url: string, hashBase64: string, limitMs: number): string {
  return `(async () => {
    const hash = Uint8Array.from(atob(${JSON.stringify(hashBase64)}), (c) => c.charCodeAt(0));
    const wt = new WebTransport(${JSON.stringify(url)}, { serverCertificateHashes: [{ algorithm: 'sha-256', value: hash }] });
    await wt.ready;
    wt.datagrams.incomingHighWaterMark = 4096;
    const maxDatagramSize = wt.datagrams.maxDatagramSize ?? null;
    const writer = wt.datagrams.writable.getWriter();
    const refusedSizes = [];
    for (const size of ${JSON.stringify(PROBE_SIZES)}) {
      await writer.write(new Uint8Array(size)).catch(() => refusedSizes.push(size));
    }
    const reader = wt.datagrams.readable.getReader();
    let received = 0, firstMs = 0, lastMs = 0;
    const start = performance.now();
    for (;;) {
      const quiet = new Promise((r) => setTimeout(() => r(null), received === 0 ? ${FIRST_WAIT_MS} : ${QUIET_MS}));
      const got = await Promise.race([reader.read(), quiet]);
      const now = performance.now();
      if (got === null || got.done || now - start > ${limitMs}) break;
      if (received === 0) firstMs = now;
      lastMs = now;
      received++;
    }
    wt.close();
    return { maxDatagramSize, refusedSizes, received, firstMs, lastMs };
  })()`;
}

async function inBrowser(browser: Browser, pageUrl: string, url: string, hash: string, limitMs: number) {
  const page = await browser.newPage();
  try {
    await page.goto(pageUrl, { waitUntil: 'load' });
    return (await page.evaluate(pageReader(url, hash, limitMs))) as Received;
  } finally {
    await page.close();
  }
}

async function inNode(url: string, hash: string, limitMs: number): Promise<Received> {
  const r: Received = { maxDatagramSize: null, refusedSizes: [], received: 0, firstMs: 0, lastMs: 0 };
  const session = await QuicClient.connect({
    url,
    serverCertificateHashes: [new Uint8Array(Buffer.from(hash, 'base64'))],
    initialRttMs: 100,
    onDatagram: (_d, at) => {
      if (r.received === 0) r.firstMs = at;
      r.lastMs = at;
      r.received++;
    },
  });
  r.maxDatagramSize = session.info().maxDatagramSize;
  for (const size of PROBE_SIZES) if (!session.sendDatagram(Buffer.alloc(size))) r.refusedSizes.push(size);
  const start = performance.now();
  while (performance.now() - start < limitMs) {
    await new Promise((res) => setTimeout(res, 100));
    const waited = performance.now() - (r.received > 0 ? r.lastMs : start);
    if (waited > (r.received > 0 ? QUIET_MS : FIRST_WAIT_MS)) break;
  }
  session.close(0, 'done');
  return r;
}

/** The sender in the proxy host's namespace: its first line (port, hash), then one line per session. */
async function startSender(host: { netns: string; address: string }, capBps: number) {
  const child: ChildProcess = spawnService(
    'e2e/src/quic-rate-server.ts',
    ['--host', host.address, '--cap-bps', String(capBps), '--seconds', String(opts.seconds)],
    {},
    host.netns,
  );
  const lines: ServerLine[] = [];
  const waiting: ((l: ServerLine) => void)[] = [];
  const errors: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => errors.push(l));
  const out = createInterface({ input: child.stdout! });
  const first = await new Promise<{ port: number; sha256: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sender not up in 30 s: ${errors.join(' | ')}`)), 30_000);
    child.once('exit', (c) => reject(new Error(`sender exited with ${c}: ${errors.join(' | ')}`)));
    out.once('line', (line) => {
      clearTimeout(timer);
      resolve(JSON.parse(line) as { port: number; sha256: string });
    });
  });
  out.on('line', (line) => {
    const l = JSON.parse(line) as ServerLine;
    const w = waiting.shift();
    if (w) w(l);
    else lines.push(l);
  });
  return {
    url: `https://${host.address}:${first.port}/probe`,
    hash: first.sha256,
    /** The next session's line (bounded). */
    next: () =>
      lines.length > 0
        ? Promise.resolve(lines.shift()!)
        : new Promise<ServerLine>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error('no session line from the sender in 15 s')), 15_000);
            waiting.push((l) => {
              clearTimeout(timer);
              resolve(l);
            });
          }),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function main(): Promise<void> {
  const clients = opts.clients.split(',') as ClientKind[];
  for (const c of clients) if (!CLIENTS.includes(c)) throw new Error(`unknown client ${c}`);
  const testbed = await enterTestbed(__filename, opts.profile, [opts.capKbps], opts.seed);
  if (!testbed) return;
  const capBps = opts.capKbps * 1024;
  const sender = await startSender(testbed.proxies[0], capBps);
  const pages = await startPlayerPages();
  const chromium = clients.includes('chromium')
    ? await launchChromium({ extension: false, loopbackPeers: false })
    : undefined;
  const firefox = clients.includes('firefox') ? await launchFirefoxWithoutExtension() : undefined;
  const limitMs = (opts.seconds + 5) * 1000;
  const pageUrl = `${pages.url}/quic-probe`; // a 404 page: a secure context (http://127.0.0.1) is all it needs
  const rows = [];
  try {
    await new Promise((res) => setTimeout(res, STATS_SETTLE_MS));
    for (let r = 0; r < opts.repeats; r++) {
      for (const client of clients) {
        const packetsBefore = linkPackets(testbed);
        const got =
          client === 'node'
            ? await inNode(sender.url, sender.hash, limitMs)
            : await inBrowser(
                (client === 'chromium' ? chromium : firefox)!.browser,
                pageUrl,
                sender.url,
                sender.hash,
                limitMs,
              );
        const s = await sender.next();
        await new Promise((res) => setTimeout(res, STATS_SETTLE_MS));
        const packetsAfter = linkPackets(testbed);
        const up = packetsAfter.up - packetsBefore.up;
        const down = packetsAfter.down - packetsBefore.down;
        const seconds = (got.lastMs - got.firstMs) / 1000;
        const goodputBps = seconds > 0 ? Math.round((got.received * DATAGRAM_BYTES) / seconds) : 0;
        const row = {
          client,
          repeat: r,
          sent: s.sent,
          received: got.received,
          lossFraction: s.sent > 0 ? Math.round((1 - got.received / s.sent) * 1000) / 1000 : null,
          goodputBps,
          ofCap: Math.round((goodputBps / capBps) * 1000) / 1000,
          // The client sends nothing but its handshake and ACKs: packets up per packet down is its ACK frequency.
          packetsUp: up,
          packetsDown: down,
          upPerDown: down > 0 ? Math.round((up / down) * 1000) / 1000 : null,
          // Client to proxy: of PROBE_SIZES, how many arrived, the largest, and what the client refused.
          clientMaxDatagramSize: got.maxDatagramSize,
          probesArrived: s.received,
          largestProbeArrived: s.largestReceived,
          probesRefused: got.refusedSizes,
          sender: s,
        };
        rows.push(row);
        process.stderr.write(
          `bench:quic-clients ${client} #${r + 1}: ${(goodputBps / 1e6).toFixed(3)} MB/s = ${row.ofCap} of the cap, ` +
            `received ${got.received}/${s.sent}; client's max datagram ${got.maxDatagramSize}, probes arrived ` +
            `${s.received}/${PROBE_SIZES.length} (largest ${s.largestReceived}, refused ${JSON.stringify(got.refusedSizes)}); packets up/down ${up}/${down} (${row.upPerDown}); sender rtt ${s.rttMs} ms (min ${s.minRttMs}), window ${s.congestionWindow} B, ` +
            `rate ${s.rateBps} B/s, delivery ${s.deliveryRateBps} B/s, send buffer ${s.bufferedBytes} B, lost ${s.lostPackets}/${s.sentPackets} packets\n`,
        );
      }
    }
  } finally {
    await chromium?.close();
    await firefox?.close();
    await pages.close();
    await sender.stop();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  for (const client of clients) {
    const mine = rows.filter((x) => x.client === client);
    console.log(
      `${client.padEnd(9)} median ${(median(mine.map((x) => x.goodputBps)) / 1e6).toFixed(3)} MB/s, ` +
        `${median(mine.map((x) => x.ofCap))} of the cap (${mine.map((x) => x.ofCap).join(', ')}), ` +
        `ACK packets per packet received ${median(mine.map((x) => x.upPerDown ?? NaN))}`,
    );
  }
  if (opts.json) console.log(JSON.stringify(rows));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
