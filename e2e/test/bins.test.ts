/**
 * The bins exist after `npm ci && npm run build`: npm links a workspace's bin into
 * node_modules/.bin only when its file exists at install time, and dist/ comes later (npm run
 * build). Each bin is therefore a committed launcher outside dist/ (executable, the same in
 * package-lock.json, which `npm ci` installs from), and one whose dist/ is missing says to build.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const PACKAGES = { origo: ['mutp-origo'], proxy: ['mutp-proxy'], client: ['mutp'] };

function manifestBins(pkg: string): Record<string, string> {
  return (JSON.parse(readFileSync(join(ROOT, pkg, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin;
}

test.each(Object.entries(PACKAGES))('%s: its bins are committed launchers that npm ci can link', (pkg, names) => {
  const bins = manifestBins(pkg);
  expect(Object.keys(bins)).toEqual(names);
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { bin?: Record<string, string> }>;
  };
  expect(lock.packages[pkg].bin).toEqual(bins);
  for (const path of Object.values(bins)) {
    expect(path).not.toMatch(/^(\.\/)?dist\//);
    const tracked = spawnSync('git', ['ls-files', '--stage', '--', join(pkg, path)], { cwd: ROOT, encoding: 'utf8' });
    expect(tracked.stdout).toMatch(/^100755 /); // committed, and executable once checked out
    expect(statSync(join(ROOT, pkg, path)).mode & 0o111).not.toBe(0);
  }
});

test.each(Object.entries(PACKAGES))('%s: a launcher without dist/ says to run npm run build', (pkg) => {
  const dir = mkdtempSync(join(tmpdir(), 'mutp-bins-'));
  try {
    for (const [name, path] of Object.entries(manifestBins(pkg))) {
      mkdirSync(join(dir, 'bin'), { recursive: true });
      const copy = join(dir, 'bin', basename(path));
      copyFileSync(join(ROOT, pkg, path), copy);
      const run = spawnSync(process.execPath, [copy, '--help'], { encoding: 'utf8', timeout: 30_000 });
      expect({ name, status: run.status, stdout: run.stdout }).toEqual({ name, status: 1, stdout: '' });
      expect(run.stderr).toContain(`${name}: ${join(dir, 'dist')}`);
      expect(run.stderr).toContain('run `npm run build` first');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
