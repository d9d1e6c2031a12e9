/**
 * The systemd units of docs/deploy/ (docs/deploy.md, "systemd"): node by an absolute path, not
 * systemd's PATH; the launcher npm links as the bin (package.json), with the node flags of its own
 * #! line; restarts on failure but not on the exit codes restarting cannot mend (usage and
 * configuration errors, 2; origo refusing the proxy's key, 3). `systemd-analyze verify` checks the
 * rest where it is installed (and /usr/bin/node is there for it to find).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EXIT_USAGE } from '@mutp/cli-options';

const ROOT = join(__dirname, '..', '..');
/** The proxy's exit code when origo refuses it (proxy/README.md, proxy/src/main.ts EXIT_UNAUTHORIZED). */
const EXIT_REFUSED_BY_ORIGO = 3;
/** Where the units expect the clone (docs/deploy.md). */
const CLONE = '/opt/mutp';

/** The [Service] section's keys, each with its values in order (a key may be given several times). */
function serviceSection(file: string): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  let section = '';
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1];
      continue;
    }
    const eq = line.indexOf('=');
    if (section !== 'Service' || eq < 0) continue;
    const key = line.slice(0, eq).trim();
    keys.set(key, [...(keys.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return keys;
}

const UNITS = [
  { unit: 'mutp-origo.service', pkg: 'origo', bin: 'mutp-origo', noRestart: [EXIT_USAGE] },
  { unit: 'mutp-proxy.service', pkg: 'proxy', bin: 'mutp-proxy', noRestart: [EXIT_USAGE, EXIT_REFUSED_BY_ORIGO] },
];

test.each(UNITS)(
  '$unit runs the bin with an absolute node and stops on $noRestart',
  ({ unit, pkg, bin, noRestart }) => {
    const service = serviceSection(join(ROOT, 'docs', 'deploy', unit));
    const execStart = service.get('ExecStart') ?? [];
    expect(execStart).toHaveLength(1);
    const [node, ...args] = execStart[0].split(/\s+/);
    expect(node).toBe('/usr/bin/node');
    const launcher = (
      JSON.parse(readFileSync(join(ROOT, pkg, 'package.json'), 'utf8')) as { bin: Record<string, string> }
    ).bin[bin];
    const script = args.findIndex((a) => !a.startsWith('-'));
    expect(args[script]).toBe(`${CLONE}/${pkg}/${launcher}`);
    // The node flags are the launcher's own (#!/usr/bin/env -S node <flags>).
    const shebang = readFileSync(join(ROOT, pkg, launcher), 'utf8').split('\n')[0];
    expect(shebang.replace(/^#!\/usr\/bin\/env -S node /, '').split(/\s+/)).toEqual(args.slice(0, script));
    expect(args.slice(script + 1)).toEqual(['--config', `/etc/mutp/${pkg}.json`]);

    expect(service.get('Restart')).toEqual(['on-failure']);
    const prevented = (service.get('RestartPreventExitStatus') ?? []).flatMap((v) => v.split(/\s+/)).map(Number);
    expect(prevented.sort()).toEqual([...noRestart].sort());
  },
);

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const canVerify = analyze.status === 0 && existsSync('/usr/bin/node');

(canVerify ? test.each(UNITS) : test.skip.each(UNITS))(
  'systemd-analyze verify $unit: no error, no warning',
  ({ unit }) => {
    const run = spawnSync('systemd-analyze', ['verify', join(ROOT, 'docs', 'deploy', unit)], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect({ status: run.status, stderr: run.stderr.trim() }).toEqual({ status: 0, stderr: '' });
  },
);
