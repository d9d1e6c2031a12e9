/**
 * `npx tsx e2e/src/bench-sha256-browser.ts`: the SHA-256 the extension's downloader verifies
 * objects with (extension/src/downloader/sha256.ts: hash-wasm) against the core's portable one
 * (@noble/hashes), in Node and in a headless Chromium page, on a 2 MiB object hashed whole and
 * in 64 KiB units (what the receiver does per segment). Prints MB/s per case.
 */
import { build } from 'esbuild';
import { join } from 'node:path';
import { launchChromium } from '@mutp/testing/browsers';

const ROOT = join(__dirname, '..', '..');

/** Runs in Node and in the page: returns MB/s of each hash on each shape (best of `rounds`). */
const BENCH_SOURCE = `
import { sha256 as noble } from '@noble/hashes/sha256';
import { loadSha256 } from './extension/src/downloader/sha256';
export async function run(rounds) {
  const ours = await loadSha256();
  const data = new Uint8Array(2 * 1024 * 1024);
  for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) >>> 24;
  const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  if (hex(noble(data)) !== hex(ours(data))) throw new Error('digests differ');
  const shapes = { whole: (h) => h(data), units64k: (h) => { for (let i = 0; i < data.length; i += 65536) h(data.subarray(i, i + 65536)); } };
  const out = {};
  for (const [name, h] of Object.entries({ noble, ours })) {
    for (const [shape, f] of Object.entries(shapes)) {
      let best = Infinity;
      for (let r = 0; r < rounds; r++) { const t = performance.now(); f(h); best = Math.min(best, performance.now() - t); }
      out[name + ' ' + shape] = Math.round(data.length / best / 1000);
    }
  }
  return out;
}
`;

async function main(): Promise<void> {
  const bundle = await build({
    stdin: { contents: BENCH_SOURCE, resolveDir: ROOT, loader: 'ts' },
    bundle: true,
    format: 'iife',
    globalName: 'shaBench',
    write: false,
    minify: true,
    nodePaths: [join(ROOT, 'shared', 'node_modules'), join(ROOT, 'node_modules')],
  });
  const code = bundle.outputFiles[0].text;
  const inNode = (await new Function(`${code}; return shaBench.run(8);`)()) as Record<string, number>;
  const chromium = await launchChromium();
  try {
    const page = await chromium.browser.newPage();
    await page.addScriptTag({ content: code });
    const inChromium = (await page.evaluate('shaBench.run(8)')) as Record<string, number>;
    console.log('MB/s          node  chromium');
    for (const k of Object.keys(inNode))
      console.log(`${k.padEnd(15)} ${String(inNode[k]).padStart(5)} ${String(inChromium[k]).padStart(9)}`);
  } finally {
    await chromium.close();
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
