/**
 * A newcomer's first run, as docs/deploy.md writes it ("Try it on one machine"): the marked code
 * block is taken from the page and run by bash as it stands, on free ports instead of 8700, 8800
 * and 8080 (nothing else is changed), with the compiled bins of `npm run build` that npm linked
 * into node_modules/.bin, and must reach a verified `mutp get` of an object from a local origin,
 * identical to it, and the proxy's metrics of that transfer. So the page and the test cannot
 * drift apart. Also: without --local-dev origo refuses the proxy on loopback, and the proxy stops
 * with exit 3 and origo's reason, not a word about its key.
 */
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@mutp/testing/wait';

const ROOT = join(__dirname, '..', '..');
const BUILD_MS = 240_000;
const TRIAL_MS = 180_000;
const BIN = join(ROOT, 'node_modules', '.bin');
/** The ports the page uses: origo, the proxy's HTTP endpoint, the origin. */
const DOCUMENTED_PORTS = [8700, 8800, 8080];

beforeAll(() => {
  // The documented build (incremental: quick when e2e/test/build.test.ts has just run it).
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: BUILD_MS });
  if (build.status !== 0) {
    throw new Error(`npm run build failed (${build.status ?? build.signal}):\n${build.stdout}\n${build.stderr}`);
  }
}, BUILD_MS + 10_000);

let dir: string;
const groups: ChildProcess[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mutp-newcomer-'));
});

afterEach(() => {
  // Each command ran in a process group of its own: whatever is left of it goes.
  for (const child of groups.splice(0)) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The code block after the one-host-trial marker of docs/deploy.md. */
function documentedTrial(): string {
  const page = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
  const block = /<!-- one-host-trial:[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(page);
  if (!block) throw new Error('docs/deploy.md has no ```sh block after <!-- one-host-trial: ... -->');
  return block[1];
}

/** Runs `command` in a process group of its own; resolves with its exit code and output, or rejects after `ms`. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv, ms: number) {
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, NODE_OPTIONS: '', ...env }, detached: true });
  groups.push(child);
  const output: string[] = [];
  child.stdout!.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr!.on('data', (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${command} did not finish within ${ms} ms:\n${output.join('')}`)),
      ms,
    );
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output: output.join('') });
    });
  });
  return { child, output, exited };
}

test('npm linked the bins to their committed launchers', () => {
  for (const [bin, launcher] of [
    ['mutp-origo', 'origo/bin/mutp-origo.js'],
    ['mutp-proxy', 'proxy/bin/mutp-proxy.js'],
    ['mutp', 'client/bin/mutp.js'],
  ]) {
    expect({ bin, target: realpathSync(join(BIN, bin)) }).toEqual({ bin, target: realpathSync(join(ROOT, launcher)) });
  }
});

test(
  "docs/deploy.md's one-host trial, run as written, gets an object byte-exact through compiled bins",
  async () => {
    const trial = documentedTrial();
    // The compiled bins and the one-host profile on both services, nothing from source.
    expect(trial).not.toMatch(/\btsx\b|npm run (origo|proxy|mutp)/);
    expect(trial).toMatch(/^MUTP_ADMIN_TOKEN=\S+ mutp-origo --local-dev /m);
    expect(trial).toMatch(/^ {2}mutp-proxy --local-dev /m);
    let script = trial;
    for (const documented of DOCUMENTED_PORTS) {
      expect(script).toMatch(new RegExp(`\\b${documented}\\b`));
      script = script.replace(new RegExp(`\\b${documented}\\b`, 'g'), String(await freePort()));
    }
    writeFileSync(join(dir, 'trial.sh'), `set -euo pipefail\n${script}`);
    // mktemp -d (the block's scratch directory) lands in this test's directory.
    const { code, output } = await run('bash', [join(dir, 'trial.sh')], { TMPDIR: dir }, TRIAL_MS).exited;
    expect({ code, output: code === 0 ? '' : output }).toEqual({ code: 0, output: '' });
    expect(output).toContain('copy.bin is identical to the origin');
    // What the proxy measured of it: rlnc transfers (a second one if a peer connection was lost),
    // their first bytes, and the object from the origin once (then cached).
    expect(output).toMatch(/^mutp_proxy_transfer_duration_seconds_count\{mode="rlnc"\} [1-9]\d*$/m);
    expect(output).toMatch(/^mutp_proxy_transfer_first_byte_seconds_count\{mode="rlnc"\} [1-9]\d*$/m);
    expect(output).toMatch(/^mutp_proxy_origin_bytes_total 3000000$/m);
    expect(output).toMatch(/INFO \(edge-1\): registered with origo/); // pino-pretty's line
  },
  TRIAL_MS + 10_000,
);

test("without --local-dev on origo the proxy stops with exit 3 and origo's reason, not its key", async () => {
  const port = await freePort();
  const origo = run(
    join(BIN, 'mutp-origo'),
    ['--port', String(port), '--insecure-proxy-secret', 'newcomer-secret', '--db', ':memory:'],
    {},
    TRIAL_MS,
  );
  await waitFor(
    'origo to listen',
    async () => (origo.output.join('').includes('"origo listening"') ? true : undefined),
    30_000,
    50,
    () => origo.output.join(''),
  );
  const proxy = run(
    join(BIN, 'mutp-proxy'),
    ['--local-dev', '--origo', `ws://127.0.0.1:${port}/v1/proxy`, '--name', 'edge-1'],
    { MUTP_PROXY_SECRET: 'newcomer-secret' },
    30_000,
  );
  const { code, output } = await proxy.exited;
  expect({ code, output }).toEqual({ code: 3, output: expect.stringContaining('"level":60') });
  const fatal = output.split('\n').find((line) => line.includes('"msg":"stopping: '))!;
  expect(fatal).toContain(
    'origo refused this proxy: httpUrl refused: address 127.0.0.1 is loopback, not public (a trial on one machine: origo --local-dev accepts it)',
  );
  expect(fatal).toContain('on one machine run both with --local-dev');
  expect(output).not.toContain('MUTP_PROXY_SECRET');
});
