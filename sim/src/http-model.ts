/**
 * Parallel HTTP baseline: the same GET to every source over its own TCP connection; the client
 * keeps the first complete response. Each connection is a round-based TCP Reno model, seeded:
 * - connection set-up 1 RTT, request 1/2 RTT, so the first byte leaves the source at 1.5 RTT;
 * - per round the source sends cwnd segments (MSS 1448); a round lasts max(RTT, cwnd * MSS / cap):
 *   once cwnd exceeds the path's BDP the source's cap, not the RTT, paces it;
 * - slow start from an initial window of 10 segments, doubling per round until the first loss,
 *   then congestion avoidance (+1 per round). Each segment is lost with probability `loss`; a round
 *   with losses halves cwnd (fast retransmit) and resends them in the next round; a round with
 *   fewer than 3 delivered segments after a loss waits for a retransmission timeout (200 ms min).
 * In steady state this gives Mathis-like throughput, MSS / RTT * sqrt(3 / (2p)), under loss.
 */
import { Random, seededRandom } from '@mutp/shared';
import { idealMs, KB, Scenario, SimResult } from './scenario';

const MSS = 1448;
const INITIAL_WINDOW = 10;
const MIN_RTO_MS = 200;

interface Connection {
  /** Arrival time at the client of each round's last segment, with cumulative bytes then. */
  deliveries: { at: number; bytes: number }[];
  finishedAt: number;
  segmentsSent: number;
}

function simulateConnection(s: Scenario, capKBps: number, random: Random): Connection {
  const bytesPerMs = (capKBps * KB) / 1000;
  let now = 1.5 * s.rttMs; // SYN/SYN-ACK, then the request reaches the source
  let cwnd = INITIAL_WINDOW;
  let ssthresh = Infinity;
  let remaining = Math.ceil(s.objectBytes / MSS);
  let delivered = 0;
  let segmentsSent = 0;
  const deliveries: { at: number; bytes: number }[] = [];
  const maxMs = s.maxSimMs ?? 120_000;
  while (remaining > 0 && now < maxMs) {
    const n = Math.min(Math.floor(cwnd), remaining);
    const serialisation = (n * MSS) / bytesPerMs;
    let lost = 0;
    for (let i = 0; i < n; i++) if (random() / 0x100000000 < s.loss) lost++;
    segmentsSent += n;
    remaining -= n - lost;
    delivered += n - lost;
    deliveries.push({ at: now + serialisation + s.rttMs / 2, bytes: Math.min(delivered * MSS, s.objectBytes) });
    if (lost === 0) {
      now += Math.max(s.rttMs, serialisation);
      cwnd = cwnd < ssthresh ? cwnd * 2 : cwnd + 1;
    } else if (n - lost >= 3) {
      ssthresh = Math.max(2, cwnd / 2);
      cwnd = ssthresh;
      now += Math.max(s.rttMs, serialisation);
    } else {
      ssthresh = Math.max(2, cwnd / 2);
      cwnd = 1;
      now += Math.max(MIN_RTO_MS, 2 * s.rttMs, serialisation);
    }
  }
  const last = deliveries[deliveries.length - 1];
  return { deliveries, finishedAt: remaining === 0 && last ? last.at : Infinity, segmentsSent };
}

function bytesBy(c: Connection, t: number): number {
  let bytes = 0;
  for (const d of c.deliveries) if (d.at <= t) bytes = d.bytes;
  return bytes;
}

export function simulateHttp(s: Scenario): SimResult {
  const random = seededRandom(s.seed * 104729 + 3);
  const connections = s.capsKBps.map((cap) => simulateConnection(s, cap, random));
  const finishedAt = Math.min(...connections.map((c) => c.finishedAt));
  const complete = Number.isFinite(finishedAt);
  const end = complete ? finishedAt : (s.maxSimMs ?? 120_000);
  const receivedBytes = connections.map((c) => bytesBy(c, end));
  const totalReceived = receivedBytes.reduce((a, b) => a + b, 0);
  const winner = connections.findIndex((c) => c.finishedAt === finishedAt);
  const segments = Math.ceil(s.objectBytes / MSS);
  return {
    scenario: s,
    status: complete ? 'complete' : 'failed',
    error: complete ? undefined : 'no connection finished in time',
    downloadMs: end,
    goodputBps: complete ? (s.objectBytes * 1000) / finishedAt : 0,
    efficiency: complete ? idealMs(s) / finishedAt : 0,
    // Useful: the one response the client keeps; received: everything all connections delivered.
    normalizedGoodput: totalReceived > 0 ? (complete ? s.objectBytes : 0) / totalReceived : 0,
    sentPerUseful: connections.reduce((a, c) => a + c.segmentsSent, 0) / segments,
    wastedAfterCompletion: 0,
    byteExact: complete,
    sources: connections.map((c, i) => ({
      capKBps: s.capsKBps[i],
      sent: c.segmentsSent,
      received: Math.ceil(receivedBytes[i] / MSS),
      useful: i === winner ? segments : 0,
      share: i === winner ? 1 : 0,
    })),
  };
}
