/**
 * Network profiles: one name means the same network in the simulator and in the testbed.
 *
 * A profile says what each emulated link does; the testbed (testbed/) turns it into linkem
 * configurations between network namespaces, the simulator (Scenario.paths / .access) runs the
 * same LinkSpecs per packet. Where the links sit:
 *
 *   client --access--+--path 0--> proxy 0 --+
 *                    +--path 1--> proxy 1 --+--origin link--> origin
 *                    +-- ...                |
 *   client ------------------ origo --------+      (origo: no emulated link)
 *
 * Caps: a proxy's upload cap is its own token bucket (`--upload-limit`, in MUTP or HTTP payload
 * bytes, as on loopback); the path under it runs at the cap times PATH_HEADROOM, in IP bytes, so that
 * the link adds delay and loss but the proxy, not header overhead, sets the rate. Access links
 * (LTE, vehicular, traces) are real bottlenecks shared by every path.
 *
 * Sources: `paper` is the MUTP paper's set-up (seed 004); `lte-dublin` the LTE model of seed 001
 * ch. 9 (digest in ../shared/notes/thesis-digest.md); `vehicular*` SoftStage Table III (seed 000).
 * docs/testbed.md documents each profile with its numbers.
 */
import { seededRandom } from '@mutp/shared';
import { DirectionSpec, JitterSpec, LinkSpec, ScheduleSegment } from './link-spec';

export interface ProfileLinks {
  /** One per proxy, in fleet order. */
  paths: LinkSpec[];
  /** The client's access link, shared by every path. */
  access?: LinkSpec;
  /** Between the proxies and the origin (cold fetches). */
  origin?: LinkSpec;
}

export interface NetworkProfile {
  name: string;
  description: string;
  /** The default fleet's caps (KB/s, 1 KB = 1024 B). */
  defaultCapsKBps: number[];
  /** Round-trip propagation on a client-proxy path without queueing, for the ideal download time. */
  rttMs: number;
  /** Expands to links; deterministic for (caps, seed). */
  links(capsKBps: number[], seed: number): ProfileLinks;
}

/** A path's rate over its proxy's cap: room for IP/UDP/DTLS/SCTP (or TCP) headers. */
export const PATH_HEADROOM = 1.1;
const KB = 1024;
const MBIT = 125_000;
/** Drop-tail queue per path: 100 ms at 1792 KB/s, as a provider's shaper would hold. */
const PATH_QUEUE_BYTES = 192 * KB;

const unlimited = (delayMs: number, extra: Partial<DirectionSpec> = {}): DirectionSpec => ({
  rate: { kind: 'unlimited' },
  delayMs,
  ...extra,
});

/** A proxy's path: the cap (plus headroom) towards the client, no limit back, `oneWayMs` each way. */
function cappedPath(capKBps: number, oneWayMs: number, loss = 0): LinkSpec {
  const lossSpec = loss > 0 ? ({ kind: 'iid', p: loss } as const) : undefined;
  return {
    down: {
      rate: { kind: 'constant', bytesPerSecond: Math.round(capKBps * KB * PATH_HEADROOM) },
      delayMs: oneWayMs,
      loss: lossSpec,
      queueBytes: PATH_QUEUE_BYTES,
    },
    up: unlimited(oneWayMs, { loss: lossSpec }),
  };
}

const PAPER_CAPS = [896, 896, 896, 896, 1792, 1792];

/** `rttMs` other than the paper's 40 separates the path's delay from the testbed's own cost. */
function paper(name: string, loss: number, rttMs = 40): NetworkProfile {
  return {
    name,
    description:
      `MUTP paper set-up: proxies capped at 896 / 1792 KB/s, RTT ${rttMs} ms on every client-proxy path` +
      (loss > 0 ? `, ${loss * 100} % i.i.d. loss each way` : ', no loss'),
    defaultCapsKBps: PAPER_CAPS,
    rttMs,
    links: (caps) => ({ paths: caps.map((cap) => cappedPath(cap, rttMs / 2, loss)) }),
  };
}

// ---- bottleneck: one path shared by MUTP and a TCP flow (fairness; bench:fairness)

/** The shared bottleneck's rate: 20 Mbit/s in IP bytes. */
export const BOTTLENECK_BYTES_PER_S = 20 * MBIT;

/**
 * One 20 Mbit/s, 40 ms path per proxy, drop-tail queue of PATH_QUEUE_BYTES (about 2 BDP), no
 * proxy cap under it: the link, not a token bucket, is the bottleneck, so whatever else crosses
 * it (bench:fairness runs one TCP flow beside MUTP) competes for the same queue.
 */
function bottleneck(name: string, loss: number): NetworkProfile {
  const lossSpec = loss > 0 ? ({ kind: 'iid', p: loss } as const) : undefined;
  const path: LinkSpec = {
    down: {
      rate: { kind: 'constant', bytesPerSecond: BOTTLENECK_BYTES_PER_S },
      delayMs: 20,
      loss: lossSpec,
      queueBytes: PATH_QUEUE_BYTES,
    },
    up: unlimited(20, { loss: lossSpec }),
  };
  return {
    name,
    description:
      'one shared bottleneck per proxy: 20 Mbit/s, RTT 40 ms, 192 KB drop-tail queue, proxies uncapped' +
      (loss > 0 ? `, ${loss * 100} % i.i.d. loss each way` : ', no loss'),
    defaultCapsKBps: [Math.round(BOTTLENECK_BYTES_PER_S / KB)],
    rttMs: 40,
    links: (caps) => ({ paths: caps.map(() => path) }),
  };
}

// ---- lte-dublin: seed 001 ch. 9

/** CSQ (signal quality, 10..31 in the data) moves by at most one step per second. */
const LTE_SEGMENT_MS = 1000;
const LTE_SEGMENTS = 600;
const LTE_HANDOVER_PER_SEGMENT = 1 / 60;
const LTE_HANDOVER_ONE_WAY_MS = 90;
const LTE_RTT_SD_MS = 1.5;
/** "RTT samples correlated over ~10 samples". */
const LTE_JITTER_CORRELATION = 0.9;
const LTE_UPLINK_BYTES_PER_S = 5 * MBIT;

/** The RTT mixture's weights at a CSQ (thesis fit; clipped at 0 and renormalised). */
export function lteRttWeights(csq: number): number[] {
  const raw = [0.0079 * csq - 0.1285, 0.043 * csq - 0.3834, -0.0059 * csq + 0.3244, -0.0096 * csq + 0.2937].map((w) =>
    Math.max(0, w),
  );
  const sum = raw.reduce((a, b) => a + b, 0);
  return sum > 0 ? raw.map((w) => w / sum) : [1, 0, 0, 0];
}

/** Downlink Mbit/s ~ N(0.55 CSQ + 0.13, 0.31 CSQ - 1.17), truncated. */
export function lteDownlinkMbit(csq: number, gaussian: number): number {
  const mean = 0.55 * csq + 0.13;
  const sd = Math.max(0.1, 0.31 * csq - 1.17);
  return Math.max(0.5, mean + sd * gaussian);
}

function lteAccess(seed: number): LinkSpec {
  const random = seededRandom(seed * 48271 + 11);
  const uniform = () => random() / 0x100000000;
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  // mu1 in 32.5..37.5 ms per run; the other peaks are HARQ retries at fixed offsets.
  const mu1 = 32.5 + 5 * uniform();
  const offsets = [0, 9.6, 19.4, 28.5];
  let csq = 12 + Math.floor(uniform() * 17);
  let rateNoise = gaussian();
  const down: ScheduleSegment[] = [];
  const up: ScheduleSegment[] = [];
  for (let i = 0; i < LTE_SEGMENTS; i++) {
    csq = Math.min(31, Math.max(10, csq + Math.round(gaussian() * 0.7)));
    // Rate samples correlated from second to second (AR(1), rho 0.8).
    rateNoise = 0.8 * rateNoise + 0.6 * gaussian();
    const handover = uniform() < LTE_HANDOVER_PER_SEGMENT;
    const weights = lteRttWeights(csq);
    // One-way: half the RTT mixture each way, the base (mu1 / 2) in delayMs.
    const jitter: JitterSpec = {
      kind: 'mixture',
      components: offsets.map((o, k) => ({ weight: weights[k], meanMs: o / 2, sdMs: LTE_RTT_SD_MS / Math.SQRT2 })),
    };
    const delayMs = handover ? LTE_HANDOVER_ONE_WAY_MS : mu1 / 2;
    down.push({
      durationMs: LTE_SEGMENT_MS,
      connected: true,
      rate: { kind: 'constant', bytesPerSecond: Math.round(lteDownlinkMbit(csq, rateNoise) * MBIT) },
      delayMs,
      jitter,
    });
    up.push({ durationMs: LTE_SEGMENT_MS, connected: true, delayMs, jitter });
  }
  const base = { jitterCorrelation: LTE_JITTER_CORRELATION, queueBytes: 256 * KB };
  return {
    down: {
      rate: { kind: 'constant', bytesPerSecond: 10 * MBIT },
      delayMs: mu1 / 2,
      ...base,
      schedule: { loop: true, segments: down },
    },
    up: {
      rate: { kind: 'constant', bytesPerSecond: LTE_UPLINK_BYTES_PER_S },
      delayMs: mu1 / 2,
      ...base,
      schedule: { loop: true, segments: up },
    },
  };
}

const lteDublin: NetworkProfile = {
  name: 'lte-dublin',
  description:
    'Client on LTE (seed 001 ch. 9): downlink Gaussian by signal quality (CSQ 10..31, ~10-20 Mbit/s), ' +
    'RTT a mixture of four Gaussians (HARQ retries) correlated over ~10 samples, handovers to 180 ms; ' +
    'proxies at the edge (2 ms beyond the access link), capped as in the paper',
  defaultCapsKBps: PAPER_CAPS,
  rttMs: 40,
  links: (caps, seed) => ({ paths: caps.map((cap) => cappedPath(cap, 1)), access: lteAccess(seed) }),
};

// ---- vehicular: SoftStage Table III

interface VehicularParams {
  encounterMs: [number, number];
  disconnectionMs: [number, number];
  loss: [number, number];
}

const VEHICULAR_CYCLES = 60;
const INTERNET: LinkSpec = {
  down: { rate: { kind: 'constant', bytesPerSecond: 60 * MBIT }, delayMs: 10 },
  up: { rate: { kind: 'constant', bytesPerSecond: 60 * MBIT }, delayMs: 10 },
};

/** Encounters with the roadside network and the gaps between them; loss drawn per encounter. */
function vehicularAccess(p: VehicularParams, seed: number): LinkSpec {
  const random = seededRandom(seed * 69621 + 5);
  const between = ([lo, hi]: [number, number]) => lo + (hi - lo) * (random() / 0x100000000);
  const segments: ScheduleSegment[] = [];
  for (let i = 0; i < VEHICULAR_CYCLES; i++) {
    const loss = between(p.loss);
    segments.push({ durationMs: Math.round(between(p.encounterMs)), connected: true, loss: { kind: 'iid', p: loss } });
    segments.push({ durationMs: Math.round(between(p.disconnectionMs)), connected: false });
  }
  const direction = (): DirectionSpec => ({
    rate: { kind: 'unlimited' },
    delayMs: 1,
    queueBytes: 256 * KB,
    schedule: { loop: true, segments },
  });
  return { down: direction(), up: direction() };
}

function vehicular(name: string, detail: string, p: VehicularParams): NetworkProfile {
  return {
    name,
    description:
      `Vehicular (SoftStage Table III${detail}): encounters ${p.encounterMs.join('-')} ms, disconnections ` +
      `${p.disconnectionMs.join('-')} ms, loss ${p.loss.map((x) => Math.round(x * 100)).join('-')} % in an encounter; ` +
      'proxies at the roadside edge (capped as in the paper), origin 60 Mbit/s at 20 ms RTT beyond them',
    defaultCapsKBps: PAPER_CAPS,
    rttMs: 4,
    links: (caps, seed) => ({
      paths: caps.map((cap) => cappedPath(cap, 1)),
      access: vehicularAccess(p, seed),
      origin: INTERNET,
    }),
  };
}

// ---- trace:<file>

/** A mahimahi trace on the client's access downlink, 20 ms each way, proxies capped as in the paper. */
export function traceProfile(file: string, opportunitiesMs: number[]): NetworkProfile {
  return {
    name: `trace:${file}`,
    description: `mahimahi trace ${file} on the client's access downlink, 40 ms RTT`,
    defaultCapsKBps: PAPER_CAPS,
    rttMs: 40,
    links: (caps) => ({
      paths: caps.map((cap) => cappedPath(cap, 0)),
      access: {
        down: { rate: { kind: 'trace', file, opportunitiesMs }, delayMs: 20, queueBytes: 256 * KB },
        up: unlimited(20),
      },
    }),
  };
}

/** Parses a mahimahi packet-delivery trace: one non-negative integer millisecond per line, nondecreasing. */
export function parseMahimahiTrace(text: string, name = 'trace'): number[] {
  const out: number[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '') continue;
    if (!/^\d+$/.test(line)) throw new Error(`${name}:${i + 1}: not a millisecond count: ${JSON.stringify(line)}`);
    const ms = Number(line);
    if (out.length > 0 && ms < out[out.length - 1]) throw new Error(`${name}:${i + 1}: times go backwards`);
    out.push(ms);
  }
  if (out.length === 0 || out[out.length - 1] === 0) throw new Error(`${name}: empty trace or zero period`);
  return out;
}

export const PROFILES: Record<string, NetworkProfile> = Object.fromEntries(
  [
    paper('paper', 0),
    paper('paper-loss2', 0.02),
    paper('paper-rtt2', 0, 2),
    bottleneck('bottleneck', 0),
    bottleneck('bottleneck-loss2', 0.02),
    lteDublin,
    vehicular('vehicular', '', { encounterMs: [12_000, 12_000], disconnectionMs: [8_000, 8_000], loss: [0.27, 0.27] }),
    vehicular('vehicular-short', ', short encounters', {
      encounterMs: [3_000, 4_000],
      disconnectionMs: [8_000, 8_000],
      loss: [0.27, 0.27],
    }),
    vehicular('vehicular-sparse', ', long disconnections', {
      encounterMs: [12_000, 12_000],
      disconnectionMs: [32_000, 100_000],
      loss: [0.27, 0.27],
    }),
    // The disconnections alone: what staging, handoff and resume address, apart from the data
    // channel's reaction to 27 % random loss (SCTP's congestion control; docs/testbed.md).
    vehicular('vehicular-lossless', ', no loss in an encounter', {
      encounterMs: [12_000, 12_000],
      disconnectionMs: [8_000, 8_000],
      loss: [0, 0],
    }),
    vehicular('vehicular-lossy', ', loss range', {
      encounterMs: [12_000, 12_000],
      disconnectionMs: [8_000, 8_000],
      loss: [0.22, 0.37],
    }),
  ].map((p) => [p.name, p]),
);

/** `loopback` (no emulation), a profile name, or `trace:<file>` (the caller reads the file). */
export function profileByName(name: string, readFile?: (path: string) => string): NetworkProfile {
  if (name.startsWith('trace:')) {
    const file = name.slice('trace:'.length);
    if (!readFile) throw new Error('trace profiles need a file reader');
    return traceProfile(file, parseMahimahiTrace(readFile(file), file));
  }
  const p = PROFILES[name];
  if (!p)
    throw new Error(
      `unknown profile ${JSON.stringify(name)}; known: ${Object.keys(PROFILES).join(', ')}, trace:<file>`,
    );
  return p;
}
