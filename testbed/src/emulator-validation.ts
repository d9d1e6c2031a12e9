/**
 * Validation of linkem, the testbed's user-space link emulator: three namespaces (client, link,
 * server), two TUNs in the link namespace with policy routing through them, linkem between the
 * TUNs, and linkem-probe measuring what comes out. Each check has a deterministic pass/fail band.
 *
 * Runnable: `npx tsx testbed/src/emulator-validation.ts` prints one JSON document (exit 1 if a
 * check fails). Everything it creates lives in namespaces named `mutp-tb-lv<pid>-*`, and it removes
 * them when it ends, also on failure.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import type { DirectionSpec, LossSpec } from '@mutp/sim/link-spec';
import {
  assertOurs,
  connect,
  createNamespace,
  deleteNamespace,
  ipIn,
  NETNS_PREFIX,
  networkUnavailable,
  sysctl,
} from './netns';
import { LINKEM, type LinkStats } from './topology';

const run = promisify(execFile);

export const EMULATOR_DIR = join(__dirname, '..', 'emulator');
export const LINKEM_BIN = LINKEM;
export const PROBE_BIN = join(dirname(LINKEM), 'linkem-probe');

/** UDP (8) + IPv4 (20) headers: linkem limits IP packet bytes, the probe sends UDP payloads. */
export const IP_UDP_OVERHEAD = 28;

// ---- linkem's config: the link spec the simulator shares (sim/src/link-spec.ts) ----

export type Direction = DirectionSpec;
export type Loss = LossSpec;
export interface LinkemConfig {
  clientTun: string;
  serverTun: string;
  seed: number;
  statsFile?: string;
  up: Direction;
  down: Direction;
}
export type LinkemStats = LinkStats;

/** What `linkem-probe recv` prints. */
export interface ProbeResult {
  expected: number;
  received: number;
  lostFraction: number;
  lossBursts: number;
  meanLossBurst: number;
  owdMedianMs: number;
  owdP10Ms: number;
  owdP90Ms: number;
  owdMeanMs: number;
  owdSdMs: number;
  owdMinMs: number;
  owdMaxMs: number;
  deliveredBytesPerSec: number;
  reordered: number;
  arrivalsMonoMs?: number[];
}

// ---- environment ----

export { networkUnavailable } from './netns';

/** Builds linkem with cargo when its binaries are missing (a release build takes ~30 s). */
export async function ensureLinkemBuilt(): Promise<void> {
  if (existsSync(LINKEM_BIN) && existsSync(PROBE_BIN)) return;
  await run('cargo', ['build', '--release', '--quiet'], { cwd: EMULATOR_DIR, timeout: 600_000 });
}

// ---- namespaces (testbed namespaces: netns.ts refuses any other) ----

const PREFIX = `${NETNS_PREFIX}lv${process.pid}-`;
let topologyCounter = 0;

export interface Topology {
  client: string;
  link: string;
  server: string;
  serverIp: string;
  clientIp: string;
  clientTun: string;
  serverTun: string;
  /** False for the plain-forwarding baseline (no TUNs, no policy routing). */
  emulated: boolean;
}

/**
 * client --veth-- link --veth-- server. With `emulated`, the link namespace routes everything that
 * comes in from the client into clientTun and everything from the server into serverTun
 * (policy routing by incoming interface); what linkem writes out of the other TUN is then routed
 * by the main table to the far side's veth.
 */
export async function createTopology(emulated = true): Promise<Topology> {
  const base = `${PREFIX}${topologyCounter++}`;
  const net = 10 + (process.pid % 200); // a /16 per run: namespaces are private anyway
  const t: Topology = {
    client: `${base}-c`,
    link: `${base}-l`,
    server: `${base}-s`,
    clientIp: `10.${net}.1.2`,
    serverIp: `10.${net}.2.2`,
    clientTun: 'lvc-tun',
    serverTun: 'lvs-tun',
    emulated,
  };
  try {
    await buildTopology(t, net);
  } catch (e) {
    await destroyTopology(t);
    throw e;
  }
  return t;
}

async function buildTopology(t: Topology, net: number): Promise<void> {
  for (const ns of [t.client, t.link, t.server]) await createNamespace(ns);
  // rp_filter off before the devices exist, so they inherit it (linkem's packets come in on a TUN).
  await sysctl(t.link, {
    'net.ipv4.ip_forward': 1,
    'net.ipv4.conf.all.rp_filter': 0,
    'net.ipv4.conf.default.rp_filter': 0,
  });
  await connect(
    { netns: t.link, ifname: 'lvc', cidr: `10.${net}.1.1/24` },
    { netns: t.client, ifname: 'lv0', cidr: `${t.clientIp}/24` },
  );
  await connect(
    { netns: t.link, ifname: 'lvs', cidr: `10.${net}.2.1/24` },
    { netns: t.server, ifname: 'lv0', cidr: `${t.serverIp}/24` },
  );
  await ipIn(t.client, ['route', 'add', 'default', 'via', `10.${net}.1.1`]);
  await ipIn(t.server, ['route', 'add', 'default', 'via', `10.${net}.2.1`]);
  if (!t.emulated) return;
  for (const tun of [t.clientTun, t.serverTun]) {
    await ipIn(t.link, ['tuntap', 'add', 'dev', tun, 'mode', 'tun']);
    await ipIn(t.link, ['link', 'set', tun, 'up']);
  }
  await ipIn(t.link, ['route', 'add', 'default', 'dev', t.clientTun, 'table', '100']);
  await ipIn(t.link, ['route', 'add', 'default', 'dev', t.serverTun, 'table', '101']);
  await ipIn(t.link, ['rule', 'add', 'iif', 'lvc', 'lookup', '100']);
  await ipIn(t.link, ['rule', 'add', 'iif', 'lvs', 'lookup', '101']);
}

/** Kills what runs in the namespaces and deletes them (the TUNs go with the link namespace). */
export async function destroyTopology(t: Topology): Promise<void> {
  for (const ns of [t.link, t.client, t.server]) await deleteNamespace(ns);
}

/** Runs fn on a fresh topology and always tears the topology down afterwards. */
export async function withTopology<T>(fn: (t: Topology) => Promise<T>, emulated = true): Promise<T> {
  const t = await createTopology(emulated);
  try {
    return await fn(t);
  } finally {
    await destroyTopology(t);
  }
}

// ---- processes ----

function spawnIn(ns: string, bin: string, args: string[]): ChildProcess {
  assertOurs(ns);
  // `ip netns exec` execs the command in place, so the child's pid is the program's own pid.
  return spawn('ip', ['netns', 'exec', ns, bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Resolves with the first stdout/stderr line that satisfies `match`; rejects on exit or timeout. */
function waitForLine(
  child: ChildProcess,
  stream: 'stdout' | 'stderr',
  match: (l: string) => boolean,
  ms: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child[stream]! });
    const done = (err?: Error, line?: string): void => {
      clearTimeout(timer);
      rl.removeAllListeners('line');
      child.removeListener('exit', onExit);
      if (err) reject(err);
      else resolve(line!);
    };
    const onExit = (code: number | null): void => done(new Error(`process exited (${code}) before it was ready`));
    const timer = setTimeout(() => done(new Error(`no ready line within ${ms} ms`)), ms);
    rl.on('line', (l) => {
      if (match(l)) done(undefined, l);
    });
    child.once('exit', onExit);
  });
}

function collect(child: ChildProcess, stream: 'stdout' | 'stderr'): () => string {
  let text = '';
  child[stream]!.on('data', (d: Buffer) => (text += d.toString()));
  return () => text;
}

function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** CLOCK_MONOTONIC in ms (process.hrtime reads the same clock as the probe's timestamps). */
export function monoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export interface RunningLinkem {
  pid: number;
  /** Monotonic time when node saw `{"ready":true}`: schedule time 0, give or take a millisecond. */
  readyMonoMs: number;
  stop(): Promise<LinkemStats>;
}

export async function startLinkem(t: Topology, config: LinkemConfig, dir: string): Promise<RunningLinkem> {
  const file = join(dir, `linkem-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify(config));
  const child = spawnIn(t.link, LINKEM_BIN, ['--config', file]);
  const stderr = collect(child, 'stderr');
  const lines: string[] = [];
  try {
    await waitForLine(child, 'stdout', (l) => l === '{"ready":true}', 5000);
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`linkem did not start: ${(e as Error).message}: ${stderr().trim()}`);
  }
  const readyMonoMs = monoMs();
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
  return {
    pid: child.pid!,
    readyMonoMs,
    async stop(): Promise<LinkemStats> {
      child.kill('SIGTERM');
      const code = await exited(child);
      await new Promise((r) => setImmediate(r)); // let readline deliver the last line
      const last = lines.at(-1);
      if (code !== 0 || last === undefined) throw new Error(`linkem exited ${code}: ${stderr().trim()}`);
      return JSON.parse(last) as LinkemStats;
    },
  };
}

export interface ProbeRun {
  /** UDP payload bytes per datagram (>= 16). */
  size: number;
  /** Sending rate in IP bits/s (payload + 28 per datagram); 0 = as fast as possible. */
  rateBps: number;
  count: number;
  durationMs?: number;
  /** How long the receiver waits in all. */
  timeoutMs: number;
  idleMs?: number;
  arrivals?: boolean;
  port?: number;
}

/** Starts the receiver in the server namespace, waits until it is bound, then sends from the client. */
export async function runProbe(t: Topology, p: ProbeRun): Promise<ProbeResult> {
  const port = p.port ?? 9000;
  const recvArgs = [
    'recv',
    '--bind',
    `${t.serverIp}:${port}`,
    '--expect',
    String(p.count),
    '--timeout-ms',
    String(p.timeoutMs),
  ];
  if (p.idleMs !== undefined) recvArgs.push('--idle-ms', String(p.idleMs));
  if (p.arrivals) recvArgs.push('--arrivals');
  const receiver = spawnIn(t.server, PROBE_BIN, recvArgs);
  const out = collect(receiver, 'stdout');
  await waitForLine(receiver, 'stderr', (l) => l === 'listening', 5000);
  const sendArgs = [
    'send',
    '--to',
    `${t.serverIp}:${port}`,
    '--rate-bps',
    String(Math.round(p.rateBps)),
    '--size',
    String(p.size),
    '--count',
    String(p.count),
  ];
  if (p.durationMs !== undefined) sendArgs.push('--duration-ms', String(p.durationMs));
  const sender = spawnIn(t.client, PROBE_BIN, sendArgs);
  const [sendCode, recvCode] = await Promise.all([exited(sender), exited(receiver)]);
  if (sendCode !== 0 || recvCode !== 0) throw new Error(`probe failed: send ${sendCode}, recv ${recvCode}`);
  return JSON.parse(out().trim().split('\n').at(-1)!) as ProbeResult;
}

// ---- checks ----

export interface CheckResult {
  name: string;
  pass: boolean;
  measured: number;
  expected: number;
  /** Allowed |measured - expected|, in the measured unit. */
  tolerance: number;
  detail?: Record<string, number | string>;
}

function check(
  name: string,
  measured: number,
  expected: number,
  tolerance: number,
  detail?: CheckResult['detail'],
): CheckResult {
  return { name, pass: Math.abs(measured - expected) <= tolerance, measured, expected, tolerance, detail };
}

const UNLIMITED: Direction = { rate: { kind: 'unlimited' }, delayMs: 0 };

function linkConfig(t: Topology, up: Direction, down: Direction = UNLIMITED, seed = 1): LinkemConfig {
  return { clientTun: t.clientTun, serverTun: t.serverTun, seed, up, down };
}

/** Runs one linkem config and one probe stream on an existing topology. */
async function measure(t: Topology, dir: string, up: Direction, p: ProbeRun) {
  const linkem = await startLinkem(t, linkConfig(t, up), dir);
  try {
    const probe = await runProbe(t, p);
    return { probe, stats: await linkem.stop(), readyMonoMs: linkem.readyMonoMs };
  } catch (e) {
    await linkem.stop().catch(() => undefined);
    throw e;
  }
}

const PAYLOAD = 1200;

/**
 * Seconds of the constant-rate streams: about 3,000 packets at 896 KB/s after the first 5 %, whose
 * delivered rate a pacing error of 3 % would move by ~90 packets (it was 8 s: CI time).
 */
const RATE_SECONDS = 4;

/** Sends at 1.3x the link rate for RATE_SECONDS; the steady delivered rate must be within 3 % of the rate. */
export async function checkConstantRate(
  t: Topology,
  dir: string,
  bytesPerSecond: number,
  name: string,
): Promise<CheckResult> {
  const rateBps = bytesPerSecond * 8 * 1.3;
  const perPacket = PAYLOAD + IP_UDP_OVERHEAD;
  const count = Math.ceil((rateBps / 8 / perPacket) * RATE_SECONDS);
  const { probe, stats } = await measure(
    t,
    dir,
    { rate: { kind: 'constant', bytesPerSecond }, delayMs: 5 },
    {
      size: PAYLOAD,
      rateBps,
      count,
      durationMs: RATE_SECONDS * 1000,
      timeoutMs: RATE_SECONDS * 1000 + 4000,
      idleMs: 1000,
    },
  );
  return check(name, probe.deliveredBytesPerSec, bytesPerSecond, bytesPerSecond * 0.03, {
    queueDrops: stats.up.dropped.queue,
    received: probe.received,
  });
}

export async function checkConstantDelay(t: Topology, dir: string): Promise<CheckResult> {
  const { probe } = await measure(
    t,
    dir,
    { rate: { kind: 'unlimited' }, delayMs: 20 },
    {
      size: 200,
      rateBps: 200 * 228 * 8,
      count: 400,
      timeoutMs: 6000,
      idleMs: 1000,
    },
  );
  return check('delay: 20 ms constant, median one-way', probe.owdMedianMs, 20, 1, {
    p10Ms: probe.owdP10Ms,
    p90Ms: probe.owdP90Ms,
  });
}

/** 40 packets/s keeps the spacing (25 ms) far above the jitter, so FIFO clamping does not shrink it. */
export async function checkNormalJitter(t: Topology, dir: string): Promise<CheckResult> {
  const { probe } = await measure(
    t,
    dir,
    { rate: { kind: 'unlimited' }, delayMs: 20, jitter: { kind: 'normal', sdMs: 3 } },
    {
      size: 200,
      rateBps: 40 * 228 * 8,
      count: 240,
      timeoutMs: 9000,
      idleMs: 1000,
    },
  );
  return check('jitter: normal sdMs 3, one-way delay sd', probe.owdSdMs, 3, 3 * 0.15, {
    medianMs: probe.owdMedianMs,
    // For diagnosis: an sd estimate that a few late outliers (a busy machine) barely move.
    interdecileSdMs: (probe.owdP90Ms - probe.owdP10Ms) / 2.5631,
    maxMs: probe.owdMaxMs,
    reordered: probe.reordered,
  });
}

const LOSS_PACKETS = 100_000;
const LOSS_PPS = 25_000;

function lossProbe(): ProbeRun {
  return {
    size: 64,
    rateBps: LOSS_PPS * (64 + IP_UDP_OVERHEAD) * 8,
    count: LOSS_PACKETS,
    timeoutMs: 12_000,
    idleMs: 1000,
  };
}

export async function checkIidLoss(t: Topology, dir: string): Promise<CheckResult> {
  const { probe, stats } = await measure(
    t,
    dir,
    { rate: { kind: 'unlimited' }, delayMs: 1, loss: { kind: 'iid', p: 0.02 } },
    lossProbe(),
  );
  return check('loss: iid 0.02 over 1e5 packets', probe.lostFraction, 0.02, 0.005, {
    linkemLossFraction: stats.up.dropped.loss / stats.up.packetsIn,
  });
}

export async function checkGilbertElliott(t: Topology, dir: string): Promise<CheckResult[]> {
  const loss: Loss = { kind: 'gilbertElliott', pGoodToBad: 0.01, pBadToGood: 0.3, lossGood: 0, lossBad: 1 };
  const { probe } = await measure(t, dir, { rate: { kind: 'unlimited' }, delayMs: 1, loss }, lossProbe());
  const stationary = loss.pGoodToBad / (loss.pGoodToBad + loss.pBadToGood);
  const burst = 1 / loss.pBadToGood;
  return [
    check('loss: Gilbert-Elliott stationary rate', probe.lostFraction, stationary, 0.005, {
      lossBursts: probe.lossBursts,
    }),
    check('loss: Gilbert-Elliott mean burst length', probe.meanLossBurst, burst, burst * 0.2),
  ];
}

/**
 * 12 Mbit/s as one 1504-byte opportunity per ms, written out for 100 ms (the file repeats), for 3 s
 * (30 repeats of the file, about 3,400 packets).
 */
export async function checkTrace(t: Topology, dir: string): Promise<CheckResult> {
  const file = join(dir, '12mbps.trace');
  writeFileSync(file, Array.from({ length: 100 }, (_, i) => String(i + 1)).join('\n') + '\n');
  const bytesPerSecond = 1504 * 1000;
  const rateBps = bytesPerSecond * 8 * 1.3;
  const count = Math.ceil((rateBps / 8 / (PAYLOAD + IP_UDP_OVERHEAD)) * 3);
  const { probe } = await measure(
    t,
    dir,
    { rate: { kind: 'trace', file }, delayMs: 5 },
    {
      size: PAYLOAD,
      rateBps,
      count,
      durationMs: 3000,
      timeoutMs: 6000,
      idleMs: 1000,
    },
  );
  return check(
    'trace: 12 Mbit/s mahimahi trace, delivered rate',
    probe.deliveredBytesPerSec,
    bytesPerSecond,
    bytesPerSecond * 0.03,
  );
}

/**
 * 1 s connected / 1 s disconnected, 100 packets/s for 6 s (three whole cycles): about half is
 * lost, and every arrival falls in a connected second shifted by the delay (plus a margin for
 * when node saw the ready line).
 */
export async function checkSchedule(t: Topology, dir: string): Promise<CheckResult[]> {
  const delayMs = 10;
  const marginMs = 15;
  const up: Direction = {
    rate: { kind: 'unlimited' },
    delayMs,
    schedule: {
      loop: true,
      segments: [
        { durationMs: 1000, connected: true },
        { durationMs: 1000, connected: false },
      ],
    },
  };
  const { probe, readyMonoMs } = await measure(t, dir, up, {
    size: 100,
    rateBps: 100 * 128 * 8,
    count: 600,
    timeoutMs: 9000,
    idleMs: 2500,
    arrivals: true,
  });
  const phases = (probe.arrivalsMonoMs ?? []).map((a) => (((a - readyMonoMs) % 2000) + 2000) % 2000);
  const inOff = phases.filter((ph) => ph > 1000 + delayMs + marginMs && ph < 2000 - marginMs).length;
  return [
    check('schedule: 1 s on / 1 s off, lost fraction', probe.lostFraction, 0.5, 0.05),
    check('schedule: arrivals during disconnected periods', inOff, 0, 0, { arrivals: phases.length }),
  ];
}

export interface ValidationReport {
  pass: boolean;
  seconds: number;
  checks: CheckResult[];
}

/** Runs every check on one topology (linkem restarts per check); always tears down. */
export async function runValidation(log: (msg: string) => void = () => undefined): Promise<ValidationReport> {
  const started = Date.now();
  await ensureLinkemBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'mutp-lv-'));
  try {
    const checks = await withTopology(async (t) => {
      const out: CheckResult[] = [];
      const add = (r: CheckResult | CheckResult[]): void => {
        for (const c of [r].flat()) {
          log(`${c.pass ? 'ok  ' : 'FAIL'} ${c.name}: ${c.measured} (expected ${c.expected} ± ${c.tolerance})`);
          out.push(c);
        }
      };
      add(await checkConstantRate(t, dir, 917_504, 'rate: constant 896 KB/s, delivered B/s'));
      add(await checkConstantRate(t, dir, 7_000_000 / 8, 'rate: constant 7 Mbit/s, delivered B/s'));
      add(await checkConstantDelay(t, dir));
      add(await checkNormalJitter(t, dir));
      add(await checkIidLoss(t, dir));
      add(await checkGilbertElliott(t, dir));
      add(await checkTrace(t, dir));
      add(await checkSchedule(t, dir));
      return out;
    });
    return { pass: checks.every((c) => c.pass), seconds: (Date.now() - started) / 1000, checks };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number, ticksPerSecond = 100): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

if (require.main === module) {
  const why = networkUnavailable();
  if (why) {
    console.error(`emulator validation skipped: ${why}`);
    process.exit(0);
  }
  runValidation((m) => console.error(m))
    .then((r) => {
      console.log(JSON.stringify(r, null, 2));
      process.exit(r.pass ? 0 : 1);
    })
    .catch((e: unknown) => {
      console.error(e);
      process.exit(1);
    });
}
