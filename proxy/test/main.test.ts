/**
 * The proxy as a process (tsx proxy/src/main.ts): a wrong secret exits non-zero with a clear log
 * line; SIGTERM closes everything and exits 0. Configuration from flags and environment.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { AddressInfo, createServer, Socket } from 'node:net';
import { join } from 'node:path';
import { buildCommand, parseConfig } from '../src/config';
import { startFakeOrigo } from './fake-origo';
import { until, within } from './helpers';

const ROOT = join(__dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(TSX, [join(ROOT, 'proxy', 'src', 'main.ts'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { text: '' };
  child.stdout!.on('data', (d: Buffer) => (output.text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output.text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output, exited };
}

function stop(child: ChildProcess) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

test('a wrong secret stops the process with a clear message and a non-zero exit', async () => {
  const origo = await startFakeOrigo('right-secret');
  const p = run(['--origo', origo.url, '--log-level', 'info'], { MUTP_PROXY_SECRET: 'wrong-secret' });
  try {
    const code = await within(p.exited, 30_000, `proxy exit (output: ${p.output.text})`);
    expect(code).toBe(3);
    expect(p.output.text).toMatch(/unauthorized/);
    expect(p.output.text).toMatch(/MUTP_PROXY_SECRET/);
    expect(origo.connections).toBe(1);
  } finally {
    stop(p.child);
    await origo.close();
  }
});

test('SIGTERM closes the proxy and exits 0', async () => {
  const origo = await startFakeOrigo('s3cret');
  // prettier-ignore
  const p = run([
    '--origo', origo.url, '--secret', 's3cret', '--name', 'edge-test', '--upload-limit', '896',
    '--region', 'eu-west', '--region-prefixes', '198.51.100.0/22', '--disable-features', 'resume',
  ]);
  try {
    await until(() => origo.registrations.length === 1, 30_000, `registration (output: ${p.output.text})`);
    expect(origo.registrations[0].name).toBe('edge-test');
    const register = origo.received.find((m) => m.type === 'register');
    expect(register).toMatchObject({ capacityBps: 896 * 1024, region: 'eu-west', prefixes: ['198.51.100.0/22'] });
    // What a proxy switched one feature behind declares: everything it serves, not the feature.
    const capabilities = (register as { capabilities?: string[] }).capabilities;
    expect(capabilities).toEqual(expect.arrayContaining(['extensions', 'ranges', 'attributes']));
    expect(capabilities).not.toContain('resume');
    p.child.kill('SIGTERM');
    const code = await within(p.exited, 15_000, `exit after SIGTERM (output: ${p.output.text})`);
    expect(code).toBe(0);
    expect(p.output.text).toMatch(/proxy closed/);
  } finally {
    stop(p.child);
    await origo.close();
  }
});

test('a second signal during the shutdown exits 1 at once', async () => {
  // An origo that takes the WebSocket and then never answers, not even the close: the proxy's
  // shutdown waits for it (up to 1 s), so a second signal always finds the first one's under way.
  const sockets = new Set<Socket>();
  let registered = false;
  const silent = createServer((socket) => {
    sockets.add(socket);
    socket.once('data', (request) => {
      const key = /sec-websocket-key: *(\S+)/i.exec(request.toString())![1];
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
      );
      socket.once('data', () => (registered = true)); // the register frame: the socket is open
    });
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const origo = `ws://127.0.0.1:${(silent.address() as AddressInfo).port}/v1/proxy`;
  // node itself, not the tsx CLI (a wrapper process in between would get the signals).
  const main = join(ROOT, 'proxy', 'src', 'main.ts');
  const child = spawn(process.execPath, ['--import', 'tsx', main, '--secret', 's', '--origo', origo], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    await until(() => registered && output.includes('"proxy started"'), 30_000, `start (output: ${output})`);
    // Both signals are held while it is stopped and arrive together.
    child.kill('SIGSTOP');
    child.kill('SIGTERM');
    child.kill('SIGINT');
    child.kill('SIGCONT');
    expect(await within(exited, 15_000, `exit after two signals (output: ${output})`)).toBe(1);
    expect(output).toContain('second signal: exiting now');
  } finally {
    stop(child);
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
});

test('a missing secret is a usage error', async () => {
  const p = run(['--origo', 'ws://127.0.0.1:1/v1/proxy']);
  const code = await within(p.exited, 30_000, 'exit without secret');
  expect(code).toBe(2);
  expect(p.output.text).toMatch(/--secret/);
});

test('usage errors exit 2: an unknown flag, a bad value, a missing value (commander alone would exit 1)', async () => {
  for (const args of [['--uplaod-limit', '896'], ['--upload-limit', 'fast'], ['--http-port', '99999'], ['--origo']]) {
    const p = run(['--secret', 's', ...args]);
    const code = await within(p.exited, 30_000, `exit on ${args.join(' ')} (output: ${p.output.text})`);
    expect({ args, code }).toEqual({ args, code: 2 });
    expect(p.output.text).toMatch(/^error: /);
  }
});

test('--local-dev refuses an address other machines reach, with exit 2 (issue 32)', async () => {
  for (const args of [
    ['--http-host', '0.0.0.0'],
    ['--advertised-http-url', 'http://edge.example.com:8800'],
    ['--ice-bind', '192.0.2.1'],
  ]) {
    const p = run(['--secret', 's', '--local-dev', ...args]);
    const code = await within(p.exited, 30_000, `exit on ${args.join(' ')} (output: ${p.output.text})`);
    expect({ args, code }).toEqual({ args, code: 2 });
    expect(p.output.text).toContain(`--local-dev listens on and advertises loopback addresses only, and ${args[0]}`);
  }
});

test('a start-up failure exits 1: the HTTP port is taken', async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = (taken.address() as AddressInfo).port;
  const p = run(['--secret', 's', '--http-port', String(port)]);
  try {
    const code = await within(p.exited, 30_000, `exit with port ${port} taken (output: ${p.output.text})`);
    expect(code).toBe(1);
    expect(p.output.text).toMatch(/EADDRINUSE/);
    expect(p.output.text).toMatch(/proxy failed to start/);
  } finally {
    stop(p.child);
    await new Promise((resolve) => taken.close(resolve));
  }
});

describe('configuration', () => {
  const parse = (args: string[], env: Record<string, string> = {}) => {
    const saved = { ...process.env };
    Object.assign(process.env, env);
    try {
      const command = buildCommand()
        .exitOverride()
        .configureOutput({ writeErr: () => undefined, writeOut: () => undefined });
      return parseConfig(['node', 'main', ...args], command);
    } finally {
      process.env = saved;
    }
  };

  test('defaults', () => {
    const c = parse(['--secret', 'x']);
    expect(c).toMatchObject({
      secret: 'x',
      httpPort: 0,
      httpHost: '127.0.0.1',
      cacheBytes: 256 * 1024 * 1024,
      maxObjectBytes: 64 * 1024 * 1024,
      uploadLimitKBps: 0,
      uploadBurstBytes: 0,
      pacingQuantumMs: 2,
      allowedOrigins: '*',
      allowPrivateOrigins: false,
      maxTransfers: 256,
      maxTransfersPerClient: 16,
      originTimeoutMs: 15000,
      logLevel: 'info',
    });
    expect(c.origoUrl).toBeUndefined();
  });

  test('flags and environment', () => {
    const c = parse(
      [
        '--origo',
        'ws://127.0.0.1:8700/v1/proxy',
        '--cache-bytes',
        '64MiB',
        '--ice-port-range',
        '50000-50100',
        '--allowed-origins',
        'https://cdn.example.com, http://media.example.org:8080',
        '--mtu',
        '1400',
        '--upload-burst',
        '32KiB',
        '--pacing-quantum-ms',
        '4',
      ],
      { MUTP_PROXY_SECRET: 'env-secret', MUTP_PROXY_UPLOAD_LIMIT: '1792', MUTP_PROXY_ALLOW_PRIVATE_ORIGINS: '1' },
    );
    expect(c).toMatchObject({
      origoUrl: 'ws://127.0.0.1:8700/v1/proxy',
      secret: 'env-secret',
      cacheBytes: 64 * 1024 * 1024,
      icePortRange: [50000, 50100],
      allowedOrigins: ['https://cdn.example.com', 'http://media.example.org:8080'],
      uploadLimitKBps: 1792,
      uploadBurstBytes: 32 * 1024,
      pacingQuantumMs: 4,
      allowPrivateOrigins: true,
      mtu: 1400,
    });
  });

  test('--local-dev: origins on any port, ICE on loopback; the flag or MUTP_PROXY_LOCAL_DEV (issue 32)', () => {
    expect(parse(['--secret', 'x', '--local-dev'])).toMatchObject({
      localDev: true,
      originPorts: '*',
      iceBind: '127.0.0.1',
      allowPrivateOrigins: false, // the policy opens loopback only (proxy.ts)
    });
    expect(parse(['--secret', 'x', '--origin-ports', '8080'], { MUTP_PROXY_LOCAL_DEV: '1' })).toMatchObject({
      localDev: true,
      originPorts: [8080],
    });
    expect(parse(['--secret', 'x']).localDev).toBe(false);
    expect(() => parse(['--secret', 'x', '--local-dev', '--http-host', '::'])).toThrow(/--http-host gives ::/);
    expect(() =>
      parse(['--secret', 'x', '--local-dev', '--advertised-quic-url', 'https://edge.example.com:4433']),
    ).toThrow(/--advertised-quic-url gives edge.example.com/);
  });

  test('QUIC certificate files: both, with --quic-port, from flags or the environment', () => {
    expect(parse(['--secret', 'x', '--quic-port', '4433']).quicCa).toBeUndefined();
    expect(
      parse(['--secret', 'x', '--quic-port', '4433', '--quic-cert-file', '/c.pem', '--quic-key-file', '/k.pem']).quicCa,
    ).toEqual({ certificateFile: '/c.pem', keyFile: '/k.pem', checkIntervalMs: 60_000 });
    expect(
      parse(['--secret', 'x', '--quic-port', '4433', '--quic-cert-check-ms', '5000'], {
        MUTP_PROXY_QUIC_CERT_FILE: '/c.pem',
        MUTP_PROXY_QUIC_KEY_FILE: '/k.pem',
      }).quicCa,
    ).toEqual({ certificateFile: '/c.pem', keyFile: '/k.pem', checkIntervalMs: 5000 });
    expect(() => parse(['--secret', 'x', '--quic-port', '4433', '--quic-cert-file', '/c.pem'])).toThrow(/go together/);
    expect(() => parse(['--secret', 'x', '--quic-cert-file', '/c.pem', '--quic-key-file', '/k.pem'])).toThrow(
      /needs --quic-port/,
    );
    expect(() => parse(['--secret', 'x', '--quic-port', '1', '--quic-cert-check-ms', '5'])).toThrow();
  });

  test('bad values are refused', () => {
    expect(() => parse(['--secret', 'x', '--origo', 'http://nope'])).toThrow();
    expect(() => parse(['--secret', 'x', '--ice-port-range', '9-1'])).toThrow();
    expect(() => parse(['--secret', 'x', '--allowed-origins', 'https://a.example/path'])).toThrow();
    // The bound missed, not "not an integer" (cli-options' parsers).
    expect(() => parse(['--secret', 'x', '--upload-limit', '-5'])).toThrow(/must be non-negative \(0\.\.100000000\)/);
    expect(() => parse(['--secret', 'x', '--max-object-bytes', '2GiB'])).toThrow(/must be at most 1073741824/);
    expect(() => parse(['--secret', 'x', '--cache-bytes', '-3'])).toThrow(/must be non-negative/);
    expect(() => parse(['--secret', 'x', '--upload-burst', '100'])).toThrow(); // below one datagram
    expect(() => parse(['--secret', 'x', '--origin-ports', '80,0'])).toThrow();
  });

  test('plain ws:// origo only on loopback unless --insecure; origin ports 80/443 by default', () => {
    expect(() => parse(['--secret', 'x', '--origo', 'ws://origo.example.com/v1/proxy'])).toThrow();
    expect(() => parse(['--secret', 'x', '--origo', 'ws://127.0.0.1.evil.com/v1/proxy'])).toThrow();
    expect(parse(['--secret', 'x', '--origo', 'wss://origo.example.com/v1/proxy']).origoUrl).toBe(
      'wss://origo.example.com/v1/proxy',
    );
    expect(parse(['--secret', 'x', '--insecure', '--origo', 'ws://origo.example.com/v1/proxy']).insecure).toBe(true);
    expect(parse(['--secret', 'x']).originPorts).toEqual([80, 443]);
    expect(parse(['--secret', 'x', '--origin-ports', '*']).originPorts).toBe('*');
    expect(parse(['--secret', 'x', '--proxy-id', 'edge-1']).proxyId).toBe('edge-1');
  });

  test('a comma-separated list (flag or MUTP_ORIGO_URL), duplicates and blanks dropped; one URL stays a string', () => {
    expect(
      parse([
        '--secret',
        'x',
        '--origo',
        'wss://a.example/v1/proxy, wss://b.example/v1/proxy,,wss://a.example/v1/proxy',
      ]).origoUrl,
    ).toEqual(['wss://a.example/v1/proxy', 'wss://b.example/v1/proxy']);
    expect(
      parse(['--secret', 'x'], { MUTP_ORIGO_URL: 'ws://127.0.0.1:8700/v1/proxy,ws://127.0.0.2:8700/v1/proxy' })
        .origoUrl,
    ).toEqual(['ws://127.0.0.1:8700/v1/proxy', 'ws://127.0.0.2:8700/v1/proxy']);
    expect(parse(['--secret', 'x', '--origo', 'wss://a.example/v1/proxy,']).origoUrl).toBe('wss://a.example/v1/proxy');
  });

  test('every URL is checked: ws(s) only, plain ws:// only to loopback unless --insecure', () => {
    expect(() => parse(['--secret', 'x', '--origo', 'wss://a.example/v1/proxy,http://b.example/v1/proxy'])).toThrow(
      /b\.example/,
    );
    expect(() => parse(['--secret', 'x', '--origo', 'wss://a.example/v1/proxy,ws://b.example/v1/proxy'])).toThrow(
      /b\.example/,
    );
    expect(() => parse(['--secret', 'x', '--origo', ' , '])).toThrow();
    expect(
      parse(['--secret', 'x', '--insecure', '--origo', 'wss://a.example/v1/proxy,ws://b.example/v1/proxy']).origoUrl,
    ).toEqual(['wss://a.example/v1/proxy', 'ws://b.example/v1/proxy']);
  });
});
