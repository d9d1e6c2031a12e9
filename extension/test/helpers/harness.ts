/** The test page script (harness/emulation.ts), bundled for the browser with esbuild. */
import { join } from 'node:path';
import { build } from 'esbuild';

export async function buildHarness(): Promise<string> {
  const bundle = await build({
    entryPoints: [join(__dirname, '..', 'harness', 'emulation.ts')],
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    platform: 'browser',
    logLevel: 'silent',
  });
  return bundle.outputFiles[0].text;
}
