/**
 * `npm run bench:quic`: a server on 127.0.0.1 sends N datagrams of 1200 B to a client in the
 * same process as fast as its send buffer takes them (late binding: refill on the low-water
 * event), for at most a few seconds. Prints progress, then one JSON line: throughput, datagrams
 * delivered/sent, and CPU time (process.cpuUsage: JS and the addon's threads, both ends) per MB.
 *
 * Options (environment): QUIC_BENCH_N (20000), QUIC_BENCH_SIZE (1200), QUIC_BENCH_SECONDS (5).
 */
import { generateCertificate, QuicClient, QuicServer } from '@mutp/quic';

const N = Number(process.env.QUIC_BENCH_N ?? 20_000);
const SIZE = Number(process.env.QUIC_BENCH_SIZE ?? 1200);
const SECONDS = Number(process.env.QUIC_BENCH_SECONDS ?? 5);

async function main(): Promise<void> {
  const cert = generateCertificate({ names: ['127.0.0.1'], validityDays: 1 });
  let sent = 0;
  let lowEvents = 0;
  let refused = 0;
  let sessionId = -1;
  const payload = Buffer.alloc(SIZE, 0xab);
  const pump = (): void => {
    while (sent < N) {
      payload.writeUInt32BE(sent, 0);
      if (!server.sendDatagram(sessionId, payload)) {
        refused++;
        return;
      }
      sent++;
    }
  };
  let started = 0;
  const server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 1,
    maxPendingSessions: 1,
    onSessionRequest: (r) => server.acceptSession(r.sessionId),
    onSessionOpen: (id) => {
      sessionId = id;
      started = performance.now();
      pump();
    },
    onDatagram: () => {},
    onSendBufferLow: () => {
      lowEvents++;
      pump();
    },
  });

  let delivered = 0;
  let lastAt = 0;
  let dropped = 0;
  const seen = new Uint8Array(N);
  const session = await QuicClient.connect({
    url: `https://127.0.0.1:${server.port}/bench`,
    serverCertificateHashes: [cert.sha256],
    onDatagram: (d) => {
      const i = d.readUInt32BE(0);
      if (i < N && !seen[i]) {
        seen[i] = 1;
        delivered++;
      }
      lastAt = performance.now();
    },
    onDatagramsDropped: (n) => (dropped += n),
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const deadline = t0 + SECONDS * 1000;
  // Done when everything arrived, or nothing arrived for 500 ms after the last send, or time is up.
  while (performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    if (delivered >= N) break;
    if (sent >= N && lastAt > 0 && performance.now() - lastAt > 500) break;
  }
  const cpu = process.cpuUsage(cpu0);
  const elapsedMs = (lastAt || performance.now()) - (started || t0);
  const info = server.sessionInfo(sessionId);
  session.close(0, 'bench done');
  await server.close();
  const mb = (delivered * SIZE) / 1e6;
  const result = {
    bench: 'quic-loopback',
    datagramBytes: SIZE,
    sent,
    delivered,
    deliveredRatio: Number((delivered / Math.max(1, sent)).toFixed(4)),
    elapsedMs: Number(elapsedMs.toFixed(1)),
    MBps: Number((mb / (elapsedMs / 1000)).toFixed(2)),
    cpuMsPerMB: Number(((cpu.user + cpu.system) / 1000 / Math.max(mb, 1e-9)).toFixed(2)),
    cpuUserMs: Math.round(cpu.user / 1000),
    cpuSystemMs: Math.round(cpu.system / 1000),
    lowWaterEvents: lowEvents,
    sendRefusals: refused,
    droppedInJs: dropped,
    serverRttMs: info ? Number(info.rttMs.toFixed(3)) : null,
    serverLostPackets: info?.lostPackets ?? null,
    serverCwnd: info?.congestionWindow ?? null,
  };
  console.error(`[bench:quic] ${delivered}/${sent} datagrams of ${SIZE} B in ${result.elapsedMs} ms`);
  console.log(JSON.stringify(result));
}

void main();
