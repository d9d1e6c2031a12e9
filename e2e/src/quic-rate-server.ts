/**
 * The sending end of bench:quic-clients, a process of its own (the testbed runs it in a proxy's
 * namespace): `tsx e2e/src/quic-rate-server.ts --host 10.78.1.2 --cap-bps 1835008 --seconds 6`.
 * A QUIC (WebTransport) server with the proxy's rate settings (MutpRate, initial rate = cap, as
 * proxy/src/quic-native.ts sets them) that sends every session numbered 1200-byte datagrams as
 * fast as its controller lets them go (late binding on the low-water event, as the proxy), for
 * `--seconds`, and samples the controller (sessionInfo) every 100 ms.
 *
 * Prints `{"port", "sha256"}` (base64) once listening, then one JSON line per session when its
 * sending ends: datagrams sent, datagrams received from the client and the largest, and the medians of the controller's samples (RTT, window, rate,
 * delivery rate) with quinn's packet counts. SIGTERM closes it.
 */
import { Command } from 'commander';
import { generateCertificate, QuicServer, SessionInfo } from '@mutp/quic';

const o = new Command()
  .name('quic-rate-server')
  .option('--host <address>', 'address to listen on', '127.0.0.1')
  .option('--cap-bps <n>', "the controller's cap, bytes/s (the proxy's upload limit)", (v) => Number(v), 1792 * 1024)
  .option('--seconds <s>', 'how long each session is sent to', (v) => Number(v), 6)
  .parse()
  .opts<{ host: string; capBps: number; seconds: number }>();

const DATAGRAM_BYTES = 1200;
const SAMPLE_MS = 100;

interface Sending {
  sent: number;
  /** Datagrams the client sent, and the largest (its probe of sizes up to MUTP's 1200 B). */
  received: number;
  largestReceived: number;
  end: number;
  samples: SessionInfo[];
  timer: NodeJS.Timeout;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[s.length >> 1] : null;
};

async function main(): Promise<void> {
  const cert = generateCertificate({ names: [o.host], validityDays: 1 });
  const sessions = new Map<number, Sending>();
  const payload = Buffer.alloc(DATAGRAM_BYTES, 0xab);

  const finish = (id: number) => {
    const s = sessions.get(id);
    if (!s) return;
    clearInterval(s.timer);
    sessions.delete(id);
    const of = (k: keyof SessionInfo) => median(s.samples.map((x) => Number(x[k])));
    const last = s.samples[s.samples.length - 1];
    console.log(
      JSON.stringify({
        session: id,
        sent: s.sent,
        received: s.received,
        largestReceived: s.largestReceived,
        seconds: o.seconds,
        rttMs: of('rttMs'),
        minRttMs: of('minRttMs'),
        congestionWindow: of('congestionWindow'),
        rateBps: of('rateBps'),
        deliveryRateBps: of('deliveryRateBps'),
        // Near the send buffer (64 KiB): quinn's window or pacer held the datagrams; near 0: this process did.
        bufferedBytes: of('bufferedBytes'),
        lostPackets: last?.lostPackets ?? null,
        sentPackets: last?.sentPackets ?? null,
      }),
    );
  };

  const pump = (id: number) => {
    const s = sessions.get(id);
    if (!s) return;
    if (performance.now() >= s.end) return finish(id);
    while (performance.now() < s.end) {
      payload.writeUInt32BE(s.sent, 0);
      if (!server.sendDatagram(id, payload)) return;
      s.sent++;
    }
  };

  const server = await QuicServer.listen({
    host: o.host,
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 4,
    maxPendingSessions: 4,
    initialRttMs: 100,
    rate: { maxRateBps: o.capBps, initialRateBps: o.capBps },
    onSessionRequest: (r) => server.acceptSession(r.sessionId),
    onSessionOpen: (id) => {
      const s: Sending = {
        sent: 0,
        received: 0,
        largestReceived: 0,
        end: performance.now() + o.seconds * 1000,
        samples: [],
        timer: setInterval(() => {
          const info = server.sessionInfo(id);
          if (info) s.samples.push(info);
          if (performance.now() >= s.end) finish(id);
        }, SAMPLE_MS),
      };
      sessions.set(id, s);
      pump(id);
    },
    onDatagram: (id, data) => {
      const s = sessions.get(id);
      if (!s) return;
      s.received++;
      s.largestReceived = Math.max(s.largestReceived, data.length);
    },
    onSendBufferLow: (id) => pump(id),
    onSessionClosed: (id) => finish(id),
  });
  console.log(JSON.stringify({ port: server.port, sha256: Buffer.from(cert.sha256).toString('base64') }));
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((e: unknown) => {
  console.error(`quic-rate-server: ${String(e)}`);
  process.exit(1);
});
