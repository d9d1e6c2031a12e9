/**
 * `mutp get` as a user runs it: its own process against origo and two proxy processes. Checks
 * the saved bytes, what it prints, and every documented exit code.
 */
import { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, spawnService, startCluster } from '../src/cluster';
import { largeObjectSlice, MEDIA_DIR, Origin, originQuiet, startOrigin, syntheticObject } from '../src/origin';
import { waitFor } from '@mutp/testing/wait';

jest.setTimeout(120_000);

interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `mutp <args>` to its end; kills it (and fails) if it takes longer than `limitMs`. */
function mutp(args: string[], limitMs = 60_000): Promise<CliRun> {
  const child: ChildProcess = spawnService('client/src/cli.ts', args, {});
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`mutp ${args.join(' ')} still running after ${limitMs} ms\n${stdout}\n${stderr}`));
    }, limitMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let origin: Origin;
let cluster: Cluster;
let dir: string;

beforeAll(async () => {
  origin = await startOrigin();
  cluster = await startCluster({
    proxies: [0, 1].map((i) => ({ name: `cli-p${i}`, uploadKBps: 0 })),
    allowPrivateOrigins: true,
  });
  dir = mkdtempSync(join(tmpdir(), 'mutp-cli-'));
});

/** `mutp get <origin path> --origo <the cluster's> -d <the test's directory> [flags]`. */
function get(path: string, ...flags: string[]): Promise<CliRun> {
  return mutp(['get', `${origin.url}${path}`, '--origo', cluster.clientUrl, '-d', dir, ...flags]);
}

afterAll(async () => {
  await cluster?.stop();
  await origin?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test.each(['rlnc', 'fountain', 'http'])(
  '%s: saves the verified object, prints goodput and shares, exit 0',
  async (mode) => {
    const out = join(dir, `${mode}.bin`);
    const run = await get('/object/300000/41', '--mode', mode, '--proxies', '2', '-o', out, '--json');
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(Buffer.from(readFileSync(out)).equals(Buffer.from(syntheticObject(300000, 41)))).toBe(true);
    expect(run.stdout).toMatch(new RegExp(`300000 bytes in \\d+ ms \\(${mode}\\), goodput [\\d.]+ MB/s`));
    expect(run.stdout).toMatch(/cli-p0 +share +[\d.]+%/);
    expect(run.stdout).toMatch(/cli-p1 +share +[\d.]+%/);
    const lines = run.stdout.trim().split('\n');
    const summary = JSON.parse(lines[lines.length - 1]) as {
      bytes: number;
      mode: string;
      sources: { share: number }[];
    };
    expect(summary).toMatchObject({ bytes: 300000, mode });
    expect(summary.sources).toHaveLength(2);
    expect(summary.sources.reduce((a, s) => a + s.share, 0)).toBeCloseTo(1, 6);
  },
);

test('an origin 404 fails the download: exit 1 with the reason, no file', async () => {
  const out = join(dir, 'missing.bin');
  const run = await get('/status/404', '--proxies', '2', '-o', out);
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/^mutp: .*origin not found \(1\): origin answered 404/m);
  expect(() => readFileSync(out)).toThrow();
});

test('--timeout while the origin hangs: exit 4, saying why once', async () => {
  // The proxies wait up to 15 s for the origin's headers; the CLI gives up after 2 s without progress.
  const run = await get('/hang', '--proxies', '2', '--timeout', '2000');
  expect(run.code).toBe(4);
  expect(run.stderr).toMatch(/^mutp: \S*hang: no progress for 2000 ms$/m);
});

test('origo unreachable: exit 3', async () => {
  // Nothing listens on port 9 (discard) here: the connection is refused.
  const run = await mutp(['get', `${origin.url}/object/1000/1`, '--origo', 'ws://127.0.0.1:9/v1/client', '-d', dir]);
  expect(run.code).toBe(3);
  expect(run.stderr).toMatch(/^mutp: /m);
});

test('more proxies than exist still downloads from those there are, and says so', async () => {
  const run = await get('/object/100000/42', '--proxies', '5');
  expect(run.code).toBe(0);
  expect(run.stdout).toMatch(/100000 bytes in/);
  expect(run.stdout).toMatch(/asked for 5 proxies; origo offered 2/);
});

test.each([
  [['get', 'ftp://example.org/x'], /not an http\(s\) URL/],
  [['get', 'http://example.org/x', '--proxies', '0'], /must be positive/],
  [['get', 'http://example.org/x', '--mode', 'tcp'], /Allowed choices/],
  [['fetch', 'http://example.org/x'], /unknown command/],
  [['get', 'http://example.org/x', '--disable-features', 'resume,telepathy'], /telepathy/],
  [['get', 'http://example.org/x', '--region', 'eu west'], /a region name/],
])('bad usage %j: exit 2 with a message', async (args, message) => {
  const run = await mutp(args);
  expect(run.code).toBe(2);
  expect(run.stderr).toMatch(message);
});

test.each(['rlnc', 'uncoded', 'http'])(
  '%s --range: only those bytes, byte-exact, with where they sit in the object and its type',
  async (mode) => {
    const out = join(dir, `${mode}-range.bin`);
    const run = await get(
      '/object/300000/43',
      '--mode',
      mode,
      '--proxies',
      '2',
      '--range',
      '1000-200999',
      '-o',
      out,
      '--json',
    );
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(Buffer.from(readFileSync(out)).equals(Buffer.from(syntheticObject(300000, 43).subarray(1000, 201000)))).toBe(
      true,
    );
    expect(run.stdout).toMatch(/bytes 1000-200999 of 300000/);
    const lines = run.stdout.trim().split('\n');
    const summary = JSON.parse(lines[lines.length - 1]) as { bytes: number; attributes?: { range?: unknown } };
    expect(summary).toMatchObject({ bytes: 200000, attributes: { range: { start: 1000, completeLength: 300000 } } });
    // The proxies asked the origin for the range only.
    const fetched = origin.log.filter((r) => r.path === '/object/300000/43' && r.userAgent.startsWith('mutp-proxy'));
    expect(fetched.length).toBeGreaterThan(0);
    for (const r of fetched) expect(r).toMatchObject({ range: 'bytes=1000-200999' });
  },
);

test('--range past the end of the object: exit 1, the proxies say the range is not satisfiable', async () => {
  const run = await get('/object/300000/43', '--proxies', '2', '--range', '300000-300099');
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(/range not satisfiable/);
});

describe('files as aria2 and curl users expect', () => {
  const json = <T>(run: CliRun): T => JSON.parse(run.stdout.trim().split('\n').pop()!) as T;
  const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

  test("no -o: saved under the URL's base name in -d; an existing file is refused before any fetch", async () => {
    const sub = join(dir, 'default-name');
    const into = (...flags: string[]) =>
      mutp(['get', `${origin.url}/object/120000/71`, '--origo', cluster.clientUrl, '-d', sub, ...flags]);
    const run = await into();
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(Buffer.from(readFileSync(join(sub, '71'))).equals(Buffer.from(syntheticObject(120000, 71)))).toBe(true);
    expect(readdirSync(sub)).toEqual(['71']); // no .part or .mutp left behind

    const asked = origin.requests.get('/object/120000/71');
    const again = await into();
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/71 exists: choose another name with -o, or replace it with --allow-overwrite/);
    expect(origin.requests.get('/object/120000/71')).toBe(asked);
    expect((await into('--allow-overwrite')).code).toBe(0);
    // -c on a file that is complete does nothing (as wget -c).
    const complete = await into('-c');
    expect(complete.code).toBe(0);
    expect(complete.stderr).toMatch(/already complete/);
  });

  test('-o through a regular file, -o with two URLs, a URL without a host: usage errors (2) before any fetch', async () => {
    writeFileSync(join(dir, 'a-file'), 'x');
    const through = await get('/object/1000/72', '-o', join(dir, 'a-file', 'x.bin'));
    expect(through.code).toBe(2);
    expect(through.stderr).toMatch(/cannot create the directory/);
    const two = await mutp([
      'get',
      `${origin.url}/object/1000/73`,
      `${origin.url}/object/1000/74`,
      '-o',
      'x',
      '-d',
      dir,
    ]);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/-o names one file/);
    const hostless = await mutp(['get', 'http://', '-d', dir]);
    expect(hostless.code).toBe(2);
    expect(hostless.stderr).toMatch(/not a URL/);
    expect(origin.requests.get('/object/1000/72') ?? 0).toBe(0);
  });

  test('split into ranges: each range fetched once per proxy, the file byte-exact, --checksum checked', async () => {
    const object = syntheticObject(300000, 75);
    const out = join(dir, 'split.bin');
    const run = await get(
      '/object/300000/75',
      '-o',
      out,
      '--chunk-size',
      '64KiB',
      '--checksum',
      `sha-256=${sha256(object)}`,
      '--json',
    );
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(Buffer.from(readFileSync(out)).equals(Buffer.from(object))).toBe(true);
    expect(json(run)).toMatchObject({ bytes: 300000, fetchedBytes: 300000, ranges: 5, sha256: sha256(object) });
    expect(run.stdout).toMatch(/300000 bytes, application\/octet-stream, in 5 ranges/);
    const ranges = origin.log
      .filter((r) => r.path === '/object/300000/75' && r.userAgent.startsWith('mutp-proxy'))
      .map((r) => r.range);
    expect(new Set(ranges)).toEqual(
      new Set([
        'bytes=0-65535',
        'bytes=65536-131071',
        'bytes=131072-196607',
        'bytes=196608-262143',
        'bytes=262144-299999',
      ]),
    );
  });

  test('ranges pipelined: the next ones staged at the same proxies, each still fetched from the origin once per proxy', async () => {
    const object = syntheticObject(400000, 79);
    const out = join(dir, 'pipelined.bin');
    const run = await get('/object/400000/79', '-o', out, '--chunk-size', '64KiB', '--proxies', '2', '--json');
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(Buffer.from(readFileSync(out)).equals(Buffer.from(object))).toBe(true);
    const summary = json<{ ranges: number; prefetch: { hinted: number; staged: number; failed: number } }>(run);
    expect(summary.ranges).toBe(7);
    // Ranges 2..6 are announced once the first states the length (range 1 is asked at once); a
    // retried range (a loaded machine) announces what follows it again, at the set chosen anew.
    expect(summary.prefetch.hinted).toBeGreaterThanOrEqual(5);
    expect(summary.prefetch.staged).toBeGreaterThan(0);
    expect(run.stdout).toMatch(/\d+ ranges staged ahead: \d+ proxy answers staged/);
    // A staged range is served from the proxy's cache (or joins its fetch): never fetched twice.
    const perRange = new Map<string, number>();
    for (const r of origin.log)
      if (r.path === '/object/400000/79' && r.userAgent.startsWith('mutp-proxy'))
        perRange.set(r.range ?? 'whole', (perRange.get(r.range ?? 'whole') ?? 0) + 1);
    expect(perRange.size).toBe(7);
    for (const [range, count] of perRange) expect([range, count]).toEqual([range, 2]);

    const plain = await get(
      '/object/400000/79',
      '-o',
      join(dir, 'plain.bin'),
      '--chunk-size',
      '64KiB',
      '--prefetch-ranges',
      '0',
      '--json',
    );
    expect(json<{ prefetch: { hinted: number } }>(plain).prefetch.hinted).toBe(0);
  });

  test('-o - writes the verified bytes to stdout and the summary to stderr; what cannot work with it is refused (2)', async () => {
    const object = syntheticObject(200000, 80);
    const child = spawnService(
      'client/src/cli.ts',
      ['get', `${origin.url}/object/200000/80`, '--origo', cluster.clientUrl, '-o', '-', '--chunk-size', '64KiB'],
      {},
    );
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => chunks.push(d));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect({ code, stderr }).toEqual({
      code: 0,
      stderr: expect.stringMatching(/-> \(stdout\): 200000 bytes in \d+ ms/),
    });
    expect(Buffer.concat(chunks).equals(Buffer.from(object))).toBe(true);
    expect(readdirSync(dir).filter((f) => f.startsWith('80') || f.startsWith('-'))).toEqual([]);

    const url = `${origin.url}/object/1000/81`;
    const refused = async (args: string[], why: RegExp) => {
      const run = await mutp(['get', ...args, '--origo', cluster.clientUrl, '-o', '-']);
      expect({ code: run.code, stdout: run.stdout, why: why.test(run.stderr) ? 'named' : run.stderr }).toEqual({
        code: 2,
        stdout: '',
        why: 'named',
      });
    };
    // Each refusal is its own process, before any fetch: side by side.
    await Promise.all([
      refused([url, '-c'], /-o - cannot be resumed \(-c\)/),
      refused([url, `${origin.url}/object/1000/82`], /-o - writes one download to stdout: give one URL/),
      refused([url, '--json'], /--json prints to stdout/),
      refused([url, '-d', dir], /-d has no use with it/),
    ]);
    expect(origin.requests.get('/object/1000/81') ?? 0).toBe(0);
  });

  test('a wrong --checksum: exit 1, and neither the file nor its .part is left', async () => {
    const run = await get('/object/100000/76', '-o', 'bad.bin', '--checksum', `sha-256=${'0'.repeat(64)}`);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/sha-256 is [0-9a-f]{64}, expected 0{64}; the file was removed/);
    expect(readdirSync(dir).filter((f) => f.startsWith('bad.bin'))).toEqual([]);
  });

  test('-i FILE with out= and checksum= lines, two at once: both saved, one JSON document', async () => {
    const sub = join(dir, 'batch');
    const list = join(dir, 'list.txt');
    const second = syntheticObject(150000, 78);
    writeFileSync(
      list,
      `${origin.url}/object/100000/77
  out=first.bin
${origin.url}/object/150000/78
  checksum=sha-256=${sha256(second)}
`,
    );
    const run = await mutp([
      'get',
      '-i',
      list,
      '-j',
      '2',
      '--origo',
      cluster.clientUrl,
      '-d',
      sub,
      '--proxies',
      '2',
      '--json',
    ]);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(Buffer.from(readFileSync(join(sub, 'first.bin'))).equals(Buffer.from(syntheticObject(100000, 77)))).toBe(
      true,
    );
    expect(Buffer.from(readFileSync(join(sub, '78'))).equals(Buffer.from(second))).toBe(true);
    expect(run.stdout).toMatch(/2 of 2 downloads saved/);
    const result = json<{ downloads: { ok: boolean; bytes: number }[] }>(run);
    expect(result.downloads.map((d) => [d.ok, d.bytes])).toEqual([
      [true, 100000],
      [true, 150000],
    ]);
  });

  test('SIGKILL mid-download, then -c: resumes at the last verified range, byte-exact, nothing verified fetched again', async () => {
    // 24 ranges: killed after 4, resumed for 20 (the checks hold for any count; time is CI's).
    const total = 24 * 1024 * 1024;
    const path = `/large/${total}/7`;
    const out = join(dir, 'large.bin');
    const args = ['get', `${origin.url}${path}`, '--origo', cluster.clientUrl, '-o', out, '--chunk-size', '1MiB'];
    // Killed once a sixth of it is verified (the control file says so).
    const { child, exited } = await runUntilVerified([...args, '--proxies', '2'], out, total / 6);
    child.kill('SIGKILL');
    expect(await exited).toBeNull();
    const control = { nextOffset: verifiedEnd(out) };
    expect(control.nextOffset).toBeLessThan(total);
    // What the killed run's proxies were still fetching has arrived; what comes next is the resume's.
    await originQuiet(origin, path);
    const logged = origin.log.length;

    const run = await mutp([...args, '-c', '--proxies', '2', '--json'], 90_000);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    const result = json<{ resumedFrom: number; fetchedBytes: number; bytes: number; sha256: string }>(run);
    expect(result).toMatchObject({
      resumedFrom: control.nextOffset,
      fetchedBytes: total - control.nextOffset,
      bytes: total,
    });
    expect(result.sha256).toBe(sha256(largeObjectSlice(total, 7, 0, total)));
    expect(run.stdout).toMatch(new RegExp(`resumed at byte ${control.nextOffset}`));
    // The proxies were asked, after the kill, only for bytes the file did not have verified.
    const starts = origin.log
      .slice(logged)
      .filter((r) => r.path === path)
      .map((r) => Number(/^bytes=(\d+)-/.exec(r.range ?? '')?.[1]));
    expect(starts.length).toBeGreaterThan(0);
    for (const start of starts) expect(start).toBeGreaterThanOrEqual(control.nextOffset);
    expect(readdirSync(dir).filter((f) => f.startsWith('large.bin'))).toEqual(['large.bin']);
  }, 180_000);
});

describe('mutp playlist', () => {
  test('an HLS media playlist: every segment downloaded in order, each fetched from the origin once per proxy', async () => {
    const out = join(dir, 'hls');
    const playlist = `${origin.url}/fresh/cli-playlist/low/hls-fmp4/index.m3u8`;
    const run = await mutp(
      ['playlist', playlist, '--origo', cluster.clientUrl, '--proxies', '2', '--output-dir', out, '--json'],
      90_000,
    );
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    const lines = run.stdout.trim().split('\n');
    const result = JSON.parse(lines[lines.length - 1]) as {
      segments: { url: string; bytes: number; staged: boolean }[];
      proxies: unknown[];
      staging: { ordersSent: number; hintsAnswered: number; hintsStaged: number; wasted: number };
    };
    const listed = readFileSync(join(MEDIA_DIR, 'low/hls-fmp4/index.m3u8'), 'utf8')
      .split('\n')
      .filter((l) => l.endsWith('.m4s'));
    expect(result.segments.map((s) => s.url.split('/').pop())).toEqual(listed);
    for (const [i, name] of listed.entries()) {
      const saved = readFileSync(join(out, `${String(i).padStart(5, '0')}.seg`));
      expect(saved.equals(readFileSync(join(MEDIA_DIR, 'low/hls-fmp4', name)))).toBe(true);
      // Staged or fetched on demand, a proxy's cache asks the origin for a segment once.
      expect(origin.requests.get(`/fresh/cli-playlist/low/hls-fmp4/${name}`)).toBe(2);
    }
    // Every hint was staged by both proxies, and none was wasted (the series played through).
    expect(result.staging.ordersSent).toBe(listed.length - 1);
    expect(result.staging.hintsStaged).toBe(result.staging.hintsAnswered);
    expect(result.staging.wasted).toBe(0);
    expect(run.stdout).toMatch(/segments, \d+ bytes in [\d.]+ s \(rlnc, 2 proxies/);
  });

  test('--no-stage sends no hints; a missing playlist is a usage error', async () => {
    const list = join(dir, 'urls.txt');
    writeFileSync(list, `# two objects\n${origin.url}/object/100000/61\n\n${origin.url}/object/100000/62\n`);
    const run = await mutp(['playlist', list, '--origo', cluster.clientUrl, '--proxies', '2', '--no-stage', '--json']);
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    const result = JSON.parse(lines[lines.length - 1]) as { segments: unknown[]; staging: { ordersSent: number } };
    expect(result.segments).toHaveLength(2);
    expect(result.staging.ordersSent).toBe(0);

    const missing = await mutp(['playlist', join(dir, 'nothing.m3u8'), '--origo', cluster.clientUrl]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read the playlist/);
  });
});

describe('a proxy that dies mid-download', () => {
  // Last in the file: it restarts one of the cluster's proxies.
  test('with two proxies a range cannot be confirmed by one: exit 1 naming why, .part kept; -c after the restart finishes it', async () => {
    // 12 ranges: once one proxy is dead no further range can be confirmed, whatever is left.
    const total = 12 * 1024 * 1024;
    const path = `/large/${total}/9`;
    const out = join(dir, 'dying.bin');
    const args = ['get', `${origin.url}${path}`, '--origo', cluster.clientUrl, '-o', out, '--chunk-size', '1MiB'];
    // One try per range: the dead proxy stays excluded for longer than retries would wait.
    const { exited, stderr } = await runUntilVerified([...args, '--proxies', '2', '--max-tries', '1'], out, total / 4);
    cluster.kill('cli-p1');
    // Two agreeing sources are needed to trust a range (docs/security.md): one left cannot confirm the next.
    expect(await exited).toBe(1);
    expect(stderr()).toMatch(/fewer than 2 sources could confirm the object/);
    expect(stderr()).toMatch(/dying\.bin\.part is kept: run again with -c to resume/);
    const kept = verifiedEnd(out);
    expect(kept).toBeGreaterThanOrEqual(total / 4);

    await cluster.restartProxy('cli-p1');
    const resumed = await mutp([...args, '-c', '--proxies', '2', '--json'], 90_000);
    expect({ code: resumed.code, stderr: resumed.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    expect(JSON.parse(resumed.stdout.trim().split('\n').pop()!)).toMatchObject({ resumedFrom: kept, bytes: total });
    expect(sha256OfFile(out)).toBe(
      createHash('sha256')
        .update(largeObjectSlice(total, 9, 0, total))
        .digest('hex'),
    );
  }, 180_000);
});

/** Where `out`'s control file says the verified bytes end. */
function verifiedEnd(out: string): number {
  return (JSON.parse(readFileSync(`${out}.mutp`, 'utf8')) as { nextOffset: number }).nextOffset;
}

/**
 * `mutp <args>` left running until at least `bytes` of `out` are verified (its control file says
 * so): then the test kills something. Its stderr and exit code stay observable.
 */
async function runUntilVerified(args: string[], out: string, bytes: number) {
  const child = spawnService('client/src/cli.ts', args, {});
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  await waitFor(
    `${bytes} bytes of ${out} verified`,
    () => Promise.resolve(verifiedEnd(out) >= bytes ? true : undefined),
    60_000,
    10,
    () => stderr,
  );
  return { child, exited, stderr: () => stderr };
}

function sha256OfFile(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}
