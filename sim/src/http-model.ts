/**
 * Parallel HTTP baseline: the same GET to every source over its own TCP connection; the client
 * keeps the first complete response. Each connection is a seeded round-based TCP model:
 * - connection set-up 1 RTT, request 1/2 RTT, so the first byte leaves the source at 1.5 RTT;
 * - per round the source sends n segments (MSS 1448); a round lasts max(RTT, n * MSS / rate): once
 *   the window exceeds the path's BDP the source's cap, not the RTT, paces it. Each segment is lost
 *   with probability `loss`; lost segments are sent again in a later round.
 *
 * The congestion control is the sender's kernel's (`HttpModelOptions.congestionControl`):
 *
 * - `bbr` (the default): what the testbed runs. The testbed's namespaces inherit this kernel's
 *   default, `net.ipv4.tcp_congestion_control = bbr` (CONFIG_DEFAULT_TCP_CONG; available: reno bbr
 *   cubic), and the proxies do not choose another. BBR v1 (Linux) sets its window from measured
 *   delivery rate and minimum RTT, not from loss: random loss costs only the retransmissions. A
 *   proxy's HTTP answer is app-limited by its token bucket (proxy/src/http-baseline.ts writes at
 *   the cap), so BBR never sees a bandwidth plateau in non-app-limited samples and stays in
 *   STARTUP (`ss -ti` during a transfer: pacing_gain 2.89, cwnd 82-180 against a BDP of 51
 *   segments). Model: slow start from 10 segments (cwnd += delivered per round) up to 2.89 BDP;
 *   no reduction on loss; each round sends at most what the source's cap supplies in one RTT
 *   (ceil(BDP) segments), the rest of the window being unused; segments a round lost are
 *   retransmitted in the next (SACK + RACK: found lost within about one RTT); a round that
 *   delivers nothing waits for a tail loss probe (2 RTT), a second one in a row for a
 *   retransmission timeout (200 ms min), after which the window is restored (BBR keeps its model).
 *   Retransmissions share the cap with new data (the kernel's go outside the proxy's token bucket,
 *   up to the path's 1.1 x cap headroom: the model is ~p slower than that).
 * - `cubic`: Linux's usual default (RFC 9438): multiplicative decrease beta = 0.7 once per round with
 *   losses (SACK/RACK: recovery within the round, PRR), W(t) = C (t - K)^3 + Wmax with C = 0.4 and
 *   K = cbrt(Wmax (1 - beta) / C), t in seconds since the decrease (independent of the RTT), and
 *   the Reno-friendly estimate Wmax beta + 3 (1 - beta) / (1 + beta) t / RTT; cwnd is the larger,
 *   growing at most 1.5x per round (Linux: cnt >= 2), and only while cwnd-limited (at most 2 x
 *   the segments a round sends, tcp_is_cwnd_limited). Fast convergence: a decrease below the
 *   previous Wmax sets Wmax = cwnd (1 + beta) / 2. Slow start from 10 doubles per round until the
 *   first loss (HyStart's delay signal only ends it earlier, which an app-limited flow does not
 *   notice). Tail losses and timeouts as for BBR, but a timeout sets cwnd to 1 (slow start up to
 *   beta cwnd). At 2 % loss and 40 ms cubic stays in its Reno-friendly region, so its throughput
 *   is Mathis-like with beta 0.7: MSS / RTT * sqrt((3 (1 - beta) / (1 + beta)) (1 + beta) /
 *   (2 (1 - beta) p)) = MSS / RTT * sqrt(3 / (2p)), the same as Reno's (by design of that region).
 * - `reno`: the model this file had before (kept for comparison, results unchanged): slow start
 *   doubling per round, +1 per round after, cwnd halved on a round with losses, a retransmission
 *   timeout (200 ms min) when a round with losses delivers fewer than 3 segments (no SACK);
 *   Mathis-like, MSS / RTT * sqrt(3 / (2p)).
 *
 * Measured on the testbed (`paper-loss2`: 40 ms, 2 % i.i.d. loss each way per 1500-byte packet,
 * linkem over TUN, no GSO through it: `ss` shows mss 1448), one connection to the 1792 KB/s host,
 * 2 MiB written through a token bucket like the proxy's, a new connection per transfer, 12 each
 * (docs/testbed.md, "Parallel HTTP under loss"): bbr 1.26-1.43 s (median 1.33), cubic 3.6-9.6 s
 * (bimodal, median 6.0), reno 6.2-8.2 s (median 7.3). This model, 5 seeds: bbr 1.31-1.33 s, cubic
 * 6.6-8.1 s (median 7.9: the fast mode of the real one is not reproduced), reno 6.4-7.4 s (7.3).
 * No constant here is fitted to those figures; they come from the published algorithms.
 *
 * With `Scenario.paths` (and `.access`), an approximation: TCP is not run per packet through the
 * links; each connection gets fixed parameters from its links' long-run means (time-weighted over
 * the connected segments of a schedule, which for a link without schedule are its base values):
 * - RTT = both directions' delay + mean jitter, path plus access (queueing delay is ignored);
 * - rate = min(cap, path down rate, access down rate / N): N connections share the access link;
 * - loss per segment = 1 - (1 - path down loss)(1 - access down loss), each its stationary loss
 *   (Gilbert-Elliott: pGB / (pGB + pBG) * lossBad + pBG / (pGB + pBG) * lossGood), so i.i.d.;
 *   ACK loss and drop-tail queue overflow are not modelled (cumulative ACKs and SACK make the
 *   testbed's 2 % ACK loss harmless);
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

/** The sender's congestion control (see the header). */
export type CongestionControl = 'bbr' | 'cubic' | 'reno';

export interface HttpModelOptions {
  /** Default `bbr`: the testbed's, this machine's Linux default. */
  congestionControl?: CongestionControl;
}

export const DEFAULT_CONGESTION_CONTROL: CongestionControl = 'bbr';

/** BBR's STARTUP gain (2 / ln 2), its cwnd gain while it has not seen the bandwidth plateau. */
const BBR_STARTUP_GAIN = 2.885;
const CUBIC_BETA = 0.7;
const CUBIC_C = 0.4;
/** Round-trips a tail loss probe waits (Linux: 2 SRTT) before resending when nothing came back. */
const TLP_RTTS = 2;

/**
 * One connection's window. `afterRound` returns how long the round's losses cost beyond the
 * round itself (0, or a probe / timeout wait).
 */
interface WindowModel {
  /** Segments the next round may send. */
  allowance(): number;
  /** Update after a round of `sent` segments of which `lost` were lost; returns the extra wait. */
  afterRound(sent: number, lost: number, now: number, roundMs: number): number;
  /** The round starting at `now` overlapped an outage: everything in flight lost, a timeout. */
  onOutage(now: number): void;
}

function renoWindow(rttMs: number): WindowModel {
  let cwnd = INITIAL_WINDOW;
  let ssthresh = Infinity;
  return {
    allowance: () => Math.floor(cwnd),
    afterRound(sent, lost) {
      if (lost === 0) {
        cwnd = cwnd < ssthresh ? cwnd * 2 : cwnd + 1;
        return 0;
      }
      ssthresh = Math.max(2, cwnd / 2);
      if (sent - lost >= 3) {
        cwnd = ssthresh;
        return 0;
      }
      cwnd = 1;
      return Math.max(MIN_RTO_MS, 2 * rttMs);
    },
    onOutage() {
      ssthresh = Math.max(2, cwnd / 2);
      cwnd = 1;
    },
  };
}

/** Segments the source's cap supplies in one RTT (an app-limited sender sends no more per round). */
function bdpSegments(path: ConnectionPath): number {
  return Math.max(1, Math.ceil((path.bytesPerMs * path.rttMs) / MSS));
}

/**
 * Tail losses with SACK/RACK + TLP: a round that delivered something has its losses found and
 * resent in the next round; one that delivered nothing waits for the probe, and if the probe's
 * round delivers nothing either, for a retransmission timeout.
 */
function tailWait(delivered: number, rttMs: number, state: { silentRounds: number }): number {
  if (delivered > 0) {
    state.silentRounds = 0;
    return 0;
  }
  state.silentRounds++;
  return state.silentRounds === 1 ? TLP_RTTS * rttMs : Math.max(MIN_RTO_MS, 2 * rttMs);
}

function bbrWindow(path: ConnectionPath): WindowModel {
  const bdp = bdpSegments(path);
  const maxCwnd = Math.max(INITIAL_WINDOW, Math.ceil(BBR_STARTUP_GAIN * bdp));
  let cwnd = INITIAL_WINDOW;
  const tail = { silentRounds: 0 };
  return {
    allowance: () => Math.min(Math.floor(cwnd), bdp),
    afterRound(sent, lost) {
      // STARTUP: cwnd grows by what was delivered (acked), up to the gain times the BDP; no decrease on loss.
      cwnd = Math.min(maxCwnd, cwnd + (sent - lost));
      return tailWait(sent - lost, path.rttMs, tail);
    },
    // After a timeout BBR restores its window once the loss is repaired (bbr_set_cwnd_to_recover_or_restore).
    onOutage() {},
  };
}

function cubicWindow(path: ConnectionPath): WindowModel {
  const bdp = bdpSegments(path);
  let cwnd = INITIAL_WINDOW;
  let ssthresh = Infinity;
  let wMax = 0;
  let epochStart = -1;
  let wLastMax = 0;
  const tail = { silentRounds: 0 };
  const decrease = (now: number) => {
    // Fast convergence (RFC 9438 4.7).
    wMax = cwnd < wLastMax ? (cwnd * (1 + CUBIC_BETA)) / 2 : cwnd;
    wLastMax = cwnd;
    ssthresh = Math.max(2, cwnd * CUBIC_BETA);
    epochStart = now;
  };
  return {
    allowance: () => Math.min(Math.floor(cwnd), bdp),
    afterRound(sent, lost, now, roundMs) {
      const delivered = sent - lost;
      const wait = tailWait(delivered, path.rttMs, tail);
      if (wait > 0) {
        // Nothing came back: a probe recovers the tail without a decrease; a timeout resets cwnd.
        if (tail.silentRounds > 1) {
          decrease(now);
          cwnd = 1;
        }
        return wait;
      }
      if (lost > 0) {
        // One decrease per round of losses (SACK/RACK recovery within the round, PRR).
        decrease(now + roundMs);
        cwnd = ssthresh;
        return 0;
      }
      // Grow only while cwnd-limited: at most twice what the round sent (tcp_is_cwnd_limited).
      const limit = Math.max(INITIAL_WINDOW, 2 * sent);
      if (cwnd < ssthresh) {
        cwnd = Math.min(cwnd * 2, Math.max(cwnd, limit));
        return 0;
      }
      const t = (now + roundMs + path.rttMs - epochStart) / 1000;
      const k = Math.cbrt((wMax * (1 - CUBIC_BETA)) / CUBIC_C);
      const wCubic = CUBIC_C * (t - k) ** 3 + wMax;
      const wEst =
        wMax * CUBIC_BETA + ((3 * (1 - CUBIC_BETA)) / (1 + CUBIC_BETA)) * ((now + roundMs - epochStart) / path.rttMs);
      const target = Math.min(Math.max(wCubic, wEst), 1.5 * cwnd);
      cwnd = Math.min(Math.max(cwnd, target), Math.max(cwnd, limit));
      return 0;
    },
    onOutage(now) {
      decrease(now);
      cwnd = 1;
    },
  };
}

function windowModel(cc: CongestionControl, path: ConnectionPath): WindowModel {
  if (cc === 'bbr') return bbrWindow(path);
  if (cc === 'cubic') return cubicWindow(path);
  return renoWindow(path.rttMs);
}

function simulateConnection(s: Scenario, path: ConnectionPath, random: Random, cc: CongestionControl): Connection {
  const { bytesPerMs, rttMs } = path;
  let now = path.nextOn(0) + 1.5 * rttMs; // SYN/SYN-ACK, then the request reaches the source
  const window = windowModel(cc, path);
  let remaining = Math.ceil(s.objectBytes / MSS);
  let delivered = 0;
  let segmentsSent = 0;
  const deliveries: { at: number; bytes: number }[] = [];
  const maxMs = s.maxSimMs ?? 120_000;
  while (remaining > 0 && now < maxMs) {
    now = path.nextOn(now);
    if (now >= maxMs) break;
    const n = Math.min(window.allowance(), remaining);
    const serialisation = (n * MSS) / bytesPerMs;
    const roundMs = Math.max(rttMs, serialisation);
    segmentsSent += n;
    if (path.nextOff(now) < now + roundMs) {
      // An outage inside the round: every segment of it is lost, the sender times out.
      window.onOutage(now);
      now += Math.max(MIN_RTO_MS, 2 * rttMs, serialisation);
      continue;
    }
    let lost = 0;
    for (let i = 0; i < n; i++) if (random() / 0x100000000 < path.loss) lost++;
    remaining -= n - lost;
    delivered += n - lost;
    deliveries.push({ at: now + serialisation + rttMs / 2, bytes: Math.min(delivered * MSS, s.objectBytes) });
    const wait = window.afterRound(n, lost, now, roundMs);
    now += wait > 0 ? Math.max(wait, serialisation) : roundMs;
  }
  const last = deliveries[deliveries.length - 1];
  return { deliveries, finishedAt: remaining === 0 && last ? last.at : Infinity, segmentsSent };
}

function bytesBy(c: Connection, t: number): number {
  let bytes = 0;
  for (const d of c.deliveries) if (d.at <= t) bytes = d.bytes;
  return bytes;
}

export function simulateHttp(s: Scenario, options: HttpModelOptions = {}): SimResult {
  const cc = options.congestionControl ?? DEFAULT_CONGESTION_CONTROL;
  const random = seededRandom(s.seed * 104729 + 3);
  const paths = s.capsKBps.map((cap, i) => {
    const link = s.paths?.[i];
    return link ? linkPath(s, i, link, s.access) : abstractPath(s, cap);
  });
  const connections = paths.map((path) => simulateConnection(s, path, random, cc));
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
