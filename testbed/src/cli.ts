/**
 * `npm run testbed -- up --profile P [--caps 896,1792] [--name tb]`, `down`, `status`,
 * `exec <role> -- <command...>`: the testbed by hand. Benchmarks and tests bring it up themselves
 * (up() in topology.ts) and take it down when they end, also when they fail.
 */
import { spawnSync } from 'node:child_process';
import { Command } from 'commander';
import { PROFILES } from '@mutp/sim/profiles';
import { loadProfile } from './profile-loader';
import { destroy, readDescription, readLinkStats, TestbedDescription, up } from './topology';
import { netnsUnavailable } from './netns';

const program = new Command()
  .name('testbed')
  .description(
    'Client, proxies, origo and origin in network namespaces; every client-proxy path through a linkem emulated link.',
  )
  .option('--name <name>', 'testbed name ([a-z0-9]{1,10}); namespaces are mutp-tb-<name>-*', 'tb');

program
  .command('up')
  .description('build the namespaces and links of a profile (removes a leftover testbed of the same name first)')
  .requiredOption('--profile <name>', `one of ${Object.keys(PROFILES).join(', ')}, or trace:<mahimahi file>`)
  .option('--caps <list>', "proxy caps in KB/s, comma-separated (default: the profile's fleet)")
  .option('--seed <n>', 'seed for the profile (schedules, loss)', '1')
  .option('--hold', 'stay in the foreground and take the testbed down on Ctrl-C / SIGTERM')
  .action(async (o: { profile: string; caps?: string; seed: string; hold?: boolean }) => {
    await refuseWithoutNetns();
    const profile = loadProfile(o.profile);
    const capsKBps = o.caps ? o.caps.split(',').map(Number) : undefined;
    if (capsKBps?.some((c) => !(c > 0))) throw new Error(`--caps: positive KB/s values, got ${o.caps}`);
    const tb = await up({ name: name(), profile, capsKBps, seed: Number(o.seed), detached: !o.hold });
    printDescription(tb);
    if (!o.hold) return;
    console.log('up; Ctrl-C takes it down');
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await tb.down();
    console.log('down');
  });

program
  .command('down')
  .description('kill what runs in the testbed and delete its namespaces (also after a crash)')
  .action(async () => {
    const removed = await destroy(name());
    console.log(removed.length ? `removed ${removed.join(' ')}` : 'nothing to remove');
  });

program
  .command('status')
  .description('hosts, addresses and link counters')
  .action(() => {
    const d = readDescription(name());
    if (!d) {
      console.log(`testbed ${name()} is not up`);
      process.exitCode = 1;
      return;
    }
    printDescription(d);
    for (const [name, stats] of Object.entries(readLinkStats(d)))
      console.log(`link ${name}: ${stats ? JSON.stringify(stats) : '(no stats yet)'}`);
  });

program
  .command('exec <role> [command...]')
  .description('run a command in a host namespace: client, origo, origin, router, p0, p1, ...')
  .action((role: string, command: string[]) => {
    const d = readDescription(name());
    if (!d) throw new Error(`testbed ${name()} is not up`);
    const hosts: Record<string, string> = {
      client: d.client.netns,
      origo: d.origo.netns,
      origin: d.origin.netns,
      router: d.router,
      ...Object.fromEntries(d.proxies.map((p, i) => [`p${i}`, p.netns])),
    };
    const netns = hosts[role];
    if (!netns) throw new Error(`no host ${role}; hosts: ${Object.keys(hosts).join(', ')}`);
    const r = spawnSync('ip', ['netns', 'exec', netns, ...(command.length ? command : ['bash'])], { stdio: 'inherit' });
    process.exitCode = r.status ?? 1;
  });

function name(): string {
  return program.opts<{ name: string }>().name;
}

async function refuseWithoutNetns(): Promise<void> {
  const why = await netnsUnavailable();
  if (why) throw new Error(`the testbed ${why}`);
}

function printDescription(d: TestbedDescription): void {
  console.log(`testbed ${d.name}: profile ${d.profile}, seed ${d.seed}`);
  console.log(`  client  ${d.client.address}  (${d.client.netns})`);
  console.log(`  origo   ${d.origo.address}  (${d.origo.netns})`);
  console.log(`  origin  ${d.origin.address}  (${d.origin.netns})`);
  d.proxies.forEach((p, i) => console.log(`  p${i}      ${p.address}  (${p.netns}) cap ${d.capsKBps[i]} KB/s`));
  console.log(`  links   ${d.links.map((l) => l.name).join(', ')} (linkem in ${d.router})`);
}

program.parseAsync().catch((e: unknown) => {
  console.error(`testbed: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
