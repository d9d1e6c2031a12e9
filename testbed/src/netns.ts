/**
 * The few iproute2 operations the testbed needs, each confined to a namespace whose name carries
 * the testbed's prefix: nothing here configures the namespace it is called from.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Every testbed namespace starts with this; `down` deletes only such namespaces. */
export const NETNS_PREFIX = 'mutp-tb-';
const NAME = /^[a-z0-9-]{1,40}$/;

export class NetnsError extends Error {}

export function assertOurs(netns: string): void {
  if (!netns.startsWith(NETNS_PREFIX) || !NAME.test(netns))
    throw new NetnsError(`refusing to touch ${JSON.stringify(netns)}: not a testbed namespace (${NETNS_PREFIX}*)`);
}

async function ip(args: string[]): Promise<string> {
  try {
    const { stdout } = await run('ip', args, { timeout: 10_000 });
    return stdout;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new NetnsError(`ip ${args.join(' ')}: ${(err.stderr ?? err.message).trim()}`);
  }
}

/** `ip -n <netns> ...`: one command inside one of our namespaces. */
export async function ipIn(netns: string, args: string[]): Promise<string> {
  assertOurs(netns);
  return ip(['-n', netns, ...args]);
}

/** A command (not `ip`) inside one of our namespaces, e.g. sysctl. */
export async function execIn(netns: string, command: string, args: string[]): Promise<string> {
  assertOurs(netns);
  try {
    const { stdout } = await run('ip', ['netns', 'exec', netns, command, ...args], { timeout: 10_000 });
    return stdout;
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new NetnsError(`${netns}: ${command} ${args.join(' ')}: ${(err.stderr ?? err.message).trim()}`);
  }
}

export async function listNamespaces(prefix = NETNS_PREFIX): Promise<string[]> {
  const out = await ip(['netns', 'list']);
  return out
    .split('\n')
    .map((line) => line.split(' ')[0])
    .filter((name) => name.startsWith(prefix));
}

export async function createNamespace(netns: string): Promise<void> {
  assertOurs(netns);
  await ip(['netns', 'add', netns]);
  await ipIn(netns, ['link', 'set', 'lo', 'up']);
}

/** Pids of every process in the namespace. */
export async function namespacePids(netns: string): Promise<number[]> {
  assertOurs(netns);
  const out = await ip(['netns', 'pids', netns]).catch(() => '');
  return out
    .split('\n')
    .filter((l) => /^\d+$/.test(l.trim()))
    .map(Number);
}

/** SIGKILLs what runs in the namespace, then deletes it (its veths and TUNs go with it). */
export async function deleteNamespace(netns: string): Promise<void> {
  assertOurs(netns);
  for (const pid of await namespacePids(netns)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await ip(['netns', 'delete', netns]).catch((e: unknown) => {
    if (!String(e).includes('No such file')) throw e;
  });
}

/**
 * A veth pair from `a` to `b`, created inside `a` and its peer moved straight into `b`, each end
 * addressed and up.
 */
export async function connect(
  a: { netns: string; ifname: string; cidr: string },
  b: { netns: string; ifname: string; cidr: string },
): Promise<void> {
  assertOurs(b.netns);
  await ipIn(a.netns, ['link', 'add', a.ifname, 'type', 'veth', 'peer', 'name', b.ifname, 'netns', b.netns]);
  await ipIn(a.netns, ['addr', 'add', a.cidr, 'dev', a.ifname]);
  await ipIn(b.netns, ['addr', 'add', b.cidr, 'dev', b.ifname]);
  await ipIn(a.netns, ['link', 'set', a.ifname, 'up']);
  await ipIn(b.netns, ['link', 'set', b.ifname, 'up']);
}

export async function sysctl(netns: string, settings: Record<string, string | number>): Promise<void> {
  await execIn(netns, 'sysctl', ['-q', '-w', ...Object.entries(settings).map(([k, v]) => `${k}=${v}`)]);
}

/** Why namespaces, veths and TUNs cannot be built here (Linux, root, /dev/net/tun), or undefined. */
export function networkUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'needs Linux network namespaces';
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, TUN devices)';
  if (!existsSync('/dev/net/tun')) return 'needs /dev/net/tun';
  return undefined;
}

/** networkUnavailable(), and whether iproute2 answers. */
export async function netnsUnavailable(): Promise<string | undefined> {
  const why = networkUnavailable();
  if (why) return why;
  try {
    await ip(['netns', 'list']);
  } catch (e) {
    return `ip netns unavailable: ${String(e)}`;
  }
  return undefined;
}
