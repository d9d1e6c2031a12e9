/**
 * `npm run bench:quic-handshake`: how long a QUIC + WebTransport set-up takes when the path loses
 * packets at random. A server on 127.0.0.1 and a client talk through a UDP relay in this process
 * that delays every packet (half the RTT each way) and drops each with probability `loss`, seeded,
 * independently in each direction. Each trial is a fresh client connection (QUIC handshake plus
 * the CONNECT), with the initial RTT the Node client and the proxy use (100 ms). The baseline in
 * the same run is the same trials at no loss; the last line of stdout is one JSON document with
 * both distributions (median, p95, max, failures) and their ratio.
 *
 * Options: --loss p (0.27, vehicular's), --rtt ms (40), --trials n (30), --seed n (1),
 * --timeout ms (10000: a trial that takes longer counts as failed).
 */
import { createSocket, RemoteInfo, Socket } from 'node:dgram';
import { parseArgs } from 'node:util';
import { seededRandom } from '@mutp/shared';
import { generateCertificate, QuicClient, QuicServer } from '@mutp/quic';

const { values } = parseArgs({
  options: {
    loss: { type: 'string', default: '0.27' },
    rtt: { type: 'string', default: '40' },
    trials: { type: 'string', default: '30' },
    seed: { type: 'string', default: '1' },
    timeout: { type: 'string', default: '10000' },
  },
});
const opts = {
  loss: Number(values.loss),
  rtt: Number(values.rtt),
  trials: Number(values.trials),
  seed: Number(values.seed),
  timeout: Number(values.timeout),
};
if (!(opts.loss >= 0 && opts.loss < 1)) throw new Error(`--loss: in [0, 1), got ${opts.loss}`);
if (!(Number.isInteger(opts.trials) && opts.trials >= 1 && opts.trials <= 1000))
  throw new Error(`--trials: 1 to 1000, got ${opts.trials}`);

/** Uniform in [0, 1) from the core's seeded generator. */
function seeded(seed: number): () => number {
  const next = seededRandom(seed);
  return () => next() / 4294967296;
}

/**
 * A lossy, delaying relay between one client (whoever sends to it first) and the server's port.
 * Every client packet goes out from one socket to the server, every server packet back to the
 * client it came for.
 */
async function lossyRelay(serverPort: number, loss: number, oneWayMs: number, random: () => number) {
  const front: Socket = createSocket('udp4');
  const back: Socket = createSocket('udp4');
  let client: RemoteInfo | undefined;
  const timers = new Set<NodeJS.Timeout>();
  const later = (fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, oneWayMs);
    timers.add(t);
  };
  front.on('message', (msg, from) => {
    client = from;
    if (random() < loss) return;
    later(() => back.send(msg, serverPort, '127.0.0.1'));
  });
  back.on('message', (msg) => {
    const to = client;
    if (!to || random() < loss) return;
    later(() => front.send(msg, to.port, to.address));
  });
  await Promise.all([
    new Promise<void>((resolve) => front.bind(0, '127.0.0.1', resolve)),
    new Promise<void>((resolve) => back.bind(0, '127.0.0.1', resolve)),
  ]);
  return {
    port: front.address().port,
    close() {
      for (const t of timers) clearTimeout(t);
      front.close();
      back.close();
    },
  };
}

interface Distribution {
  loss: number;
  trials: number;
  failed: number;
  medianMs: number | null;
  p95Ms: number | null;
  maxMs: number | null;
}

function quantile(sorted: number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

async function measure(server: QuicServer, hash: Uint8Array, loss: number, seed: number): Promise<Distribution> {
  const times: number[] = [];
  let failed = 0;
  for (let i = 0; i < opts.trials; i++) {
    const relay = await lossyRelay(server.port, loss, opts.rtt / 2, seeded(seed * 7919 + i));
    const t0 = performance.now();
    try {
      const session = await QuicClient.connect({
        url: `https://127.0.0.1:${relay.port}/mutp`,
        serverCertificateHashes: [hash],
        connectTimeoutMs: opts.timeout,
        initialRttMs: 100,
        onDatagram: () => undefined,
      });
      times.push(performance.now() - t0);
      session.close();
    } catch {
      failed++;
    } finally {
      relay.close();
    }
    process.stderr.write(`bench:quic-handshake loss ${loss}: trial ${i + 1}/${opts.trials}\n`);
  }
  times.sort((a, b) => a - b);
  const round = (v: number | null) => (v === null ? null : Math.round(v));
  return {
    loss,
    trials: opts.trials,
    failed,
    medianMs: round(quantile(times, 0.5)),
    p95Ms: round(quantile(times, 0.95)),
    maxMs: round(times.length ? times[times.length - 1] : null),
  };
}

async function main(): Promise<void> {
  const cert = generateCertificate({ names: ['127.0.0.1'], validityDays: 1 });
  const server = await QuicServer.listen({
    host: '127.0.0.1',
    port: 0,
    certificatePem: cert.certificatePem,
    privateKeyPem: cert.privateKeyPem,
    // A closed trial's session lingers at the server until its idle timeout (the relay is gone
    // before the close reaches it): room for all of them.
    maxSessions: 4096,
    maxPendingSessions: 16,
    initialRttMs: 100,
    onSessionRequest: (r) => server.acceptSession(r.sessionId),
    onDatagram: () => undefined,
  });
  try {
    const baseline = await measure(server, cert.sha256, 0, opts.seed);
    const lossy = await measure(server, cert.sha256, opts.loss, opts.seed);
    const ratio = (a: number | null, b: number | null) => (a !== null && b ? Math.round((a / b) * 100) / 100 : null);
    console.log(
      JSON.stringify({
        bench: 'quic-handshake',
        rttMs: opts.rtt,
        seed: opts.seed,
        baseline,
        lossy,
        medianRatio: ratio(lossy.medianMs, baseline.medianMs),
        p95Ratio: ratio(lossy.p95Ms, baseline.p95Ms),
      }),
    );
  } finally {
    await server.close();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
