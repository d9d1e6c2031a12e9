/**
 * One deployment in the testbed and a few downloads through it with the Node client, for the
 * testbed's end-to-end test: `tsx e2e/src/testbed-run-get.ts --profile paper --caps 896,1792
 * --modes rlnc,http --bytes 524288`. Runs itself inside the client's namespace (enterTestbed),
 * prints one JSON document on the last line: per mode the result (checked against the origin's
 * object) or the client's error code, and each link's counters after the downloads.
 *
 * `--renumber-at f` changes the client's address once each MUTP download has decoded the
 * fraction f (a network change: the client notices it from its interfaces, as on a phone moving
 * from Wi-Fi to cellular), and reports how the download went on.
 */
import { createHash } from 'node:crypto';
import { Command } from 'commander';
import { MutpClient, ClientError, GetResult } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';

import { startCluster } from './cluster';
import { readLinkStats, renumberClient, TestbedDescription } from '@mutp/testbed';
import { syntheticObject } from './origin';
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
  .option('--renumber-at <fraction>', "MUTP downloads: change the client's address once this fraction is decoded")
  .parse()
  .opts<{
    window?: string;
    renumberAt?: string;
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
  const traces: string[] = [];
  // The testbed's origo is plain ws:// on a private address (no TLS inside the testbed).
  const client = new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs: await loadNodeCodecs(),
    insecureOrigo: true,
    trace: (line) => traces.push(line),
    ...(opts.window ? { window: Number(opts.window) } : {}),
  });
  const results: Record<string, unknown>[] = [];
  const bytes = Number(opts.bytes);
  const expected = sha256(syntheticObject(bytes, Number(opts.seed)));
  const renumberAt = opts.renumberAt === undefined ? undefined : Number(opts.renumberAt);
  if (renumberAt !== undefined && !(renumberAt > 0 && renumberAt < 1))
    throw new RangeError(`--renumber-at must be a fraction in (0, 1), got ${opts.renumberAt}`);
  let renumbered = 0;
  try {
    const url = `${origin.url}/object/${opts.bytes}/${opts.seed}`;
    for (const mode of opts.modes.split(',') as ('http' | 'uncoded' | 'rlnc' | 'fountain')[]) {
      traces.length = 0;
      const move =
        mode !== 'http' && renumberAt !== undefined ? new Renumbering(tb, 3 + renumbered++, renumberAt) : undefined;
      try {
        const r = await client.get(url, {
          mode,
          proxies: caps.length,
          signal: AbortSignal.timeout(Number(opts.timeoutMs)),
          ...(move ? { onProgress: (p) => move.progress(p.dof, p.totalDof) } : {}),
        });
        results.push({
          mode,
          bytes: r.object.length,
          verified: sha256(r.object) === expected,
          durationMs: r.durationMs,
          goodputBps: r.goodputBps,
          ...packets(r),
          ...(move ? { renumbering: await move.report(traces) } : {}),
        });
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

function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Coded packets the download received: those that added to what it had, and those that did not. */
function packets(r: GetResult): { useful?: number; redundant?: number } {
  if (r.mode === 'http') return {};
  return {
    useful: r.sources.reduce((n, s) => n + s.useful, 0),
    redundant: r.sources.reduce((n, s) => n + s.redundant, 0),
  };
}

/** Moves the client to a new address once a download has decoded `at`; times how it goes on. */
class Renumbering {
  private readonly started = performance.now();
  private moving?: Promise<string>;
  private movedAt?: number;
  private fractionAtMove?: number;
  private dof = 0;
  private dofAtMove = 0;
  private resumedAt?: number;

  constructor(
    private readonly tb: TestbedDescription,
    private readonly octet: number,
    private readonly at: number,
  ) {}

  progress(dof: number, totalDof: number): void {
    this.dof = dof;
    if (totalDof === 0) return;
    if (this.moving === undefined && dof / totalDof >= this.at) {
      this.fractionAtMove = dof / totalDof;
      // Counted from when the old address is gone: what arrives after that came on new connections.
      this.moving = renumberClient(this.tb, this.octet).then((address) => {
        this.movedAt = performance.now();
        this.dofAtMove = this.dof;
        return address;
      });
    } else if (this.movedAt !== undefined && this.resumedAt === undefined && dof > this.dofAtMove) {
      this.resumedAt = performance.now();
    }
  }

  async report(traces: readonly string[]): Promise<Record<string, unknown>> {
    const address = this.moving ? await this.moving : undefined;
    const since = (t?: number, from?: number) => (t === undefined || from === undefined ? null : Math.round(t - from));
    return {
      address: address ?? null,
      atMs: since(this.movedAt, this.started),
      atFraction: this.fractionAtMove ?? null,
      /** From the old address's removal to the next coded packet that added to the download. */
      resumedAfterMs: since(this.resumedAt, this.movedAt),
      networkChanges: traces.filter((l) => l.startsWith('network changed')).length,
      reconnected: traces.filter((l) => l.endsWith(': reconnected')).length,
      traces: [...traces],
    };
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
