/**
 * The testbed's topology: client, origo, origin and each proxy in a namespace of their own, all
 * attached to one router namespace, and in the router every emulated link of the profile as a
 * linkem process between two TUN devices. Policy routing by incoming interface steers each flow
 * through its links (docs/testbed.md has the picture):
 *
 *   client <-> [access] <-> [path i] <-> proxy i      proxy i <-> [origin link] <-> origin
 *   client <-> [access] <-> origo                     proxy i <-> origo (not emulated)
 *
 * Addresses are ordinary private IPv4 host addresses, so browsers and libdatachannel gather them
 * as host candidates; nothing runs on loopback across hosts.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DirectionSpec, LinkSpec, RateSpec } from '@mutp/sim/link-spec';
import type { NetworkProfile } from '@mutp/sim/profiles';
import { connect, createNamespace, deleteNamespace, ipIn, listNamespaces, NETNS_PREFIX, sysctl } from './netns';

/** linkem's binary; MUTP_LINKEM overrides the cargo build (e.g. a debug build). */
export const LINKEM = process.env.MUTP_LINKEM ?? join(__dirname, '..', 'emulator', 'target', 'release', 'linkem');
const STATE_ROOT = '/run/mutp-testbed';
const TESTBED_NAME = /^[a-z0-9]{1,10}$/;

export interface Host {
  netns: string;
  address: string;
}

export interface LinkStatsDirection {
  packetsIn: number;
  bytesIn: number;
  packetsOut: number;
  bytesOut: number;
  dropped: { disconnected: number; queue: number; loss: number };
  maxQueueBytes: number;
}
export type LinkStats = { up: LinkStatsDirection; down: LinkStatsDirection };

export interface TestbedDescription {
  name: string;
  profile: string;
  capsKBps: number[];
  seed: number;
  router: string;
  client: Host;
  origo: Host;
  origin: Host;
  proxies: Host[];
  links: { name: string; statsFile: string }[];
  /** When the links started (ms since the epoch): their schedules and traces count from here. */
  startedAtMs: number;
}

export interface Testbed extends TestbedDescription {
  /** Each link's counters, from the stats file linkem rewrites every second. */
  linkStats(): Record<string, LinkStats | undefined>;
  down(): Promise<void>;
}

export interface TestbedOptions {
  /** Short name, [a-z0-9]{1,10}; namespaces are mutp-tb-<name>-<role>. */
  name: string;
  profile: NetworkProfile;
  capsKBps?: number[];
  seed?: number;
  /**
   * linkem processes outlive this process (the `testbed up` command); otherwise they die with it
   * (PR_SET_PDEATHSIG), so a crashed benchmark leaves no emulator running.
   */
  detached?: boolean;
  /** linkem's stderr lines (warnings). */
  onLog?: (line: string) => void;
}

const netnsOf = (name: string, role: string) => `${NETNS_PREFIX}${name}-${role}`;
const stateDir = (name: string) => join(STATE_ROOT, name);

/** Subnet 10.78.K.0/24 per attached host: router .1, host .2. */
function subnetIndex(role: string): number {
  if (role === 'c') return 1;
  if (role === 'o') return 2;
  if (role === 'g') return 3;
  return 10 + Number(role.slice(1));
}
const subnet = (role: string) => `10.78.${subnetIndex(role)}.0/24`;
const hostAddress = (role: string) => `10.78.${subnetIndex(role)}.2`;
const routerAddress = (role: string) => `10.78.${subnetIndex(role)}.1`;

export function describe(name: string, profile: string, capsKBps: number[], seed: number): TestbedDescription {
  const proxies = capsKBps.map((_, i) => ({ netns: netnsOf(name, `p${i}`), address: hostAddress(`p${i}`) }));
  return {
    name,
    profile,
    capsKBps,
    seed,
    router: netnsOf(name, 'r'),
    client: { netns: netnsOf(name, 'c'), address: hostAddress('c') },
    origo: { netns: netnsOf(name, 'o'), address: hostAddress('o') },
    origin: { netns: netnsOf(name, 'g'), address: hostAddress('g') },
    proxies,
    links: [],
    startedAtMs: 0,
  };
}

/**
 * Moves the client to another address of its subnet, as a network change does (Wi-Fi to
 * cellular): the old address is gone at once, and with it every socket bound to it; the links
 * steer by interface, so the new address crosses the same emulated access link. `hostOctet` is
 * the new address's last byte (3-254; .1 is the router). Resolves to the new address.
 */
export async function renumberClient(d: TestbedDescription, hostOctet: number): Promise<string> {
  if (!(Number.isInteger(hostOctet) && hostOctet >= 3 && hostOctet <= 254))
    throw new RangeError(`client host octet must be 3-254, got ${hostOctet}`);
  const address = `10.78.${subnetIndex('c')}.${hostOctet}`;
  await ipIn(d.client.netns, ['addr', 'flush', 'dev', 'eth0']);
  await ipIn(d.client.netns, ['addr', 'add', `${address}/24`, 'dev', 'eth0']);
  // Flushing the address took the default route with it.
  await ipIn(d.client.netns, ['route', 'replace', 'default', 'via', routerAddress('c')]);
  return address;
}

/** Removes every namespace of testbed `name` (processes in them are killed) and its state. */
export async function destroy(name: string): Promise<string[]> {
  if (!TESTBED_NAME.test(name)) throw new Error(`bad testbed name ${JSON.stringify(name)}`);
  const ours = await listNamespaces(`${NETNS_PREFIX}${name}-`);
  // The router first: its emulators go before the hosts they connect.
  ours.sort((a, b) => Number(b.endsWith('-r')) - Number(a.endsWith('-r')));
  for (const netns of ours) await deleteNamespace(netns);
  rmSync(stateDir(name), { recursive: true, force: true });
  return ours;
}

/**
 * Each link's counters, from the stats file linkem rewrites every second (undefined until the
 * first one, or when caught mid-rename).
 */
export function readLinkStats(d: TestbedDescription): Record<string, LinkStats | undefined> {
  const out: Record<string, LinkStats | undefined> = {};
  for (const l of d.links) {
    try {
      out[l.name] = JSON.parse(readFileSync(l.statsFile, 'utf8')) as LinkStats;
    } catch {
      out[l.name] = undefined;
    }
  }
  return out;
}

/** The description a running testbed left in its state directory. */
export function readDescription(name: string): TestbedDescription | undefined {
  const file = join(stateDir(name), 'testbed.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as TestbedDescription) : undefined;
}

interface TunPair {
  link: string;
  clientTun: string;
  serverTun: string;
  clientTable: number;
  serverTable: number;
}

export async function up(o: TestbedOptions): Promise<Testbed> {
  if (!TESTBED_NAME.test(o.name)) throw new Error(`bad testbed name ${JSON.stringify(o.name)}: [a-z0-9]{1,10}`);
  if (!existsSync(LINKEM))
    throw new Error(`${LINKEM} is missing: run scripts/setup.sh (cargo build in testbed/emulator)`);
  const caps = o.capsKBps ?? o.profile.defaultCapsKBps;
  const seed = o.seed ?? 1;
  // A crashed earlier run of the same testbed leaves namespaces behind: start clean.
  await destroy(o.name);
  const d = describe(o.name, o.profile.name, caps, seed);
  const dir = stateDir(o.name);
  mkdirSync(dir, { recursive: true });
  const children: ChildProcess[] = [];
  const testbed: Testbed = {
    ...d,
    linkStats: () => readLinkStats(d),
    async down() {
      for (const c of children) c.kill('SIGTERM');
      await destroy(o.name);
    },
  };
  try {
    await build(d, o, dir, children);
    writeFileSync(join(dir, 'testbed.json'), JSON.stringify(d, null, 2));
  } catch (e) {
    await testbed.down().catch(() => undefined);
    throw e;
  }
  return Object.assign(testbed, { links: d.links });
}

async function build(d: TestbedDescription, o: TestbedOptions, dir: string, children: ChildProcess[]): Promise<void> {
  const r = d.router;
  const roles = ['c', 'o', 'g', ...d.proxies.map((_, i) => `p${i}`)];
  await createNamespace(r);
  await sysctl(r, {
    'net.ipv4.ip_forward': 1,
    'net.ipv4.conf.all.rp_filter': 0,
    'net.ipv4.conf.default.rp_filter': 0,
  });
  for (const role of roles) {
    const netns = netnsOf(d.name, role);
    await createNamespace(netns);
    await connect(
      { netns: r, ifname: `v${role}`, cidr: `${routerAddress(role)}/24` },
      { netns, ifname: 'eth0', cidr: `${hostAddress(role)}/24` },
    );
    await ipIn(netns, ['route', 'add', 'default', 'via', routerAddress(role)]);
  }
  await sysctl(r, Object.fromEntries(roles.map((role) => [`net.ipv4.conf.v${role}.rp_filter`, 0])));

  const links = d.proxies.length > 0 ? o.profile.links(d.capsKBps, d.seed) : { paths: [] };
  const tuns: Record<string, TunPair> = {};
  let table = 100;
  const addLink = async (link: string, spec: LinkSpec) => {
    const pair: TunPair = {
      link,
      clientTun: `${link}-c`,
      serverTun: `${link}-s`,
      clientTable: table++,
      serverTable: table++,
    };
    for (const [tun, t] of [
      [pair.clientTun, pair.clientTable],
      [pair.serverTun, pair.serverTable],
    ] as const) {
      await ipIn(r, ['tuntap', 'add', 'dev', tun, 'mode', 'tun']);
      await ipIn(r, ['link', 'set', tun, 'up']);
      await ipIn(r, ['route', 'add', 'default', 'dev', tun, 'table', String(t)]);
      await sysctl(r, { [`net.ipv4.conf.${tun}.rp_filter`]: 0 });
    }
    tuns[link] = pair;
    const statsFile = join(dir, `${link}.stats.json`);
    const config = {
      clientTun: pair.clientTun,
      serverTun: pair.serverTun,
      seed: d.seed * 1000 + Object.keys(tuns).length,
      statsFile,
      up: stripSimOnly(spec.up),
      down: stripSimOnly(spec.down),
    };
    const configFile = join(dir, `${link}.json`);
    writeFileSync(configFile, JSON.stringify(config, null, 2));
    children.push(await startLinkem(r, configFile, !!o.detached, join(dir, `${link}.log`), o.onLog));
    d.links.push({ name: link, statsFile });
    // Schedules count from each linkem's start; the first one (the access link, if any) is the clock.
    if (d.startedAtMs === 0) d.startedAtMs = Date.now();
  };
  if (links.access) await addLink('acc', links.access);
  for (const [i, spec] of links.paths.entries()) await addLink(`p${i}`, spec);
  if (links.origin) await addLink('org', links.origin);

  // Policy routing: a rule per (incoming interface, destination) sends the packet into the
  // next link's TUN; what leaves a link's far side falls through to the main table.
  let pref = 1000;
  const rule = (iif: string, to: string, tableId: number) =>
    ipIn(r, ['rule', 'add', 'pref', String(pref++), 'iif', iif, 'to', to, 'table', String(tableId)]);
  const acc = tuns.acc;
  const C = subnet('c');
  for (const [i] of d.proxies.entries()) {
    const P = subnet(`p${i}`);
    const path = tuns[`p${i}`];
    if (acc) {
      await rule('vc', P, acc.clientTable);
      await rule(acc.serverTun, P, path.clientTable);
      await rule(`vp${i}`, C, path.serverTable);
      await rule(path.clientTun, C, acc.serverTable);
    } else {
      await rule('vc', P, path.clientTable);
      await rule(`vp${i}`, C, path.serverTable);
    }
    const org = tuns.org;
    if (org) {
      await rule(`vp${i}`, subnet('g'), org.clientTable);
      await rule('vg', P, org.serverTable);
    }
  }
  if (acc) {
    await rule('vc', subnet('o'), acc.clientTable);
    await rule('vo', C, acc.serverTable);
  }
  // The client's direct route to the origin (a fallback fetch): its access link, then the Internet.
  const org = tuns.org;
  const G = subnet('g');
  if (acc) await rule('vc', G, acc.clientTable);
  if (acc && org) await rule(acc.serverTun, G, org.clientTable);
  if (!acc && org) await rule('vc', G, org.clientTable);
  if (org) await rule('vg', C, org.serverTable);
  if (org && acc) await rule(org.clientTun, C, acc.serverTable);
  if (!org && acc) await rule('vg', C, acc.serverTable);
}

/** linkem reads its configuration file as is; the simulator's parsed trace stays out of it. */
function stripSimOnly(direction: DirectionSpec): DirectionSpec {
  const strip = (rate: RateSpec): RateSpec =>
    rate.kind === 'trace' ? { kind: 'trace' as const, file: rate.file } : rate;
  return {
    ...direction,
    rate: strip(direction.rate),
    schedule: direction.schedule
      ? {
          ...direction.schedule,
          segments: direction.schedule.segments.map((s) => (s.rate ? { ...s, rate: strip(s.rate) } : s)),
        }
      : null,
  };
}

/**
 * Starts linkem in the router and waits for its ready line. Its output goes to files, so a
 * detached emulator holds no pipe to this process.
 */
async function startLinkem(
  router: string,
  configFile: string,
  detached: boolean,
  logFile: string,
  onLog?: (line: string) => void,
): Promise<ChildProcess> {
  const outFile = `${logFile}.out`;
  const args = ['netns', 'exec', router, LINKEM, '--config', configFile, ...(detached ? ['--no-pdeathsig'] : [])];
  const child = spawn('ip', args, { stdio: ['ignore', openSync(outFile, 'w'), openSync(logFile, 'w')], detached });
  let exited: number | null | undefined;
  child.once('exit', (code) => (exited = code));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const out = readFileSync(outFile, 'utf8');
    if (/"ready":\s*true/.test(out)) break;
    const log = () => readFileSync(logFile, 'utf8').trim().split('\n').slice(-5).join(' | ');
    if (exited !== undefined) throw new Error(`linkem (${configFile}) exited with ${exited}: ${log()}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`linkem (${configFile}) not ready in 10 s: ${log()}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  if (onLog) for (const line of readFileSync(logFile, 'utf8').split('\n')) if (line) onLog(line);
  if (detached) child.unref();
  return child;
}
