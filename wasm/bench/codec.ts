/**
 * `npm run bench:codec -- [--json] [--quick] [--no-chromium]`: the coding cores natively (C with
 * SSSE3/AVX2, Rust wirehair), in Node and in headless Chromium, in one run. Prints a table, the
 * ratios the targets are stated in, and (with --json) the rows as a JSON array on the last line.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Command } from 'commander';
import { build } from 'esbuild';
import puppeteer from 'puppeteer-core';
import { CHROMIUM_BASE_ARGS, CHROMIUM_PATH } from '@mutp/testing/browsers';
import { loadRlncModuleNode, loadWirehairNode, readRlncWasm, readWirehairWasm } from '../src/node';
import { simdSupported } from '../src/simd';
import { CodecRow, measureAll } from './measure';

const NATIVE_RLNC = join(__dirname, '..', 'dist', 'native', 'rlnc-bench');
const NATIVE_WIREHAIR = join(__dirname, '..', 'wirehair', 'target', 'release', 'examples', 'bench');

const program = new Command()
  .name('bench:codec')
  .description('GF(2^8), RLNC and wirehair throughput natively, in Node and in headless Chromium.')
  .option('--json', 'print the rows as a JSON array on the last line of stdout')
  .option('--quick', 'shorter measurements (noisier)')
  .option('--no-chromium', 'skip the Chromium measurements')
  .parse();

const opts = program.opts<{ json?: boolean; quick?: boolean; chromium: boolean }>();
const minMs = opts.quick ? 100 : 300;
const repeats = opts.quick ? 2 : 3;

function progress(row: CodecRow): void {
  process.stderr.write(
    `bench:codec ${row.env} ${row.codec} ${row.op} ${row.variant} ${row.g ?? ''} ${row.MBps} MB/s\n`,
  );
}

function runNative(binary: string, args: string[], what: string): CodecRow[] {
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`bash scripts/setup.sh\` (builds the ${what})`);
  const out = execFileSync(binary, args, { encoding: 'utf8', maxBuffer: 1 << 20 });
  return out
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => ({ objectBytes: null, loss: null, ...JSON.parse(line) }) as CodecRow);
}

async function runNode(): Promise<CodecRow[]> {
  const modules = {
    rlnc: {
      simd: simdSupported() ? await loadRlncModuleNode({ simd: true }) : undefined,
      scalar: await loadRlncModuleNode({ simd: false }),
    },
    wirehair: await loadWirehairNode(),
  };
  return measureAll(modules, { env: 'node', minMs, repeats, clock: () => performance.now(), onRow: progress });
}

/** The same measure.ts, bundled for the page, run on the same module bytes. */
async function runChromium(): Promise<CodecRow[]> {
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(`${CHROMIUM_PATH} not found: run \`bash scripts/setup.sh\` (apt chromium)`);
  const bundle = await build({
    entryPoints: [join(__dirname, 'browser-entry.ts')],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'chrome120',
    logLevel: 'error',
  });
  const script = bundle.outputFiles[0].text;
  const wasm = {
    simd: Buffer.from(readRlncWasm({ simd: true })).toString('base64'),
    scalar: Buffer.from(readRlncWasm({ simd: false })).toString('base64'),
    wirehair: Buffer.from(readWirehairWasm()).toString('base64'),
  };
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_BASE_ARGS,
  });
  try {
    const page = await browser.newPage();
    page.on('console', (m) => process.stderr.write(`bench:codec chromium: ${m.text()}\n`));
    await page.addScriptTag({ content: script });
    const rows = await page.evaluate(
      (w, ms, r) =>
        (globalThis as unknown as { runCodecBench: (...a: unknown[]) => Promise<CodecRow[]> }).runCodecBench(w, ms, r),
      wasm,
      minMs,
      repeats,
    );
    rows.forEach(progress);
    return rows;
  } finally {
    await browser.close();
  }
}

function find(rows: CodecRow[], q: Partial<CodecRow>): number | undefined {
  return rows.find((r) => Object.entries(q).every(([k, v]) => r[k as keyof CodecRow] === v))?.MBps;
}

function ratio(a: number | undefined, b: number | undefined): string {
  return a !== undefined && b !== undefined && b > 0 ? (a / b).toFixed(2) : 'n/a';
}

function table(rows: CodecRow[]): string {
  const header = ['codec', 'op', 'env', 'variant', 'g', 'packet', 'object', 'loss', 'MB/s'];
  const body = rows.map((r) => [
    r.codec,
    r.op,
    r.env,
    r.variant,
    r.g === null ? '' : String(r.g),
    String(r.packetBytes),
    r.objectBytes === null ? '' : String(r.objectBytes),
    r.loss === null ? '' : String(r.loss),
    r.MBps.toFixed(1),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  return [line(header), ...body.map(line)].join('\n');
}

function summary(rows: CodecRow[]): string {
  const kernel = { codec: 'gf256', op: 'muladd', packetBytes: 65536 } as const;
  const wasmKernel = find(rows, { ...kernel, env: 'node', variant: 'simd' });
  const sse = find(rows, { ...kernel, env: 'native', variant: 'ssse3' });
  const rlnc = { codec: 'rlnc', g: 24, variant: 'simd' } as const;
  const encNode = find(rows, { ...rlnc, op: 'encode', env: 'node' });
  const decNode = find(rows, { ...rlnc, op: 'decode', env: 'node' });
  const encChromium = find(rows, { ...rlnc, op: 'encode', env: 'chromium' });
  const decChromium = find(rows, { ...rlnc, op: 'decode', env: 'chromium' });
  const wirehair = find(rows, { codec: 'wirehair', op: 'decode', env: 'node', objectBytes: 2 << 20, loss: 0.1 });
  return [
    'Targets (same run):',
    `  WASM SIMD kernel / native SSSE3 kernel (64 KiB): ${ratio(wasmKernel, sse)} (target >= 0.45)`,
    `  RLNC g=24 1200 B in Node: encode ${encNode ?? 'n/a'} MB/s (>= 400), decode ${decNode ?? 'n/a'} MB/s (>= 300)`,
    `  Chromium / Node: encode ${ratio(encChromium, encNode)}, decode ${ratio(decChromium, decNode)} (>= 0.80)`,
    `  wirehair 2 MiB decode at 10% loss in Node: ${wirehair ?? 'n/a'} MB/s (>= 500)`,
  ].join('\n');
}

async function main(): Promise<void> {
  const rows: CodecRow[] = [];
  rows.push(...runNative(NATIVE_RLNC, opts.quick ? ['--quick'] : [], 'native RLNC benchmark'));
  rows.push(...runNative(NATIVE_WIREHAIR, [], 'native wirehair benchmark'));
  rows.push(...(await runNode()));
  if (opts.chromium) rows.push(...(await runChromium()));
  console.log(table(rows));
  console.log();
  console.log(summary(rows));
  if (opts.json) console.log(JSON.stringify(rows));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
