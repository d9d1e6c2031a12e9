/**
 * Regenerates everything the sweep publishes from its JSON, in one command:
 *   npm run --silent bench:sim -- --sweep --json | tail -n 1 > /tmp/sweep.json
 *   npx tsx sim/src/sweep-doc.ts /tmp/sweep.json
 * writes the heatmaps docs/sim-sweep/*.png, the page docs/sim-sweep.md, and the README's section
 * between <!-- sim-sweep:begin --> and <!-- sim-sweep:end -->. Without a file it reads stdin.
 * Markdown goes through the repository's Prettier settings, so `prettier --check` stays clean.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import * as prettier from 'prettier';
import { renderHeatmap } from './heatmap';
import { SweepDocument } from './sweep';
import { heatmapFiles, IMAGE_DIR, readmeSummary, replaceBetweenMarkers, sweepMarkdown } from './sweep-report';

const ROOT = path.resolve(__dirname, '../..');

async function formatMarkdown(text: string, file: string): Promise<string> {
  const options = (await prettier.resolveConfig(file)) ?? {};
  return prettier.format(text, { ...options, parser: 'markdown' });
}

async function main(): Promise<void> {
  const doc = JSON.parse(readFileSync(process.argv[2] ?? '/dev/stdin', 'utf8')) as SweepDocument;
  if (doc.kind !== 'mutp-sim-sweep') throw new Error('not a sweep document: run bench:sim with --sweep --json');
  const docs = path.join(ROOT, 'docs');
  const imageDir = path.join(docs, IMAGE_DIR);
  mkdirSync(imageDir, { recursive: true });
  // Images of slices no longer in the sweep would linger: start the folder afresh.
  for (const old of readdirSync(imageDir)) if (old.endsWith('.png')) rmSync(path.join(imageDir, old));
  for (const h of heatmapFiles(doc)) {
    writeFileSync(path.join(imageDir, h.file), renderHeatmap(h.spec));
    process.stderr.write(`wrote docs/${IMAGE_DIR}/${h.file}\n`);
  }
  const page = path.join(docs, 'sim-sweep.md');
  writeFileSync(page, await formatMarkdown(sweepMarkdown(doc), page));
  process.stderr.write('wrote docs/sim-sweep.md\n');
  const readme = path.join(ROOT, 'README.md');
  const section = await formatMarkdown(readmeSummary(doc), readme);
  writeFileSync(readme, replaceBetweenMarkers(readFileSync(readme, 'utf8'), section));
  process.stderr.write('rewrote the sim-sweep section of README.md\n');
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.stack : e);
  process.exit(1);
});
