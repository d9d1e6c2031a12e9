/**
 * Graceful drain. A real proxy process registered with a real origo (in-process) serves a
 * download over WebRTC whose object the origin holds back; it gets SIGTERM: origo marks it
 * draining and offers it no more, a new client connection is refused, /readyz answers 503, the
 * download then completes byte-exact and the process exits 0. A second signal exits at once. In
 * process: a drain that times out reports the transfers it cuts, and new transfers are refused;
 * origo shutting down answers /readyz 503 and refuses new sockets from its first step.
 */
import { ChildProcess, spawn } from 'node:child_process';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { CONNECTION_TRANSFER_ID, decode, ErrorCode, MessageType, uncodedCodec } from '@mutp/shared/internal';
import { createNodeRtcFactory, releaseNodeRtc } from '@mutp/node-rtc';
import WebSocket from 'ws';
import {
  ADMIN,
  closeAll,
  connectClient,
  getJson,
  OFFER,
  requestProxies,
  SECRET,
  startOrigo,
  TestOrigo,
  TestPeer,
} from '@mutp/testing/origo';
import { DRAINING_REASON } from '../src/drain';
import { createProxy } from '../src/proxy';
import {
  download,
  LOOPBACK_ONLY,
  makeObject,
  silentLogger,
  startServer,
  testConfig,
  testTokens,
  TestServer,
  until,
  within,
} from './helpers';

const ROOT = join(__dirname, '..', '..');
const WAIT_MS = 15_000;
const OBJECT = makeObject(300_000, 21);

afterEach(closeAll);
afterAll(() => releaseNodeRtc());

interface GatedOrigin extends TestServer {
  /** Lets the held requests (and later ones) through. */
  release(): void;
}

/** An origin serving OBJECT at any path, but holding every request until release(). */
async function gatedOrigin(): Promise<GatedOrigin> {
  const held: ServerResponse[] = [];
  let open = false;
  const answer = (res: ServerResponse) =>
    res.writeHead(200, { 'content-type': 'video/mp2t', 'content-length': OBJECT.length }).end(OBJECT);
  const server = await startServer((_req: IncomingMessage, res: ServerResponse) =>
    open ? answer(res) : held.push(res),
  );
  return Object.assign(server, {
    release() {
      open = true;
      for (const res of held.splice(0)) answer(res);
    },
  });
}

interface ProxyProcess {
  child: ChildProcess;
  output: { text: string };
  exited: Promise<number | null>;
}

const processes: ChildProcess[] = [];
afterEach(() => {
  for (const child of processes.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

/** The proxy as a process: node with tsx as a loader, so signals reach the proxy itself. */
function runProxy(origo: TestOrigo, name: string): ProxyProcess {
  const args = [
    ...['--origo', `ws://127.0.0.1:${origo.port}/v1/proxy`, '--secret', SECRET, '--name', name],
    ...['--allow-private-origins', '--origin-ports', '*', '--ice-bind', '127.0.0.1', '--drain-timeout-ms', '20000'],
  ];
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'proxy/src/main.ts'), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, MUTP_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  processes.push(child);
  const output = { text: '' };
  child.stdout!.on('data', (d: Buffer) => (output.text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output.text += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output, exited };
}

interface Listed {
  proxyId: string;
  name: string;
  httpUrl: string;
  draining: boolean;
}

async function listed(origo: TestOrigo, name: string): Promise<Listed | undefined> {
  const { body } = await getJson(`${origo.http}/v1/admin/proxies`, ADMIN);
  return (body as { proxies: Listed[] }).proxies.find((p) => p.name === name);
}

/** Polls an async condition (HTTP, origo's listing) until it holds, naming it on timeout. */
async function eventually(what: string, condition: () => Promise<boolean>, output?: { text: string }): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > WAIT_MS) {
      throw new Error(`timed out after ${WAIT_MS} ms waiting for ${what}${output ? `\n${output.text}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Connects a client's WebRTC peer to the proxy, signalling through origo on the client's socket. */
async function connectPeer(client: TestPeer, proxyId: string, connectionId: string) {
  const peer = createNodeRtcFactory({ bindAddress: '127.0.0.1' }).createPeer('offerer');
  client.socket.on('message', (frame: WebSocket.RawData) => {
    const m = JSON.parse(String(frame)) as {
      type: string;
      connectionId?: string;
      description?: never;
      candidate?: never;
    };
    if (m.type !== 'signal' || m.connectionId !== connectionId) return;
    if (m.description) peer.setRemoteDescription(m.description);
    if (m.candidate) peer.addRemoteCandidate(m.candidate);
  });
  peer.onLocalDescription = (description) => client.send({ type: 'signal', connectionId, proxyId, description });
  peer.onLocalCandidate = (candidate) => client.send({ type: 'signal', connectionId, proxyId, candidate });
  const data = peer.createChannel('mutp-data');
  const feedback = peer.createChannel('mutp-feedback');
  peer.startOffer();
  await until(() => data.isOpen && feedback.isOpen, WAIT_MS, 'channels open through origo');
  return { peer, data, feedback };
}

test('SIGTERM mid-transfer: not offered, new connections refused, the transfer completes, exit 0', async () => {
  const origo = await startOrigo({ allowLocalProxies: true, heartbeatIntervalMs: 200 });
  const origin = await gatedOrigin();
  const proxy = runProxy(origo, 'drain-edge');
  let peer: { close(): void } | undefined;
  try {
    await eventually(
      'the proxy to register',
      async () => (await listed(origo, 'drain-edge')) !== undefined,
      proxy.output,
    );
    const { proxyId, httpUrl } = (await listed(origo, 'drain-edge'))!;
    const client = await connectClient(origo.port, 'client A');
    expect(await requestProxies(client, 4)).toEqual([proxyId]);

    const connection = await connectPeer(client, proxyId, 'conn-a');
    peer = connection.peer;
    const transfer = download([connection], { url: `${origin.url}/seg.ts`, mode: 'uncoded', codec: uncodedCodec });
    // What the proxy says about the whole connection (transferId 0), next to the transfer's datagrams.
    const connectionMessages: ReturnType<typeof decode>[] = [];
    for (const channel of [connection.data, connection.feedback]) {
      const feed = channel.onMessage;
      channel.onMessage = (bytes) => {
        const m = decode(bytes);
        if (m.ok && m.value.transferId === CONNECTION_TRANSFER_ID) connectionMessages.push(m);
        feed?.(bytes);
      };
    }
    // The proxy admitted the transfer and waits for the object: it is active until release().
    await until(() => origin.hits === 1, WAIT_MS, 'the proxy to fetch the object');

    proxy.child.kill('SIGTERM');
    // The connected client hears it first-hand: ERROR GoingAway for the connection.
    await until(() => connectionMessages.length > 0, WAIT_MS, 'the ERROR GoingAway on the connection');
    expect(connectionMessages.map((m) => m.ok && m.value)).toEqual([
      {
        type: MessageType.Error,
        transferId: CONNECTION_TRANSFER_ID,
        code: ErrorCode.GoingAway,
        message: DRAINING_REASON,
      },
    ]);
    await eventually(
      'origo to list the proxy as draining',
      async () => (await listed(origo, 'drain-edge'))?.draining === true,
    );
    const other = await connectClient(origo.port, 'client B');
    expect(await requestProxies(other, 4)).toEqual([]);
    // A client that still knows the proxy is refused with the reason.
    other.send({ type: 'signal', connectionId: 'conn-b', proxyId, description: OFFER });
    const refused = await other.next('connection-closed', (m) => m.connectionId === 'conn-b');
    expect(refused.reason).toBe(DRAINING_REASON);
    expect(await getJson(`${httpUrl}/readyz`)).toEqual({
      status: 503,
      body: { status: 'not-ready', reason: 'draining' },
    });
    expect(proxy.child.exitCode).toBeNull();

    origin.release();
    const rx = await within(transfer, WAIT_MS, 'the download to complete');
    expect(rx.status).toBe('complete');
    expect(Buffer.from(rx.takeObject()).equals(Buffer.from(OBJECT))).toBe(true);
    expect(await within(proxy.exited, WAIT_MS, `the proxy to exit\n${proxy.output.text}`)).toBe(0);
    expect(proxy.output.text).toContain('drained: no transfer left');
    await eventually('the proxy to leave origo', async () => (await listed(origo, 'drain-edge')) === undefined);
  } finally {
    peer?.close();
    origin.release();
    await origin.close();
  }
});

test('a second signal during the drain exits at once', async () => {
  const origo = await startOrigo({ allowLocalProxies: true, heartbeatIntervalMs: 200 });
  const origin = await gatedOrigin();
  const proxy = runProxy(origo, 'drain-twice');
  try {
    await eventually(
      'the proxy to register',
      async () => (await listed(origo, 'drain-twice')) !== undefined,
      proxy.output,
    );
    const { httpUrl } = (await listed(origo, 'drain-twice'))!;
    // A Parallel HTTP transfer, with the token origo gave a client, holds a slot until release().
    const client = await TestPeer.open(origo.port, '/v1/client');
    client.send({ type: 'hello', version: 1 });
    const { token } = await client.next('welcome');
    const held = fetch(`${httpUrl}/v1/http?url=${encodeURIComponent(`${origin.url}/held.ts`)}`, {
      headers: { authorization: `Bearer ${String(token)}` },
    }).catch(() => undefined);
    await until(() => origin.hits === 1, WAIT_MS, 'the proxy to fetch the object');

    proxy.child.kill('SIGTERM');
    await eventually('the drain to start', async () => (await getJson(`${httpUrl}/readyz`)).status === 503);
    proxy.child.kill('SIGTERM');
    expect(await within(proxy.exited, 5000, `the proxy to exit\n${proxy.output.text}`)).toBe(1);
    expect(proxy.output.text).toContain('second signal: exiting now');
    await held;
  } finally {
    origin.release();
    await origin.close();
  }
});

test('in process: a drain that times out reports the transfers it leaves; new transfers are refused', async () => {
  const tokens = await testTokens();
  const origin = await gatedOrigin();
  const proxy = createProxy(testConfig(), {
    logger: silentLogger(),
    allowedClasses: LOOPBACK_ONLY,
    tokens: tokens.verifier,
    codecs: { uncoded: uncodedCodec },
  });
  try {
    const { httpUrl } = await proxy.start();
    // No origo configured: ready as soon as it serves.
    expect(await getJson(`${httpUrl}/readyz`)).toEqual({ status: 200, body: { status: 'ready' } });
    const auth = { authorization: `Bearer ${await tokens.sign('c-drain')}` };
    const via = (path: string) => `${httpUrl}/v1/http?url=${encodeURIComponent(`${origin.url}${path}`)}`;
    const held = fetch(via('/held.ts'), { headers: auth }).then(
      (r) => r.status,
      () => 'cut',
    );
    await until(() => proxy.stats().activeTransfers === 1, WAIT_MS, 'the held transfer');

    const drained = proxy.drain(300);
    expect(proxy.readiness()).toEqual({ ready: false, reason: 'draining' });
    expect(proxy.stats().draining).toBe(true);
    expect((await fetch(via('/other.ts'), { headers: auth })).status).toBe(503);
    expect(await getJson(`${httpUrl}/livez`)).toEqual({ status: 200, body: { status: 'alive' } });
    expect(await within(drained, WAIT_MS, 'the drain to time out')).toBe(1);
    await proxy.close();
    expect(await held).not.toBe(200);
  } finally {
    await proxy.close();
    origin.release();
    await origin.close();
  }
});

test('origo shutting down: /readyz 503 and new sockets refused from the first step', async () => {
  const { origo, port, http } = await startOrigo({ shutdownGraceMs: 10_000 });
  expect(await getJson(`${http}/readyz`)).toEqual({ status: 200, body: { status: 'ready' } });
  // A socket that never answers origo's close frame holds the shutdown in its grace period.
  const stuck = connect(port, '127.0.0.1');
  let answer = '';
  stuck.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  stuck.write(
    'GET /v1/client HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  try {
    await until(() => answer.startsWith('HTTP/1.1 101'), WAIT_MS, 'the raw socket upgraded');
    const closing = origo.close();
    expect(await getJson(`${http}/readyz`)).toEqual({
      status: 503,
      body: { status: 'not-ready', reason: 'shutting-down' },
    });
    const late = await TestPeer.open(port, '/v1/client', 'late client');
    expect((await late.closed()).code).toBe(1001);
    stuck.destroy();
    await within(closing, WAIT_MS, 'origo to close');
  } finally {
    stuck.destroy();
  }
});
