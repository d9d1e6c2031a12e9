/**
 * `npm run bench:linkem`: what linkem costs. Blasts UDP for 5 s through an unlimited linkem link
 * and through a plain forwarding link namespace (the baseline), and reports linkem's CPU seconds
 * per Gbit forwarded and the throughput ratio. The last stdout line is one JSON document.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  IP_UDP_OVERHEAD,
  cpuSeconds,
  ensureLinkemBuilt,
  networkUnavailable,
  runProbe,
  startLinkem,
  withTopology,
  type ProbeResult,
  type ProbeRun,
  type Topology,
} from '../src/emulator-validation';

const BLAST_MS = 5000;
const PAYLOAD = 1400;

/** As fast as the sender can go; the receiver stops 1 s after the last datagram. */
const blast: ProbeRun = {
  size: PAYLOAD,
  rateBps: 0,
  count: 20_000_000,
  durationMs: BLAST_MS,
  timeoutMs: BLAST_MS + 5000,
  idleMs: 1000,
};

function summary(p: ProbeResult) {
  return {
    received: p.received,
    gbitPerSecond: (p.deliveredBytesPerSec * 8) / 1e9,
    packetsPerSecond: p.deliveredBytesPerSec / (PAYLOAD + IP_UDP_OVERHEAD),
    owdMedianMs: p.owdMedianMs,
  };
}

async function throughEmulator(t: Topology, dir: string) {
  const unlimited = { rate: { kind: 'unlimited' as const }, delayMs: 0 };
  const linkem = await startLinkem(
    t,
    { clientTun: t.clientTun, serverTun: t.serverTun, seed: 1, up: unlimited, down: unlimited },
    dir,
  );
  try {
    const cpuBefore = cpuSeconds(linkem.pid);
    const probe = await runProbe(t, blast);
    const cpu = cpuSeconds(linkem.pid) - cpuBefore;
    const stats = await linkem.stop();
    const gbit = ((stats.up.bytesOut + stats.down.bytesOut) * 8) / 1e9;
    return {
      ...summary(probe),
      linkemCpuSeconds: cpu,
      gbitForwarded: gbit,
      // CPU seconds per Gbit forwarded = cores busy per Gbit/s of throughput.
      cpuSecondsPerGbit: cpu / gbit,
      linkemIn: stats.up.packetsIn,
      linkemOut: stats.up.packetsOut,
    };
  } catch (e) {
    await linkem.stop().catch(() => undefined);
    throw e;
  }
}

async function main(): Promise<void> {
  const why = networkUnavailable();
  if (why) {
    console.log(JSON.stringify({ skipped: why }));
    return;
  }
  await ensureLinkemBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'mutp-lv-bench-'));
  try {
    const emulated = await withTopology((t) => throughEmulator(t, dir), true);
    console.error(
      `linkem: ${emulated.gbitPerSecond.toFixed(3)} Gbit/s, ${emulated.cpuSecondsPerGbit.toFixed(2)} CPU s/Gbit`,
    );
    const baseline = await withTopology(async (t) => summary(await runProbe(t, blast)), false);
    console.error(`baseline: ${baseline.gbitPerSecond.toFixed(3)} Gbit/s`);
    const result = {
      bench: 'linkem',
      blastMs: BLAST_MS,
      payloadBytes: PAYLOAD,
      emulated,
      baseline,
      throughputRatio: emulated.gbitPerSecond / baseline.gbitPerSecond,
    };
    console.log(JSON.stringify(result));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
