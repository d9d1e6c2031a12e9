/**
 * `npm run bench:linkem`: what linkem costs. Blasts UDP for 5 s through an unlimited linkem link
 * and through a plain forwarding link namespace (the baseline), and reports linkem's CPU seconds
 * per Gbit forwarded and the throughput ratio. Then the testbed's own regime: 7000 datagrams/s
 * (six `paper` proxies at their caps) paced through a rate-limited link with 20 ms of delay, where
 * the cost is per packet, not per byte: linkem's share of a core, and how far from the configured
 * delay packets arrive. The last stdout line is one JSON document.
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

/** The testbed's regime: ~8.3 MB/s in 1200-byte datagrams, link at 1.1 x that, 20 ms one way. */
const PACED_PAYLOAD = 1200;
const PACED_PPS = 7000;
const PACED_MS = 5000;
const PACED_DELAY_MS = 20;
const paced: ProbeRun = {
  size: PACED_PAYLOAD,
  rateBps: PACED_PPS * (PACED_PAYLOAD + IP_UDP_OVERHEAD) * 8,
  count: (PACED_PPS * PACED_MS) / 1000,
  timeoutMs: PACED_MS + 5000,
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

async function pacedThroughEmulator(t: Topology, dir: string) {
  const link = {
    rate: { kind: 'constant' as const, bytesPerSecond: 1.1 * PACED_PPS * (PACED_PAYLOAD + IP_UDP_OVERHEAD) },
    delayMs: PACED_DELAY_MS,
  };
  const linkem = await startLinkem(
    t,
    { clientTun: t.clientTun, serverTun: t.serverTun, seed: 1, up: link, down: link },
    dir,
  );
  try {
    const cpuBefore = cpuSeconds(linkem.pid);
    const started = performance.now();
    const probe = await runProbe(t, paced);
    const cpu = cpuSeconds(linkem.pid) - cpuBefore;
    const wallSeconds = (performance.now() - started) / 1000;
    await linkem.stop();
    return {
      packetsPerSecond: PACED_PPS,
      received: probe.received,
      expected: probe.expected,
      linkemCpuSeconds: cpu,
      // Over the probe's whole run (sending plus the receiver's idle second): a lower bound.
      coreShare: cpu / wallSeconds,
      cpuMicrosecondsPerPacket: (cpu / Math.max(1, probe.received)) * 1e6,
      delayMs: PACED_DELAY_MS,
      owdMedianMs: probe.owdMedianMs,
      owdP10Ms: probe.owdP10Ms,
      owdP90Ms: probe.owdP90Ms,
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
    const pacedRun = await withTopology((t) => pacedThroughEmulator(t, dir), true);
    console.error(
      `paced ${PACED_PPS} datagrams/s, ${PACED_DELAY_MS} ms: linkem ${pacedRun.cpuMicrosecondsPerPacket.toFixed(1)} CPU us/packet, ` +
        `${(pacedRun.coreShare * 100).toFixed(1)} % of a core; one-way delay p10/median/p90 ` +
        `${pacedRun.owdP10Ms.toFixed(3)}/${pacedRun.owdMedianMs.toFixed(3)}/${pacedRun.owdP90Ms.toFixed(3)} ms`,
    );
    const result = {
      bench: 'linkem',
      blastMs: BLAST_MS,
      payloadBytes: PAYLOAD,
      emulated,
      baseline,
      throughputRatio: emulated.gbitPerSecond / baseline.gbitPerSecond,
      paced: pacedRun,
      // Per packet, paced against blasted: what waking up per packet costs over moving bytes.
      pacedOverBlastPerPacket:
        pacedRun.cpuMicrosecondsPerPacket / ((emulated.linkemCpuSeconds / emulated.linkemIn) * 1e6),
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
