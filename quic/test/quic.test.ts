/**
 * @mutp/quic over loopback: certificates, session requests (accept, reject, timeout, limits),
 * datagrams both ways under back-pressure, close from either side, certificate rotation, junk
 * UDP, and a process that exits on its own after `close()`.
 */
import { spawnSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { join } from 'node:path';
import {
  certificateHash,
  generateCertificate,
  QuicClient,
  QuicConnectError,
  QuicServer,
  type GeneratedCertificate,
  type QuicServerOptions,
  type QuicSession,
  type SessionRequest,
} from '@mutp/quic';

const DATAGRAM = 1150;

/** Resolves when `cond()` holds; rejects after `ms` with `what`. */
async function waitFor(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A datagram whose bytes all derive from `i`. */
function payload(i: number, size = DATAGRAM): Buffer {
  const b = Buffer.alloc(size);
  b.writeUInt32BE(i, 0);
  for (let k = 4; k < size; k++) b[k] = (i * 31 + k) & 0xff;
  return b;
}

interface Harness {
  server: QuicServer;
  requests: SessionRequest[];
  opened: number[];
  received: Map<number, Buffer[]>;
  closed: { id: number; code: number; reason: string }[];
  /** What onSessionRequest does; default: accept. */
  decide: (r: SessionRequest) => void;
  echo: boolean;
}

const servers: QuicServer[] = [];
const sessions: QuicSession[] = [];

afterEach(async () => {
  for (const s of sessions.splice(0)) s.close();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function startServer(cert: GeneratedCertificate, extra: Partial<QuicServerOptions> = {}): Promise<Harness> {
  // Echo with back-pressure: what does not fit waits for the low-water event.
  const backlog = new Map<number, Buffer[]>();
  const flush = (id: number): void => {
    const q = backlog.get(id);
    while (q && q.length > 0 && h.server.sendDatagram(id, q[0])) q.shift();
  };
  const h: Harness = {
    server: undefined as unknown as QuicServer,
    requests: [],
    opened: [],
    received: new Map(),
    closed: [],
    decide: (r) => h.server.acceptSession(r.sessionId),
    echo: true,
  };
  h.server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 8,
    maxPendingSessions: 8,
    idleTimeoutMs: 10_000,
    onSessionRequest: (r) => {
      h.requests.push(r);
      h.decide(r);
    },
    onDatagram: (id, data) => {
      // The buffer is a view into a batch: copy what is kept.
      const copy = Buffer.from(data);
      if (!h.received.has(id)) h.received.set(id, []);
      h.received.get(id)!.push(copy);
      if (!h.echo) return;
      if (!backlog.has(id)) backlog.set(id, []);
      backlog.get(id)!.push(copy);
      flush(id);
    },
    onSessionOpen: (id) => h.opened.push(id),
    onSendBufferLow: flush,
    onSessionClosed: (id, code, reason) => h.closed.push({ id, code, reason }),
    ...extra,
  });
  servers.push(h.server);
  return h;
}

interface Client {
  session: QuicSession;
  received: Buffer[];
  closed: { code: number; reason: string }[];
  low: () => void;
}

async function connect(h: Harness, hash: Uint8Array, path = '/mutp?token=t0k3n'): Promise<Client> {
  const c: Client = { session: undefined as unknown as QuicSession, received: [], closed: [], low: () => {} };
  c.session = await QuicClient.connect({
    url: `https://127.0.0.1:${h.server.port}${path}`,
    serverCertificateHashes: [hash],
    connectTimeoutMs: 5000,
    onDatagram: (d) => c.received.push(Buffer.from(d)),
    onClosed: (code, reason) => c.closed.push({ code, reason }),
    onSendBufferLow: () => c.low(),
  });
  sessions.push(c.session);
  // The server's side of the session is registered a moment after the client's connect resolves.
  const id = h.requests[h.requests.length - 1]?.sessionId;
  await waitFor(() => h.opened.includes(id), `the server's onSessionOpen for session ${id}`);
  return c;
}

/** Sends `n` datagrams, waiting for the low-water event whenever the send buffer is full. */
async function sendAll(c: Client, n: number, first = 0): Promise<void> {
  for (let i = first; i < first + n; i++) {
    const d = payload(i);
    while (!c.session.sendDatagram(d)) {
      if (c.session.closed) throw new Error('session closed while sending');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        c.low = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }
}

async function expectConnectError(p: Promise<unknown>, code: string): Promise<QuicConnectError> {
  const e = await p.then(
    () => {
      throw new Error(`connect succeeded; expected a ${code} error`);
    },
    (e: unknown) => e,
  );
  expect(e).toBeInstanceOf(QuicConnectError);
  expect((e as QuicConnectError).code).toBe(code);
  return e as QuicConnectError;
}

describe('certificates', () => {
  test('ECDSA P-256, at most 14 days, hash = sha256(DER)', () => {
    const c = generateCertificate({ names: ['localhost', '127.0.0.1'], validityDays: 14 });
    expect(c.certificatePem).toContain('BEGIN CERTIFICATE');
    expect(c.privateKeyPem).toContain('BEGIN PRIVATE KEY');
    expect(c.sha256).toHaveLength(32);
    expect(Buffer.from(certificateHash(c.certificatePem))).toEqual(Buffer.from(c.sha256));
    expect(c.notAfter - c.notBefore).toBe(14 * 86_400_000);
    expect(c.notBefore).toBeLessThanOrEqual(Date.now());
    expect(() => generateCertificate({ names: ['localhost'], validityDays: 15 })).toThrow(/14 days/);
    expect(() => certificateHash('not a pem')).toThrow(/certificate/i);
  });
});

describe('server and client on loopback', () => {
  const cert = generateCertificate({ names: ['localhost', '127.0.0.1'], validityDays: 3 });

  test('session request, then 500 datagrams of 1150 B each way, byte-exact', async () => {
    const h = await startServer(cert);
    const c = await connect(h, cert.sha256);
    expect(h.requests).toHaveLength(1);
    const [req] = h.requests;
    expect(req.path).toBe('/mutp?token=t0k3n');
    expect(req.remoteAddress).toBe('127.0.0.1');
    expect(req.remotePort).toBeGreaterThan(0);
    const info = c.session.info();
    expect(info.maxDatagramSize).toBeGreaterThanOrEqual(1200);
    expect(h.server.sessionInfo(req.sessionId)!.maxDatagramSize).toBeGreaterThanOrEqual(1200);

    await sendAll(c, 500);
    // Loopback with back-pressure at both ends: nothing may be lost.
    await waitFor(() => (h.received.get(req.sessionId)?.length ?? 0) === 500, 'the server to receive 500 datagrams');
    await waitFor(() => c.received.length === 500, 'the client to receive 500 echoes');
    const byIndex = (a: Buffer, b: Buffer): number => a.readUInt32BE(0) - b.readUInt32BE(0);
    const atServer = [...h.received.get(req.sessionId)!].sort(byIndex);
    const atClient = [...c.received].sort(byIndex);
    for (let i = 0; i < 500; i++) {
      expect(atServer[i].equals(payload(i))).toBe(true);
      expect(atClient[i].equals(payload(i))).toBe(true);
    }
    const s = h.server.sessionInfo(req.sessionId)!;
    expect(s.sentPackets).toBeGreaterThan(0);
    expect(s.rttMs).toBeGreaterThan(0);
    expect(s.congestionWindow).toBeGreaterThanOrEqual(12_000);
  });

  test('reject: connect fails as refused; the status sent is reported', async () => {
    const h = await startServer(cert);
    const sent: number[] = [];
    h.decide = (r) => sent.push(h.server.rejectSession(r.sessionId, r.path.startsWith('/gone') ? 404 : 401));
    const e = await expectConnectError(connect(h, cert.sha256, '/mutp?token=bad'), 'refused');
    expect(e.message).toMatch(/refused/);
    await expectConnectError(connect(h, cert.sha256, '/gone'), 'refused');
    expect(sent).toEqual([403, 404]);
    // A request answered twice: the second answer is refused.
    expect(h.server.acceptSession(h.requests[0].sessionId)).toBe(false);
  });

  test('unanswered session requests are rejected after requestTimeoutMs', async () => {
    const h = await startServer(cert, { requestTimeoutMs: 300 });
    h.decide = () => {};
    const t0 = Date.now();
    await expectConnectError(connect(h, cert.sha256), 'refused');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
    expect(h.server.acceptSession(h.requests[0].sessionId)).toBe(false);
  });

  test('maxSessions: a request beyond it is refused without asking', async () => {
    const h = await startServer(cert, { maxSessions: 1 });
    await connect(h, cert.sha256);
    await expectConnectError(connect(h, cert.sha256), 'refused');
    expect(h.requests).toHaveLength(1);
  });

  test('a wrong certificate hash fails the connect', async () => {
    const h = await startServer(cert);
    const other = generateCertificate({ names: ['localhost'], validityDays: 1 });
    await expectConnectError(connect(h, other.sha256), 'certificate');
    expect(h.requests).toHaveLength(0);
  });

  test('connect to a port with no server times out', async () => {
    const sock = createSocket('udp4');
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
    const port = sock.address().port;
    try {
      const p = QuicClient.connect({
        url: `https://127.0.0.1:${port}/`,
        serverCertificateHashes: [cert.sha256],
        connectTimeoutMs: 400,
        onDatagram: () => {},
      });
      await expectConnectError(p, 'timeout');
    } finally {
      sock.close();
    }
  });

  test('closeSession: the client sees the code and reason', async () => {
    const h = await startServer(cert);
    const c = await connect(h, cert.sha256);
    const id = h.requests[0].sessionId;
    expect(h.server.closeSession(id, 42, 'done here')).toBe(true);
    await waitFor(() => c.closed.length === 1, "the client's onClosed");
    expect(c.closed[0]).toEqual({ code: 42, reason: 'done here' });
    await waitFor(() => h.closed.length === 1, "the server's onSessionClosed");
    expect(h.closed[0]).toEqual({ id, code: 42, reason: 'done here' });
    expect(c.session.closed).toBe(true);
    expect(c.session.sendDatagram(payload(1))).toBe(false);
    expect(h.server.sendDatagram(id, payload(1))).toBe(false);
    expect(h.server.sessionInfo(id)).toBeUndefined();
  });

  test('the client closes: the server sees it', async () => {
    const h = await startServer(cert);
    const c = await connect(h, cert.sha256);
    c.session.close(7, 'bye');
    await waitFor(() => h.closed.length === 1, "the server's onSessionClosed");
    expect(h.closed[0]).toMatchObject({ code: 7, reason: 'bye' });
    await waitFor(() => c.closed.length === 1, "the client's onClosed");
    expect(h.server.sessionCount).toBe(0);
  });

  test('server.close() closes every session', async () => {
    const h = await startServer(cert);
    const a = await connect(h, cert.sha256);
    const b = await connect(h, cert.sha256);
    expect(h.server.sessionCount).toBe(2);
    await h.server.close();
    expect(h.closed.map((c) => c.id).sort()).toEqual(h.requests.map((r) => r.sessionId).sort());
    await waitFor(() => a.closed.length === 1 && b.closed.length === 1, "both clients' onClosed");
  });

  test('oversize datagrams are refused, junk UDP does not hurt', async () => {
    const h = await startServer(cert);
    const c = await connect(h, cert.sha256);
    const id = h.requests[0].sessionId;
    // maxDatagramSize may grow while path MTU discovery runs (quinn's upper bound is an MTU of
    // 1452, ~1410 B of payload): 2000 B never fits.
    expect(c.session.info().maxDatagramSize).toBeLessThan(2000);
    expect(c.session.sendDatagram(Buffer.alloc(2000))).toBe(false);
    expect(h.server.sendDatagram(id, Buffer.alloc(65_000))).toBe(false);
    expect(h.server.sendDatagram(id + 1000, Buffer.alloc(10))).toBe(false);
    expect(c.session.sendDatagram(Buffer.alloc(0))).toBe(true);
    // A burst of garbage (random bytes, QUIC-looking long headers, oversize) at the server's port.
    const junk = createSocket('udp4');
    let seed = 12345;
    const rand = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
    for (let i = 0; i < 600; i++) {
      const size = [1, 20, 1200, 1500, 9000][i % 5];
      const b = Buffer.alloc(size);
      for (let k = 0; k < size; k++) b[k] = rand() & 0xff;
      if (i % 3 === 0) b[0] = 0xc0 | (b[0] & 0x0f); // long header, Initial-like
      junk.send(b, h.server.port, '127.0.0.1');
    }
    await new Promise((r) => setTimeout(r, 200));
    junk.close();
    await sendAll(c, 50, 1000);
    await waitFor(() => c.received.filter((d) => d.length === DATAGRAM).length === 50, 'echoes after the junk');
    expect(h.server.sessionCount).toBe(1);
  });

  test("queued datagrams (a receiver's feedback) arrive in full; a closed session refuses them", async () => {
    const h = await startServer(cert);
    const c = await connect(h, cert.sha256);
    const id = h.requests[0].sessionId;
    // Fewer than the queue holds, each sent by the addon's runtime rather than this thread.
    for (let i = 0; i < 200; i++) expect(c.session.queueDatagram(payload(i, 100))).toBe(true);
    await waitFor(() => (h.received.get(id)?.length ?? 0) === 200, 'the server to receive 200 queued datagrams');
    const got = [...h.received.get(id)!].map((d) => d.readUInt32BE(0)).sort((a, b) => a - b);
    expect(got).toEqual(Array.from({ length: 200 }, (_, i) => i));
    c.session.close(0, 'done');
    await waitFor(() => c.session.closed, 'the session to close');
    expect(c.session.queueDatagram(payload(0))).toBe(false);
  });

  test('certificate reload: new handshakes use the new one, live sessions stay', async () => {
    const h = await startServer(cert);
    const old = await connect(h, cert.sha256);
    const next = generateCertificate({ names: ['localhost', '127.0.0.1'], validityDays: 3 });
    expect(() => h.server.reloadCertificate(next.certificatePem, cert.privateKeyPem)).toThrow(/identity|key/i);
    h.server.reloadCertificate(next.certificatePem, next.privateKeyPem);
    const fresh = await connect(h, next.sha256);
    await expectConnectError(connect(h, cert.sha256), 'certificate');
    await sendAll(old, 20, 0);
    await sendAll(fresh, 20, 100);
    await waitFor(() => old.received.length === 20 && fresh.received.length === 20, 'echoes on both sessions');
    expect(old.session.closed).toBe(false);
  });

  test('rate options and caps', async () => {
    const h = await startServer(cert, { rate: { initialRateBps: 3_000_000, maxRateBps: 2_000_000 } });
    await connect(h, cert.sha256);
    const id = h.requests[0].sessionId;
    expect(h.server.sessionInfo(id)!.rateBps).toBeLessThanOrEqual(2_000_000);
    expect(h.server.setRateCap(id, 500_000)).toBe(true);
    const info = h.server.sessionInfo(id)!;
    expect(info.capBps).toBe(500_000);
    expect(info.rateBps).toBeLessThanOrEqual(500_000);
    expect(h.server.setLowWaterMark(id, 8192)).toBe(true);
    expect(h.server.setRateCap(9999, 1)).toBe(false);
  });

  test('a bad certificate or key, or a bad host, fails listen', async () => {
    const base = { host: '127.0.0.1', port: 0, maxSessions: 1, maxPendingSessions: 1 };
    const cb = { onSessionRequest: () => {}, onDatagram: () => {} };
    await expect(
      QuicServer.listen({ ...base, ...cb, certificatePem: 'x', privateKeyPem: cert.privateKeyPem }),
    ).rejects.toThrow(/CERTIFICATE/);
    await expect(
      QuicServer.listen({ ...base, ...cb, certificatePem: cert.certificatePem, privateKeyPem: 'x' }),
    ).rejects.toThrow(/key/);
    await expect(
      QuicServer.listen({
        ...base,
        ...cb,
        host: 'localhost',
        certificatePem: cert.certificatePem,
        privateKeyPem: cert.privateKeyPem,
      }),
    ).rejects.toThrow(/IP address/);
  });
});

test('a process exits on its own after server.close() and the sessions closed', () => {
  const tsx = join(__dirname, '..', '..', 'node_modules', '.bin', 'tsx');
  const r = spawnSync(tsx, [join(__dirname, 'fixtures', 'exit-after-close.ts')], { encoding: 'utf8', timeout: 20_000 });
  expect(r.error).toBeUndefined();
  expect(r.signal).toBeNull();
  expect(r.stderr).toBe('');
  expect(r.stdout.trim().split('\n').pop()).toBe('closed');
  expect(r.status).toBe(0);
});
