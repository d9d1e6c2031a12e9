/**
 * `npx tsx proxy/bench/quic-send-cost.ts [--seconds 4] [--rate-kbps 1792] [--bursts 1,2,4,8]`:
 * what a paced proxy's QUIC sends cost per datagram, by how many leave per wake-up (issue 33).
 * A server and a client session on loopback in this process; the server sends 1200-byte
 * datagrams at a fixed rate from a timer, `burst` datagrams every `burst` datagram-times (as the
 * proxy's pacer does with a quantum of that many datagrams), alternating the burst sizes over
 * `--rounds` rounds. Per datagram: this process's JS thread CPU, the QUIC runtime's thread CPU
 * (both from /proc, so the client's share is in them, the same in every regime), and the time
 * spent inside sendDatagram on the JS thread. The last line is JSON.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Command } from 'commander';
import { generateCertificate, QuicClient, QuicServer } from '@mutp/quic';

const opts = new Command()
  .option('--seconds <s>', 'seconds per measurement', (v) => Number(v), 4)
  .option('--rate-kbps <k>', 'send rate in KB/s (1 KB = 1024 B)', (v) => Number(v), 1792)
  .option('--bursts <list>', 'datagrams per wake-up, comma-separated', '1,4')
  .option('--rounds <n>', 'rounds over the burst sizes (alternating)', (v) => Number(v), 3)
  .parse()
  .opts<{ seconds: number; rateKbps: number; bursts: string; rounds: number }>();

const SIZE = 1200;

/** CPU ns of this process's threads so far: the JS thread's and the named runtime threads'. */
function threadNs(): { main: number; runtime: number } {
  let main = 0;
  let runtime = 0;
  for (const tid of readdirSync('/proc/self/task')) {
    const ns = Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    if (Number(tid) === process.pid) main += ns;
    else if (readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim() === 'tokio-rt-worker') runtime += ns;
  }
  return { main, runtime };
}

async function main(): Promise<void> {
  const cert = generateCertificate({ names: ['127.0.0.1'], validityDays: 1 });
  let sessionId = -1;
  let opened!: () => void;
  const open = new Promise<void>((r) => (opened = r));
  const server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    maxSessions: 1,
    maxPendingSessions: 1,
    rate: { maxRateBps: opts.rateKbps * 1024 * 2, initialRateBps: opts.rateKbps * 1024 * 2 },
    onSessionRequest: (r) => server.acceptSession(r.sessionId),
    onSessionOpen: (id) => {
      sessionId = id;
      opened();
    },
    onDatagram: () => {},
  });
  let received = 0;
  const client = await QuicClient.connect({
    url: `https://127.0.0.1:${server.port}/bench`,
    serverCertificateHashes: [cert.sha256],
    onDatagram: () => {
      received++;
    },
  });
  await open;
  const payload = new Uint8Array(SIZE);
  const datagramMs = (SIZE * 1000) / (opts.rateKbps * 1024);

  const measure = async (burst: number) => {
    let sent = 0;
    let refused = 0;
    let inSendNs = 0n;
    const t0 = threadNs();
    const r0 = received;
    const start = performance.now();
    await new Promise<void>((done) => {
      const tick = () => {
        const elapsed = performance.now() - start;
        if (elapsed >= opts.seconds * 1000) return done();
        // Every datagram due by now, in bursts of `burst` (the pacer's quantum).
        const due = Math.floor(elapsed / datagramMs / burst + 1) * burst;
        const a = process.hrtime.bigint();
        for (; sent < due; sent++) if (!server.sendDatagram(sessionId, payload)) refused++;
        inSendNs += process.hrtime.bigint() - a;
        setTimeout(tick, Math.max(1, due * datagramMs - (performance.now() - start)));
      };
      tick();
    });
    await new Promise((r) => setTimeout(r, 200));
    const t1 = threadNs();
    return {
      burst,
      sent,
      refused,
      received: received - r0,
      mainUsPerDatagram: Math.round((t1.main - t0.main) / sent / 10) / 100,
      runtimeUsPerDatagram: Math.round((t1.runtime - t0.runtime) / sent / 10) / 100,
      inSendUsPerDatagram: Math.round(Number(inSendNs) / sent / 10) / 100,
    };
  };

  const bursts = opts.bursts.split(',').map(Number);
  const rows = [];
  await measure(bursts[0]); // warm-up
  for (let round = 0; round < opts.rounds; round++) {
    for (const burst of round % 2 ? [...bursts].reverse() : bursts) {
      const row = await measure(burst);
      rows.push(row);
      console.log(
        `burst ${burst}: JS ${row.mainUsPerDatagram} us/datagram (${row.inSendUsPerDatagram} in sendDatagram), ` +
          `runtime ${row.runtimeUsPerDatagram} us/datagram, ${row.received}/${row.sent} received, ${row.refused} refused`,
      );
    }
  }
  client.close(0, 'done');
  await server.close();
  console.log(JSON.stringify(rows));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
