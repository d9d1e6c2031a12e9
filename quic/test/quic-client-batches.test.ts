/**
 * The client sessions of one process share their datagram batches (issue 33): the addon queues
 * every client session's datagrams together and calls JavaScript once per batch, which routes each
 * datagram to its session by id. Checked on loopback: each session gets exactly its own datagrams,
 * byte-exact, while batches carry several sessions' datagrams; a closed session's routing goes and
 * the others keep theirs.
 */
import { clientBatchStats, generateCertificate, QuicClient, QuicServer, type QuicSession } from '@mutp/quic';
import { waitFor } from '@mutp/testing/wait';

const SESSIONS = 3;
const PER_BURST = 8;
const DATAGRAM = 1000;

/** Bounded: fails naming `what` after 10 s. */
const until = (cond: () => boolean, what: string) => waitFor(what, async () => (cond() ? true : undefined), 10_000, 5);

/** Datagram `seq` for session `s`: its bytes derive from both. */
function payload(s: number, seq: number): Buffer {
  const b = Buffer.alloc(DATAGRAM);
  b.writeUInt16BE(s, 0);
  b.writeUInt32BE(seq, 2);
  for (let k = 6; k < DATAGRAM; k++) b[k] = (s * 131 + seq * 31 + k) & 0xff;
  return b;
}

let server: QuicServer | undefined;
const sessions: QuicSession[] = [];

afterEach(async () => {
  for (const s of sessions.splice(0)) s.close();
  await server?.close();
  server = undefined;
});

test('client sessions share batches; each session gets exactly its own datagrams', async () => {
  const cert = generateCertificate({ names: ['127.0.0.1'], validityDays: 1 });
  const opened: number[] = [];
  server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 8,
    maxPendingSessions: 8,
    onSessionRequest: (r) => server!.acceptSession(r.sessionId),
    onSessionOpen: (id) => opened.push(id),
    onDatagram: () => undefined,
  });
  const received: Buffer[][] = [];
  for (let s = 0; s < SESSIONS; s++) {
    received.push([]);
    sessions.push(
      await QuicClient.connect({
        url: `https://127.0.0.1:${server.port}/mutp`,
        serverCertificateHashes: [cert.sha256],
        connectTimeoutMs: 5000,
        onDatagram: (d) => received[s].push(Buffer.from(d)),
      }),
    );
  }
  await until(() => opened.length === SESSIONS, 'the server to open every session');
  const serverIds = [...opened]; // in connect order: one client connects at a time

  const before = clientBatchStats();
  let sent = 0;
  // A burst to every session at once: their datagrams arrive within one hold of each other.
  const burst = (targets: number[]) => {
    for (let i = 0; i < PER_BURST; i++) {
      for (const s of targets) expect(server!.sendDatagram(serverIds[s], payload(s, sent + i))).toBe(true);
    }
    sent += PER_BURST;
  };
  const all = [...Array(SESSIONS).keys()];
  for (let round = 0; round < 20 && clientBatchStats().sharedBatches === before.sharedBatches; round++) {
    burst(all);
    await until(() => received.every((r) => r.length === sent), `every session to receive ${sent} datagrams`);
  }
  const after = clientBatchStats();
  expect(after.sharedBatches).toBeGreaterThan(before.sharedBatches);
  expect(after.datagrams - before.datagrams).toBe(SESSIONS * sent);
  expect(after.batches - before.batches).toBeLessThan(SESSIONS * sent);
  for (let s = 0; s < SESSIONS; s++) {
    const bySeq = [...received[s]].sort((a, b) => a.readUInt32BE(2) - b.readUInt32BE(2));
    bySeq.forEach((d, seq) => expect(d.equals(payload(s, seq))).toBe(true));
  }

  // Session 0 closes: the others keep receiving theirs, and nothing of theirs goes astray.
  sessions[0].close();
  await until(() => sessions[0].closed, 'session 0 to close');
  const stale = received[0].length;
  burst([1, 2]);
  await until(() => received[1].length === sent && received[2].length === sent, 'sessions 1 and 2 to receive');
  expect(received[0].length).toBe(stale);
  for (const s of [1, 2]) {
    const bySeq = [...received[s]].sort((a, b) => a.readUInt32BE(2) - b.readUInt32BE(2));
    bySeq.forEach((d, seq) => expect(d.equals(payload(s, seq))).toBe(true));
  }
});
