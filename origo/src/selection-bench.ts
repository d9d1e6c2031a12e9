/**
 * CPU cost of one request-proxies selection, by fleet size: the walk over every proxy that
 * client-desk.ts did per request (picks and measured throughput read for each, clientRegion,
 * selectProxies) against the SelectionIndex told only of what changed. Between two requests,
 * what a loaded origo sees: some heartbeats (a proxy's transfers change) and the picks of the
 * previous request. Blocks of each alternate, so a busy machine slows both alike.
 *
 *   npx tsx origo/src/selection-bench.ts [--proxies 3000,10000] [--requests 2000] [--beats-per-request 4]
 */
import { Command } from 'commander';
import { randomBelow, seededRandom } from '@mutp/shared';
import { clientRegion, ProxyLoad, selectProxies, SelectableMode } from './selection';
import { SelectionIndex } from './selection-index';

interface Fleet {
  proxies: ProxyLoad[];
  picks: Map<string, number>;
}

const MODES: SelectableMode[] = ['uncoded', 'rlnc', 'fountain'];

/** Near-equal proxies in two regions, half declaring client prefixes (as the bench's and a real fleet's). */
function fleet(size: number): Fleet {
  const proxies: ProxyLoad[] = [];
  for (let i = 0; i < size; i++) {
    const region = i % 2 === 0 ? 'a' : 'b';
    proxies.push({
      proxyId: `p${i}`,
      modes: new Set(MODES),
      capacityBps: 10_000_000,
      uploadBps: 0,
      activeTransfers: i % 3,
      maxTransfers: 64,
      region,
      ...(i % 4 < 2 ? { prefixes: [`10.${i % 64}.0.0/16`, `10.${i % 64}.${i % 200}.0/24`] } : {}),
    });
  }
  return { proxies, picks: new Map() };
}

/** Runs `requests` requests one way; returns µs per request. */
function run(f: Fleet, requests: number, beats: number, indexed: SelectionIndex<ProxyLoad> | undefined): number {
  const random = seededRandom(1);
  const byId = new Map(f.proxies.map((p) => [p.proxyId, p]));
  const started = process.hrtime.bigint();
  for (let r = 0; r < requests; r++) {
    // What happened since the previous request: heartbeats (load changes, picks cleared).
    for (let b = 0; b < beats; b++) {
      const p = f.proxies[randomBelow(random, f.proxies.length)];
      p.activeTransfers = randomBelow(random, 3);
      f.picks.delete(p.proxyId);
      if (indexed !== undefined) {
        p.recentPicks = 0;
        indexed.upsert(p);
      }
    }
    const address = `10.${r % 64}.${r % 200}.7`;
    const request = { count: 4, mode: 'rlnc' as const };
    let chosen: ProxyLoad[];
    if (indexed === undefined) {
      const offerable: ProxyLoad[] = [];
      for (const p of f.proxies) {
        p.recentPicks = f.picks.get(p.proxyId) ?? 0;
        offerable.push(p);
      }
      const region = clientRegion(offerable, address);
      chosen = selectProxies(offerable, { ...request, ...(region !== undefined ? { region } : {}) }, random);
    } else {
      const region = indexed.clientRegion(address);
      chosen = indexed.select({ ...request, ...(region !== undefined ? { region } : {}) }, random);
    }
    for (const p of chosen) {
      f.picks.set(p.proxyId, (f.picks.get(p.proxyId) ?? 0) + 1);
      if (indexed !== undefined) {
        const live = byId.get(p.proxyId)!;
        live.recentPicks = f.picks.get(p.proxyId);
        indexed.upsert(live);
      }
    }
  }
  return Number(process.hrtime.bigint() - started) / 1000 / requests;
}

function main(): void {
  const opts = new Command('selection-bench')
    .option('--proxies <list>', 'fleet sizes, comma-separated', '3000,10000')
    .option('--requests <n>', 'requests per block', '2000')
    .option('--beats-per-request <n>', 'heartbeats between two requests', '4')
    .option('--blocks <n>', 'alternating blocks of each', '3')
    .option('--only <way>', 'walk or index alone (profiling)')
    .parse()
    .opts<{ proxies: string; requests: string; beatsPerRequest: string; blocks: string; only?: string }>();
  for (const size of opts.proxies.split(',').map(Number)) {
    const walk: number[] = [];
    const index: number[] = [];
    for (let block = 0; block < Number(opts.blocks); block++) {
      const beats = Number(opts.beatsPerRequest);
      if (opts.only !== 'index') walk.push(run(fleet(size), Number(opts.requests), beats, undefined));
      if (opts.only === 'walk') continue;
      const f = fleet(size);
      const indexed = new SelectionIndex<ProxyLoad>();
      for (const p of f.proxies) indexed.upsert(p);
      index.push(run(f, Number(opts.requests), beats, indexed));
    }
    const fmt = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(' / ');
    console.log(`${size} proxies: walk ${fmt(walk)} µs per request; index ${fmt(index)} µs per request`);
  }
}

main();
