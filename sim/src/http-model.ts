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
 *
 * With `Scenario.paths` (and `.access`), an approximation: TCP is not run per packet through the
 * links; each connection gets fixed parameters from its links' long-run means (time-weighted over
 * the connected segments of a schedule, which for a link without schedule are its base values):
 * - RTT = both directions' delay + mean jitter, path plus access (queueing delay is ignored);
 * - rate = min(cap, path down rate, access down rate / N): N connections share the access link;
 * - loss per segment = 1 - (1 - path down loss)(1 - access down loss), each its stationary loss
 *   (Gilbert-Elliott: pGB / (pGB + pBG) * lossBad + pBG / (pGB + pBG) * lossGood), so i.i.d.;
 *   ACK loss and drop-tail queue overflow are not modelled;
 * - a schedule: no progress while any of the connection's link directions is disconnected; a round
 *   that starts in an off period waits for the next on period, a round overlapping an off period
 *   loses all its segments and takes a retransmission timeout (no exponential backoff).
 */
import { Random, seededRandom } from '@mutp/shared';
import { DirectionSpec, LinkSpec, ScheduleSegment } from './link-spec';
import { meanJitter, meanRate, ScheduleClock, stationaryLoss } from './link';
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

/** What one connection's round model needs from the network between client and source. */
interface ConnectionPath {
  rttMs: number;
  bytesPerMs: number;
  /** Loss probability per segment. */
  loss: number;
  /** First time at or after `t` when the path is connected. */
  nextOn(t: number): number;
  /** When the path next goes down after `t` (`t` itself if it is down now). */
  nextOff(t: number): number;
}

/** The original model: the scenario's RTT and loss, the source's cap, always connected. */
function abstractPath(s: Scenario, capKBps: number): ConnectionPath {
  return {
    rttMs: s.rttMs,
    bytesPerMs: (capKBps * KB) / 1000,
    loss: s.loss,
    nextOn: (t) => t,
    nextOff: () => Infinity,
  };
}

type Parameters = Pick<DirectionSpec, 'rate' | 'delayMs' | 'jitter' | 'loss'>;

/** Long-run mean of a parameter, weighted by the connected segments' durations. */
function segmentMean(d: DirectionSpec, value: (p: Parameters) => number): number {
  const connected = new ScheduleClock(d.schedule).pass().filter((seg) => seg.connected);
  if (connected.length === 0) return value(d);
  const total = connected.reduce((sum, seg) => sum + seg.durationMs, 0);
  // A segment's override replaces the base value; what it leaves out keeps the base.
  const effective = (seg: ScheduleSegment): Parameters => ({
    rate: seg.rate ?? d.rate,
    delayMs: seg.delayMs ?? d.delayMs,
    jitter: seg.jitter ?? d.jitter,
    loss: seg.loss ?? d.loss,
  });
  return connected.reduce((sum, seg) => sum + (seg.durationMs / total) * value(effective(seg)), 0);
}

function meanDelayMs(d: DirectionSpec): number {
  return segmentMean(d, (p) => p.delayMs + meanJitter(p.jitter));
}

function meanBytesPerMs(d: DirectionSpec): number {
  return segmentMean(d, (p) => meanRate(p.rate) / 1000);
}

function meanLoss(d: DirectionSpec): number {
  return segmentMean(d, (p) => stationaryLoss(p.loss));
}

/** Source `index`'s connection over its path and the shared access link. */
function linkPath(s: Scenario, index: number, path: LinkSpec, access: LinkSpec | undefined): ConnectionPath {
  const directions = access ? [path.down, path.up, access.down, access.up] : [path.down, path.up];
  const clocks = directions.map((d) => new ScheduleClock(d.schedule));
  const n = s.capsKBps.length;
  const accessBytesPerMs = access ? meanBytesPerMs(access.down) / n : Infinity;
  const deliveredShare = (access ? [path.down, access.down] : [path.down]).reduce((p, d) => p * (1 - meanLoss(d)), 1);
  return {
    rttMs: directions.reduce((sum, d) => sum + meanDelayMs(d), 0),
    bytesPerMs: Math.min((s.capsKBps[index] * KB) / 1000, meanBytesPerMs(path.down), accessBytesPerMs),
    loss: 1 - deliveredShare,
    nextOn: (t) => nextAllConnected(clocks, t),
    nextOff: (t) => Math.min(...clocks.map((c) => (c.isConnected(t) ? c.nextOffAfter(t) : t))),
  };
}

/** First time at or after `t` when every clock is connected (Infinity if that never happens). */
function nextAllConnected(clocks: ScheduleClock[], t: number): number {
  // Each step moves to some clock's next on time; bounded so disjoint loops cannot spin forever.
  for (let step = 0; step < 10_000 && Number.isFinite(t); step++) {
    const later = Math.max(...clocks.map((c) => c.nextOnAtOrAfter(t)));
    if (later === t) return t;
    t = later;
  }
  return Number.isFinite(t) ? t : Infinity;
}

function simulateConnection(s: Scenario, path: ConnectionPath, random: Random): Connection {
  const { bytesPerMs, rttMs } = path;
  let now = path.nextOn(0) + 1.5 * rttMs; // SYN/SYN-ACK, then the request reaches the source
  let cwnd = INITIAL_WINDOW;
  let ssthresh = Infinity;
  let remaining = Math.ceil(s.objectBytes / MSS);
  let delivered = 0;
  let segmentsSent = 0;
  const deliveries: { at: number; bytes: number }[] = [];
  const maxMs = s.maxSimMs ?? 120_000;
  while (remaining > 0 && now < maxMs) {
    now = path.nextOn(now);
    if (now >= maxMs) break;
    const n = Math.min(Math.floor(cwnd), remaining);
    const serialisation = (n * MSS) / bytesPerMs;
    segmentsSent += n;
    if (path.nextOff(now) < now + Math.max(rttMs, serialisation)) {
      // An outage inside the round: every segment of it is lost, the sender times out.
      ssthresh = Math.max(2, cwnd / 2);
      cwnd = 1;
      now += Math.max(MIN_RTO_MS, 2 * rttMs, serialisation);
      continue;
    }
    let lost = 0;
    for (let i = 0; i < n; i++) if (random() / 0x100000000 < path.loss) lost++;
    remaining -= n - lost;
    delivered += n - lost;
    deliveries.push({ at: now + serialisation + rttMs / 2, bytes: Math.min(delivered * MSS, s.objectBytes) });
    if (lost === 0) {
      now += Math.max(rttMs, serialisation);
      cwnd = cwnd < ssthresh ? cwnd * 2 : cwnd + 1;
    } else if (n - lost >= 3) {
      ssthresh = Math.max(2, cwnd / 2);
      cwnd = ssthresh;
      now += Math.max(rttMs, serialisation);
    } else {
      ssthresh = Math.max(2, cwnd / 2);
      cwnd = 1;
      now += Math.max(MIN_RTO_MS, 2 * rttMs, serialisation);
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
  const paths = s.capsKBps.map((cap, i) => {
    const link = s.paths?.[i];
    return link ? linkPath(s, i, link, s.access) : abstractPath(s, cap);
  });
  const connections = paths.map((path) => simulateConnection(s, path, random));
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
