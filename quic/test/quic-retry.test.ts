/**
 * Address validation under a handshake flood: once `retryAbovePendingSessions` connections are
 * pending, the server answers a new connection attempt with a stateless Retry (RFC 9000 §8.1.2),
 * seen here on the wire through a UDP relay. A real client echoes the token and gets through; the
 * same Initial replayed from a source that never answers (as a forged address would) draws one
 * Retry smaller than itself and no handshake flight.
 */
import { createSocket, type Socket } from 'node:dgram';
import { generateCertificate, QuicClient, QuicServer, type QuicSession, type SessionRequest } from '@mutp/quic';

const cert = generateCertificate({ names: ['localhost', '127.0.0.1'], validityDays: 2 });

/** QUIC v1 long-header packet type of a datagram's first packet, or 'short'. */
function packetType(d: Buffer): 'initial' | '0rtt' | 'handshake' | 'retry' | 'short' {
  if ((d[0] & 0x80) === 0) return 'short';
  return (['initial', '0rtt', 'handshake', 'retry'] as const)[(d[0] >> 4) & 0x03];
}

async function waitFor(cond: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function udpSocket(): Promise<Socket> {
  const s = createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', r));
  return s;
}

/**
 * A UDP relay to the server: each client address gets its own upstream socket; it records the
 * datagrams each way per client (the first client datagram is its Initial).
 */
class Relay {
  readonly fromServer = new Map<string, Buffer[]>();
  readonly fromClient = new Map<string, Buffer[]>();
  private readonly upstream = new Map<string, Socket>();
  private constructor(
    private readonly front: Socket,
    private readonly serverPort: number,
  ) {
    front.on('message', (d, from) => void this.forward(d, `${from.address}:${from.port}`, from.port));
  }

  static async start(serverPort: number): Promise<Relay> {
    return new Relay(await udpSocket(), serverPort);
  }

  get port(): number {
    return this.front.address().port;
  }

  /** Datagrams the server sent to every client, by their first packet's type. */
  typesFromServer(): string[] {
    return [...this.fromServer.values()].flat().map(packetType);
  }

  close(): void {
    this.front.close();
    for (const s of this.upstream.values()) s.close();
  }

  private async forward(d: Buffer, key: string, clientPort: number): Promise<void> {
    if (!this.fromClient.has(key)) this.fromClient.set(key, []);
    this.fromClient.get(key)!.push(Buffer.from(d));
    let up = this.upstream.get(key);
    if (up === undefined) {
      up = await udpSocket();
      this.upstream.set(key, up);
      this.fromServer.set(key, []);
      up.on('message', (reply) => {
        this.fromServer.get(key)!.push(Buffer.from(reply));
        this.front.send(reply, clientPort, '127.0.0.1');
      });
    }
    up.send(d, this.serverPort, '127.0.0.1');
  }
}

let server: QuicServer;
let relay: Relay;
const held: SessionRequest[] = [];
const sessions: QuicSession[] = [];

beforeEach(async () => {
  held.length = 0;
  server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 16,
    maxPendingSessions: 16,
    retryAbovePendingSessions: 2,
    // Requests are held (a slow token check): they stay pending for the whole test.
    requestTimeoutMs: 30_000,
    onSessionRequest: (r) => held.push(r),
    onDatagram: () => undefined,
  });
  relay = await Relay.start(server.port);
});

afterEach(async () => {
  for (const s of sessions.splice(0)) s.close();
  relay.close();
  await server.close();
});

function connectThroughRelay(): Promise<QuicSession> {
  return QuicClient.connect({
    url: `https://127.0.0.1:${relay.port}/mutp`,
    serverCertificateHashes: [cert.sha256],
    connectTimeoutMs: 10_000,
    onDatagram: () => undefined,
  }).then((s) => {
    sessions.push(s);
    return s;
  });
}

test('below the threshold no Retry; above it a Retry, and the client still gets through', async () => {
  const first = [connectThroughRelay(), connectThroughRelay()];
  await waitFor(() => held.length === 2, 'two pending session requests');
  expect(relay.typesFromServer()).not.toContain('retry');
  expect(server.retriesSent).toBe(0);

  // Two pending: the third attempt must validate its address first.
  const third = connectThroughRelay();
  await waitFor(() => held.length === 3, 'the third session request (after its Retry)');
  const retried = [...relay.fromServer.entries()].filter(([, ds]) => ds.some((d) => packetType(d) === 'retry'));
  expect(retried).toHaveLength(1);
  // Its first answer was the Retry, and it came back with a second Initial carrying the token.
  const [key, replies] = retried[0];
  expect(packetType(replies[0])).toBe('retry');
  expect(relay.fromClient.get(key)!.filter((d) => packetType(d) === 'initial').length).toBeGreaterThanOrEqual(2);
  expect(server.retriesSent).toBe(1);

  for (const r of held) server.acceptSession(r.sessionId);
  await Promise.all([...first, third]);
});

test('an Initial replayed from a source that never answers draws one small Retry, no handshake', async () => {
  const pending = [connectThroughRelay(), connectThroughRelay()];
  await waitFor(() => held.length === 2, 'two pending session requests');
  pending.push(connectThroughRelay());
  await waitFor(() => held.length === 3, 'the third session request (after its Retry)');
  // The Initial that drew the Retry (a valid one, as a flooder would send; the server kept no
  // state for it), replayed from another source: what a forged source address would receive.
  const [key] = [...relay.fromServer.entries()].find(([, ds]) => packetType(ds[0]) === 'retry')!;
  const initial = relay.fromClient.get(key)![0];
  expect(packetType(initial)).toBe('initial');
  const forged = await udpSocket();
  const replies: Buffer[] = [];
  forged.on('message', (d) => replies.push(Buffer.from(d)));
  try {
    forged.send(initial, server.port, '127.0.0.1');
    await waitFor(() => replies.length >= 1, 'a reply to the replayed Initial');
    expect(packetType(replies[0])).toBe('retry');
    expect(replies[0].length).toBeLessThan(initial.length);
    // Stateless: no pending connection for it; a second copy draws another Retry, nothing more.
    forged.send(initial, server.port, '127.0.0.1');
    await waitFor(() => replies.length >= 2, 'a reply to the second replayed Initial');
    expect(replies.map(packetType)).toEqual(['retry', 'retry']);
    expect(held).toHaveLength(3);
    expect(server.retriesSent).toBe(3);
  } finally {
    forged.close();
  }
  for (const r of held) server.acceptSession(r.sessionId);
  await Promise.all(pending);
});
