/**
 * The main job (README command 1): a local origin serving generated video segments, origo, four
 * proxies (two capped at 896 KB/s, two at 1792 KB/s), then the same segments downloaded in every
 * mode through all four proxies, verified against the origin, and compared. Embedded defaults
 * only; `--segments N` and `--json` are optional.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { GetResult, MutpClient } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost, formatResult } from '@mutp/client';
import { mixedFleetOfFour, startCluster } from './cluster';
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

interface Row {
  mode: string;
  sources: number;
  capsKBps: number[];
  segments: number;
  bytes: number;
  medianSegmentMs: number;
  medianGoodputBps: number;
  normalizedGoodput: number;
  efficiency: number;
  speedupVsHttp: number | null;
  verified: boolean;
}

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
  const origin = await startOrigin();
  console.log(`origin ${origin.url} serving ${STREAM} (${segments.length} segments per mode)`);
  const cluster = await startCluster({ proxies: PROXIES, allowPrivateOrigins: true });
  console.log(
    `origo ${cluster.origoUrl}; proxies ${PROXIES.map((p) => `${p.name} (${p.uploadKBps} KB/s)`).join(', ')}`,
  );
  const client = new MutpClient(createNodeHost(), { origoUrl: cluster.clientUrl, codecs: await loadNodeCodecs() });
  const capSum = PROXIES.reduce((a, p) => a + p.uploadKBps * 1024, 0);
  const rows: Row[] = [];
  try {
    for (const mode of MODES) {
      const results: GetResult[] = [];
      let verified = true;
      for (const segment of segments) {
        const url = `${origin.url}/${STREAM}/${segment}`;
        const result = await client.get(url, { mode, proxies: PROXIES.length });
        verified &&= Buffer.compare(Buffer.from(result.object), readFileSync(join(dir, segment))) === 0;
        results.push(result);
      }
      console.log(`\n${mode}: last segment`);
      console.log(formatResult(`${STREAM}/${segments[segments.length - 1]}`, results[results.length - 1]));
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
  console.log('\nmode      segments  median ms  goodput MB/s  normalized  efficiency  vs http  verified');
  for (const r of rows) {
    console.log(
      `${r.mode.padEnd(9)} ${String(r.segments).padStart(8)} ${String(r.medianSegmentMs).padStart(10)} ` +
        `${(r.medianGoodputBps / 1e6).toFixed(2).padStart(13)} ${r.normalizedGoodput.toFixed(3).padStart(11)} ` +
        `${r.efficiency.toFixed(3).padStart(11)} ${(r.speedupVsHttp ?? 0).toFixed(2).padStart(7)}x  ${r.verified ? 'yes' : 'NO'}`,
    );
  }
  console.log(
    `\nefficiency = (bytes / sum of caps) / time; Parallel HTTP can at best reach the fastest proxy's share ` +
      `(${((1792 * 1024) / capSum).toFixed(2)}).`,
  );
  if (o.json) console.log(JSON.stringify(rows));
  if (!rows.every((r) => r.verified)) process.exitCode = 1;
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
