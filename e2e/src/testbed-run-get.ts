/**
 * One deployment in the testbed and a few downloads through it with the Node client, for the
 * testbed's end-to-end test: `tsx e2e/src/testbed-run-get.ts --profile paper --caps 896,1792
 * --modes rlnc,http --bytes 524288`. Runs itself inside the client's namespace (enterTestbed),
 * prints one JSON document on the last line: per mode the result or the client's error code,
 * and each link's counters after the downloads.
 */
import { Command } from 'commander';
import { MutpClient, ClientError } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';

import { startCluster } from './cluster';
import { readLinkStats } from '@mutp/testbed';
import { enterTestbed, startPlacedOrigin } from './testbed-run';

const opts = new Command()
  .name('testbed-run-get')
  .requiredOption('--profile <name>', 'network profile')
  .option('--caps <list>', 'proxy caps, KB/s', '896,1792')
  .option('--modes <list>', 'modes, one download each', 'rlnc,http')
  .option('--bytes <n>', 'object size', '524288')
  .option('--seed <n>', 'profile seed', '3')
  .option('--timeout-ms <n>', 'per download', '90000')
  .option('--window <packets>', "the receiver's window (default: the client's, sized from the measured path)")
  .parse()
  .opts<{
    window?: string;
    profile: string;
    caps: string;
    modes: string;
    bytes: string;
    seed: string;
    timeoutMs: string;
  }>();

async function main(): Promise<void> {
  const caps = opts.caps.split(',').map(Number);
  const tb = await enterTestbed(__filename, opts.profile, caps, Number(opts.seed));
  if (!tb) return;
  const origin = await startPlacedOrigin(tb.origin);
  const cluster = await startCluster({
    proxies: caps.map((uploadKBps, i) => ({ name: `tb${i}`, uploadKBps })),
    allowPrivateOrigins: true,
    readyTimeoutMs: 60_000,
    placement: { origo: tb.origo, proxies: tb.proxies },
  });
  // The testbed's origo is plain ws:// on a private address (no TLS inside the testbed).
  const client = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs: await loadNodeCodecs(),
    insecureOrigo: true,
    ...(opts.window ? { window: Number(opts.window) } : {}),
  });
  const results: Record<string, unknown>[] = [];
  try {
    const url = `${origin.url}/object/${opts.bytes}/${opts.seed}`;
    for (const mode of opts.modes.split(',') as ('http' | 'uncoded' | 'rlnc' | 'fountain')[]) {
      try {
        const r = await client.get(url, {
          mode,
          proxies: caps.length,
          signal: AbortSignal.timeout(Number(opts.timeoutMs)),
        });
        results.push({ mode, bytes: r.object.length, durationMs: r.durationMs, goodputBps: r.goodputBps });
      } catch (e) {
        results.push({ mode, error: e instanceof ClientError ? e.code : 'timeout', message: String(e) });
      }
    }
  } finally {
    client.close();
    await cluster.stop();
    await origin.close();
    releaseNodeRtc();
  }
  // linkem rewrites its counters every second: wait for the last downloads to show.
  await new Promise((r) => setTimeout(r, 1200));
  const links = readLinkStats(tb);
  console.log(JSON.stringify({ profile: opts.profile, testbed: tb.name, results, links }));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
