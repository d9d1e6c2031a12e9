/**
 * The compiled build as an operator runs it: `npm run build` (tsc -b, incremental: quick when the
 * build is current), then the bins by their paths in package.json, executed through their
 * shebang, without tsx: `--help` of each, and a clear error when node lacks the export condition;
 * compiled origo (options from a --config file, overridden by the environment and flags; records
 * in a SQLite file through the compiled worker) and a compiled proxy that registers with it and
 * reports ready; a compiled `mutp get` through them, byte-exact; SIGTERM stops both with exit 0.
 * A --config file with an unknown key or a bad value is refused, naming the key.
 */
import { ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '@mutp/testing/wait';
import { Origin, startOrigin, syntheticObject } from '../src/origin';

const ROOT = join(__dirname, '..', '..');
const BUILD_MS = 240_000;
const WAIT_MS = 20_000;

/** Each built package's bins (package.json), as paths from the repository root. */
function bins(pkg: string): Record<string, string> {
  const manifest = JSON.parse(readFileSync(join(ROOT, pkg, 'package.json'), 'utf8')) as { bin: Record<string, string> };
  return Object.fromEntries(Object.entries(manifest.bin).map(([name, path]) => [name, join(ROOT, pkg, path)]));
}

let ORIGO: string;
let PROXY: string;
let MUTP: string;

beforeAll(() => {
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, encoding: 'utf8', timeout: BUILD_MS });
  if (build.status !== 0) {
    throw new Error(`npm run build failed (${build.status ?? build.signal}):\n${build.stdout}\n${build.stderr}`);
  }
  ORIGO = bins('origo')['mutp-origo'];
  PROXY = bins('proxy')['mutp-proxy'];
  MUTP = bins('client')['mutp'];
}, BUILD_MS + 10_000);

interface Service {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

const running: Service[] = [];
let dir: string;
let origin: Origin | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mutp-build-'));
});

afterEach(async () => {
  for (const s of running.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
    await s.exited;
  }
  await origin?.close();
  origin = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** Starts a compiled bin (its own shebang picks node and the compiled workspaces). */
function start(bin: string, args: string[], env: NodeJS.ProcessEnv = {}): Service {
  // No tsx anywhere: not in NODE_OPTIONS, not as a loader.
  const child = spawn(bin, args, { cwd: dir, env: { ...process.env, NODE_OPTIONS: '', ...env } });
  const lines: string[] = [];
  const collect = (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const service = { child, lines, exited };
  running.push(service);
  return service;
}

/** The first JSON log line with this message. */
function logged(s: Service, msg: string): Record<string, unknown> | undefined {
  for (const line of s.lines) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as Record<string, unknown>;
    if (entry.msg === msg) return entry;
  }
  return undefined;
}

function recent(...services: Service[]): () => string {
  return () => services.map((s) => s.lines.slice(-15).join('\n')).join('\n---\n');
}

async function exitCode(s: Service, what: string): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not exit within ${WAIT_MS} ms\n${recent(s)()}`)), WAIT_MS);
  });
  try {
    return await Promise.race([s.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs a compiled bin (or `node <bin>`) to its end, without tsx in NODE_OPTIONS; several run side
 * by side (each is mostly node starting).
 */
function runToEnd(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '' },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: 'utf8', env }, (error, stdout, stderr) => {
      const code = (error as { code?: unknown } | null)?.code;
      resolve({ status: error ? (typeof code === 'number' ? code : null) : 0, stdout, stderr });
    });
  });
}

async function getJson(url: string, token?: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.status, body: await res.json() };
}

test('the compiled bins keep their shebang and answer --help', async () => {
  const bins = [
    [ORIGO, 'Usage: origo'],
    [PROXY, 'Usage: mutp-proxy'],
    [MUTP, 'Usage: mutp'],
  ];
  // Without the export condition (plain node, its own environment), a clear error instead of a
  // SyntaxError from a .ts source.
  const [plain, ...runs] = await Promise.all([
    runToEnd(process.execPath, [ORIGO, '--help'], process.env),
    ...bins.map(([bin]) => runToEnd(bin, ['--help'])),
  ]);
  for (const [i, [bin, usage]] of bins.entries()) {
    expect(readFileSync(bin, 'utf8').split('\n')[0]).toMatch(
      /^#!\/usr\/bin\/env -S (\w+=\S+ )*node .*--conditions=mutp-compiled/,
    );
    expect({ bin, status: runs[i].status, stderr: runs[i].stderr }).toEqual({ bin, status: 0, stderr: '' });
    expect(runs[i].stdout).toContain(usage);
  }
  expect(plain.status).toBe(1);
  expect(plain.stderr).toContain('--conditions=mutp-compiled');
});

test('compiled origo and proxy: registration, readiness, a download, SIGTERM exits 0', async () => {
  origin = await startOrigin();
  const admin = 'build-test-admin';
  const secret = 'build-test-secret';
  writeFileSync(
    join(dir, 'origo.json'),
    JSON.stringify({
      port: 0,
      'insecure-proxy-secret': secret,
      'admin-token': admin,
      'allow-local-proxies': true,
      'heartbeat-interval-ms': 300,
      // Precedence, flags > environment > file > defaults: the file's host and db lose.
      host: '127.0.0.3',
      db: join(dir, 'file.sqlite'),
    }),
  );
  const flagDb = join(dir, 'flag.sqlite');
  const origo = start(ORIGO, ['--config', join(dir, 'origo.json'), '--db', flagDb], {
    MUTP_ORIGO_HOST: '127.0.0.1',
    MUTP_ORIGO_DB: join(dir, 'env.sqlite'),
  });
  const listening = await waitFor(
    'compiled origo to listen',
    async () => logged(origo, 'origo listening'),
    WAIT_MS,
    50,
    recent(origo),
  );
  expect(listening).toMatchObject({ host: '127.0.0.1', db: flagDb });
  expect(listening.port).not.toBe(8700); // the file's port 0 beat the default
  const base = `127.0.0.1:${listening.port as number}`;
  expect(await getJson(`http://${base}/readyz`)).toEqual({ status: 200, body: { status: 'ready' } });
  expect(await getJson(`http://${base}/livez`)).toEqual({ status: 200, body: { status: 'alive' } });

  writeFileSync(
    join(dir, 'proxy.json'),
    JSON.stringify({ secret, name: 'compiled-edge', 'allow-private-origins': true, 'origin-ports': '*' }),
  );
  // The flag's log level beats the environment's: the log lines checked below are there.
  const proxy = start(PROXY, ['--config', join(dir, 'proxy.json'), '--log-level', 'info'], {
    MUTP_ORIGO_URL: `ws://${base}/v1/proxy`,
    MUTP_LOG_LEVEL: 'silent',
  });
  const listed = await waitFor(
    'the compiled proxy in /v1/admin/proxies',
    async () => {
      const { body } = await getJson(`http://${base}/v1/admin/proxies`, admin);
      return (body as { proxies: { name: string; httpUrl: string; draining: boolean }[] }).proxies.find(
        (p) => p.name === 'compiled-edge',
      );
    },
    WAIT_MS,
    100,
    recent(origo, proxy),
  );
  expect(listed.draining).toBe(false);
  await waitFor(
    'the compiled proxy to report ready',
    async () => ((await getJson(`${listed.httpUrl}/readyz`)).status === 200 ? true : undefined),
    WAIT_MS,
    100,
    recent(proxy),
  );

  // The compiled client, codecs from wasm/dist, through both.
  const out = join(dir, 'object.bin');
  const download = start(MUTP, [
    'get',
    `${origin.url}/object/200000/7`,
    '--mode',
    'rlnc',
    '--proxies',
    '1',
    '--origo',
    `ws://${base}/v1/client`,
    '-o',
    out,
  ]);
  const code = await exitCode(download, 'mutp get');
  expect({ code, output: code === 0 ? '' : download.lines.join('\n') }).toEqual({ code: 0, output: '' });
  expect(Buffer.from(readFileSync(out)).equals(Buffer.from(syntheticObject(200000, 7)))).toBe(true);

  proxy.child.kill('SIGTERM');
  expect(await exitCode(proxy, 'the proxy after SIGTERM')).toBe(0);
  expect(logged(proxy, 'drained: no transfer left')).toBeDefined();
  await waitFor(
    'the stopped proxy to leave origo',
    async () => {
      const { body } = await getJson(`http://${base}/v1/admin/proxies`, admin);
      return (body as { proxies: unknown[] }).proxies.length === 0 ? true : undefined;
    },
    WAIT_MS,
    100,
    recent(origo),
  );
  origo.child.kill('SIGTERM');
  expect(await exitCode(origo, 'origo after SIGTERM')).toBe(0);
});

test('a --config file with an unknown key or a bad value is refused, naming the key', async () => {
  let files = 0;
  const refused = async (bin: string, config: object) => {
    const file = join(dir, `bad-${++files}.json`);
    writeFileSync(file, JSON.stringify(config));
    const run = await runToEnd(bin, ['--config', file]);
    return { status: run.status, stderr: run.stderr.trim() };
  };
  const [unknownKey, badPort, misspelt, badBoolean] = await Promise.all([
    refused(ORIGO, { port: 8700, 'max-client': 5 }),
    refused(ORIGO, { 'insecure-proxy-secret': 's', port: 'http-s3cret' }),
    refused(PROXY, { secret: 's', 'upload-limit': 100, uplaod: 1 }),
    refused(PROXY, { secret: 's', insecure: 'yes' }),
  ]);
  expect(unknownKey).toEqual({
    status: 2,
    stderr: expect.stringContaining('unknown key "max-client": not an option'),
  });
  // The key and the rule, never the value (it may be a secret under the wrong key).
  expect(badPort).toEqual({
    status: 2,
    stderr: expect.stringContaining('"port": the value is not an integer; it must be non-negative (0..65535)'),
  });
  expect(badPort.stderr).not.toContain('s3cret');
  expect(misspelt).toEqual({
    status: 2,
    stderr: expect.stringContaining('unknown key "uplaod"'),
  });
  expect(badBoolean).toEqual({
    status: 2,
    stderr: expect.stringContaining('"insecure": expected true or false'),
  });
});
