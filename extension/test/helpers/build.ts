/**
 * The built extension for the browser tests: dist/chrome, rebuilt (production, as `npm run build
 * -w extension`) when missing or older than any source file.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const EXTENSION_ROOT = join(__dirname, '..', '..');
export const CHROME_DIR = join(EXTENSION_ROOT, 'dist', 'chrome');

function newest(path: string): number {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

export function ensureBuilt(): string {
  const manifest = join(CHROME_DIR, 'manifest.json');
  const sources = ['src', 'static', 'build', 'webpack.config.mjs', 'package.json'].map((p) =>
    newest(join(EXTENSION_ROOT, p)),
  );
  const deps = ['shared/src', 'wasm/src', 'wasm/dist']
    .map((p) => join(EXTENSION_ROOT, '..', p))
    .filter((p) => existsSync(p))
    .map(newest);
  const newestInput = Math.max(...sources, ...deps);
  // webpack leaves an unchanged manifest.json with its old time; the zip packages are written on
  // every build, so either being newer than every input means the build is current.
  const zips = ['mutp-chrome.zip', 'mutp-firefox.zip'].map((z) => join(EXTENSION_ROOT, 'dist', z));
  const fresh = (f: string) => existsSync(f) && statSync(f).mtimeMs >= newestInput;
  if (!fresh(manifest) && !zips.every(fresh)) {
    const cli = require.resolve('webpack-cli/bin/cli.js');
    execFileSync(process.execPath, [cli, '--mode', 'production', '--config', 'webpack.config.mjs'], {
      cwd: EXTENSION_ROOT,
      stdio: 'pipe',
      timeout: 180_000,
    });
  }
  return CHROME_DIR;
}
