/**
 * The packages as stores see them: `web-ext lint` (the linter addons.mozilla.org runs on upload)
 * finds nothing in dist/firefox, not even a warning, and both manifests name icons that exist as
 * PNGs of the size they claim.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHROME_DIR, EXTENSION_ROOT, ensureBuilt } from './helpers/build';

jest.setTimeout(300_000);

const FIREFOX_DIR = join(EXTENSION_ROOT, 'dist', 'firefox');

interface LintReport {
  summary: { errors: number; notices: number; warnings: number };
  errors: { code: string; message: string }[];
  warnings: { code: string; message: string }[];
  notices: { code: string; message: string }[];
}

function webExtLint(dir: string): Promise<LintReport> {
  // web-ext's exports map hides its bin: find the package wherever npm put it.
  const cli = [EXTENSION_ROOT, join(EXTENSION_ROOT, '..')]
    .map((root) => join(root, 'node_modules', 'web-ext', 'bin', 'web-ext.js'))
    .find((path) => existsSync(path));
  if (!cli) throw new Error('web-ext is not installed: npm ci (it is a devDependency of extension/)');
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [cli, 'lint', '--source-dir', dir, '--output', 'json', '--no-config-discovery'],
      { cwd: EXTENSION_ROOT, timeout: 180_000, maxBuffer: 16 * 1024 * 1024 },
      // web-ext exits non-zero when it finds errors; the JSON report says what they are.
      (error, stdout) => {
        try {
          resolve(JSON.parse(stdout) as LintReport);
        } catch {
          reject(new Error(`web-ext lint printed no JSON report: ${String(error)}\n${stdout.slice(0, 2000)}`));
        }
      },
    );
  });
}

/** Width and height from a PNG's IHDR, or undefined when the bytes are not a PNG. */
function pngSize(bytes: Buffer): [number, number] | undefined {
  if (bytes.length < 24 || bytes.toString('latin1', 1, 4) !== 'PNG' || bytes.toString('latin1', 12, 16) !== 'IHDR')
    return undefined;
  return [bytes.readUInt32BE(16), bytes.readUInt32BE(20)];
}

beforeAll(() => {
  ensureBuilt();
});

test('web-ext lint finds no error, warning or notice in the Firefox package', async () => {
  const report = await webExtLint(FIREFOX_DIR);
  const found = [...report.errors, ...report.warnings, ...report.notices].map((m) => `${m.code}: ${m.message}`);
  expect(found).toEqual([]);
  expect(report.summary).toEqual({ errors: 0, notices: 0, warnings: 0 });
});

test.each([
  ['chrome', CHROME_DIR],
  ['firefox', FIREFOX_DIR],
])('the %s manifest names icons that are PNGs of their size', (_browser, dir) => {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
    icons?: Record<string, string>;
    action?: { default_icon?: Record<string, string> };
  };
  expect(Object.keys(manifest.icons ?? {})).toEqual(['16', '32', '48', '128']);
  expect(manifest.action?.default_icon).toEqual(manifest.icons);
  for (const [size, path] of Object.entries(manifest.icons ?? {})) {
    expect({ path, size: pngSize(readFileSync(join(dir, path))) }).toEqual({
      path,
      size: [Number(size), Number(size)],
    });
  }
});

test('the Chrome manifest names the managed-settings schema, and it is the one in static/', () => {
  const manifest = JSON.parse(readFileSync(join(CHROME_DIR, 'manifest.json'), 'utf8')) as {
    storage?: { managed_schema?: string };
  };
  expect(manifest.storage).toEqual({ managed_schema: 'managed-schema.json' });
  expect(JSON.parse(readFileSync(join(CHROME_DIR, 'managed-schema.json'), 'utf8'))).toEqual(
    JSON.parse(readFileSync(join(EXTENSION_ROOT, 'static', 'managed-schema.json'), 'utf8')),
  );
});
