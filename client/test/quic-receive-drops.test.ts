/**
 * The Node host's receive-drop count (ClientHost.receiveDrops, which holds each source's reported
 * rate to what the client handles: shared/src/receiver/handled-rate.ts) includes the QUIC
 * client's drops, not only node-rtc's: over a real loopback WebTransport session opened through
 * the host, the JS thread is kept busy while a local server sends more than the addon's shared
 * client queue holds (16 MiB); what it dropped must show in the host's count. Counts only.
 */
import { generateCertificate, QuicServer } from '@mutp/quic';
import type { LinkTransport } from '@mutp/shared/client';
import { waitFor } from '@mutp/testing/wait';
import { createNodeHost } from '../src/node-host';

/** More than the addon's client queue (quic/native/src/session.rs MAX_QUEUED_BYTES, 16 MiB). */
const SEND_BYTES = 24 * 1024 * 1024;
const DATAGRAM = 1000;
const BLOCK_LIMIT_MS = 60_000;

let server: QuicServer | undefined;
let transport: LinkTransport | undefined;

afterEach(async () => {
  transport?.close();
  transport = undefined;
  await server?.close();
  server = undefined;
});

/** Keeps this (the JS) thread busy until `done()`, so nothing queued for it is read meanwhile. */
function blockUntil(done: () => boolean, what: string): void {
  const start = performance.now();
  while (!done()) {
    if (performance.now() - start > BLOCK_LIMIT_MS) throw new Error(`gave up after ${BLOCK_LIMIT_MS} ms: ${what}`);
  }
}

test("the host's receiveDrops counts the datagrams the QUIC client's queue dropped unread", async () => {
  const cert = generateCertificate({ names: ['127.0.0.1'], validityDays: 1 });
  let sessionId: number | undefined;
  server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 2,
    maxPendingSessions: 2,
    // Everything is queued at once, then sent while the client's JS thread is busy.
    datagramSendBufferBytes: 2 * SEND_BYTES,
    rate: { initialRateBps: 200e6 },
    onSessionRequest: (r) => server!.acceptSession(r.sessionId),
    onSessionOpen: (id) => (sessionId = id),
    onDatagram: () => undefined,
  });
  const host = createNodeHost();
  transport = await host.quic!({
    url: `https://127.0.0.1:${server.port}/mutp`,
    certificateHashes: [Buffer.from(cert.sha256).toString('base64')],
    timeoutMs: 5000,
  });
  let received = 0;
  transport.onDatagram = () => received++;
  await waitFor('the server to open the session', async () => sessionId, 10_000, 5);
  const id = sessionId!;

  const dropsBefore = host.receiveDrops!();
  const payload = Buffer.alloc(DATAGRAM, 0x5a);
  let sent = 0;
  while (sent * DATAGRAM < SEND_BYTES) {
    expect(server.sendDatagram(id, payload)).toBe(true);
    sent++;
  }
  blockUntil(() => server!.bufferedBytes(id) === 0, 'the server to send what it was given');

  // Unblocked: the queue's batch arrives with what it dropped. Loopback UDP may lose a few
  // datagrams besides (the client's socket buffer), so the sum may fall a little short of `sent`.
  const dropped = () => host.receiveDrops!() - dropsBefore;
  const accounted = () => received + dropped() >= sent * 0.95;
  await waitFor(
    'the datagrams sent to be read or counted as dropped',
    async () => (accounted() ? true : undefined),
    20_000,
    10,
  ).catch((e: Error) => {
    throw new Error(`${e.message}: sent ${sent}, read ${received}, dropped ${dropped()}`);
  });
  console.log(`quic receive drops: sent ${sent}, read ${received}, dropped ${dropped()}`);
  expect(dropped()).toBeGreaterThan(0);
  expect(received + dropped()).toBeLessThanOrEqual(sent);
}, 120_000);
