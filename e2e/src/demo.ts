/**
 * The main job (README command 1): a local origin serving generated video segments, origo, four
 * proxies (two capped at 896 KiB/s, two at 1792 KiB/s: 0.92 and 1.84 MB/s), then the same
 * segments downloaded in every mode through all four proxies, verified against the origin, and
 * compared. It says what it will do before it starts anything; what it prints is in
 * demo-format.ts. Embedded defaults only; `--segments N` and `--json` are optional.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { GetResult, MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { mixedFleetOfFour, startCluster } from './cluster';
import { capBytesPerSecond, DemoRow, describePlan, formatDownload, formatTable, tableNotes } from './demo-format';
import { MEDIA_DIR, startOrigin } from './origin';

const MODES = ['http', 'uncoded', 'rlnc', 'fountain'] as const;
const PROXIES = mixedFleetOfFour('edge-');
const STREAM = 'high/hls-ts';

const program = new Command()
  .name('demo')
  .description('Local MUTP demo: origo, four capped proxies, every download mode compared.')
  .option('--segments <n>', 'segments per mode', (v) => Number(v), 4)
  .option('--json', 'print the rows as a JSON array on the last line of stdout')
  .parse();

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function main(): Promise<void> {
  const o = program.opts<{ segments: number; json?: boolean }>();
  const dir = join(MEDIA_DIR, STREAM);
  const segments = readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .sort()
    .slice(0, o.segments);
  if (segments.length === 0) throw new Error(`no segments in ${dir}: run bash scripts/setup.sh`);
  const segmentBytes = segments.map((s) => statSync(join(dir, s)).size);
  console.log(describePlan({ stream: STREAM, segmentBytes, modes: MODES, proxies: PROXIES }) + '\n');
  const origin = await startOrigin();
  console.log(`started the origin at ${origin.url}`);
  const cluster = await startCluster({ proxies: PROXIES, allowPrivateOrigins: true });
  console.log(
    `started origo at ${cluster.origoUrl} and ${PROXIES.length} proxies: ${PROXIES.map((p) => p.name).join(', ')}`,
  );
  const client = new MutpClient(createNodeHost(), { origoUrl: cluster.clientUrl, codecs: await loadNodeCodecs() });
  const capSum = PROXIES.reduce((a, p) => a + capBytesPerSecond(p.uploadKBps), 0);
  const rows: DemoRow[] = [];
  try {
    for (const mode of MODES) {
      console.log(`\n${mode}: downloading ${segments.length} segments through ${PROXIES.length} proxies...`);
      const results: GetResult[] = [];
      let verified = true;
      for (const segment of segments) {
        const url = `${origin.url}/${STREAM}/${segment}`;
        const result = await client.get(url, { mode, proxies: PROXIES.length });
        verified &&= Buffer.compare(Buffer.from(result.object), readFileSync(join(dir, segment))) === 0;
        results.push(result);
      }
      console.log(`${mode}: the last segment, per proxy`);
      console.log(formatDownload(`${STREAM}/${segments[segments.length - 1]}`, results[results.length - 1]));
      const bytes = results.reduce((a, r) => a + r.object.length, 0);
      rows.push({
        mode,
        sources: PROXIES.length,
        capsKBps: PROXIES.map((p) => p.uploadKBps),
        segments: results.length,
        bytes,
        medianSegmentMs: Math.round(median(results.map((r) => r.durationMs))),
        medianGoodputBps: Math.round(median(results.map((r) => r.goodputBps))),
        normalizedGoodput: Math.round(median(results.map((r) => r.normalizedGoodput)) * 1000) / 1000,
        efficiency:
          Math.round(median(results.map((r) => ((r.object.length / capSum) * 1000) / r.durationMs)) * 1000) / 1000,
        speedupVsHttp: null,
        verified,
      });
    }
  } finally {
    client.close();
    await cluster.stop();
    await origin.close();
    releaseNodeRtc();
  }
  const http = rows.find((r) => r.mode === 'http');
  for (const r of rows)
    r.speedupVsHttp = http ? Math.round((r.medianGoodputBps / http.medianGoodputBps) * 100) / 100 : null;
  console.log(`\n${formatTable(rows)}`);
  console.log(`\n${tableNotes(PROXIES.map((p) => p.uploadKBps))}`);
  if (o.json) console.log(JSON.stringify(rows));
  if (!rows.every((r) => r.verified)) process.exitCode = 1;
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
