/** A row of the load test's report: its fields, and how the counts and samples become them. */
import { LoadSettings } from './settings';
import { RunBook } from './peers';
import { Summary } from './stats';

export interface Row {
  instances: number;
  clientSessions: number;
  proxies: number;
  clientsTarget: number;
  proxiesTarget: number;
  targetsReached: boolean;
  /** Why the targets were not reached (empty when they were). */
  problems: string[];
  /**
   * Issue 34's scale targets this row missed (SCALE_TARGETS; empty: all met). Reported apart from
   * `problems`: they are latency and resource figures, which a loaded machine alone can miss, so
   * they do not fail a run (the smoke test's) by themselves.
   */
  scaleTargetsMissed: string[];
  offers: number;
  offersPerSecond: number;
  /** Offers due while every active client was busy (the rate could not be held): not started. */
  offersSkipped: number;
  crossInstanceOffers: number;
  /** Client → proxy one way through origo, same instance (the only kind with one instance). */
  relayP50Ms: number | null;
  relayP99Ms: number | null;
  /** Client → proxy one way when the client and the proxy are on different instances. */
  relayCrossP50Ms: number | null;
  relayCrossP99Ms: number | null;
  /** Offer sent → answer received by the client, same instance. */
  roundTripP50Ms: number | null;
  roundTripP99Ms: number | null;
  roundTripCrossP50Ms: number | null;
  roundTripCrossP99Ms: number | null;
  requestProxiesP50Ms: number | null;
  requestProxiesP99Ms: number | null;
  heartbeatsPerSecond: number;
  /** Percent of one core over the steady window, per instance. */
  cpuPercentPerInstance: number[];
  /** CPU seconds per wall second over the steady window, per instance (the "CPU < 1 core"). */
  cpuCores: number[];
  /** Resident memory at the end of the steady window, per instance. */
  rssBytesPerInstance: number[];
  rssPeakBytesPerInstance: number[];
  /** Resident memory the client sessions added (all instances), per 1000 sessions. */
  rssBytesPer1000Clients: number | null;
  /** All generator processes together (the parent and its workers), percent of one core. */
  generatorCpuPercent: number;
  generatorRssBytes: number;
  generatorProcesses: number;
  redisCpuPercent: number | null;
  steadyWindowMs: number;
  rampMs: { proxies: number; clients: number };
  latencySamples: Record<string, Summary>;
  failures: Failures;
  /** What origo itself counted (drops, refusals, heartbeat timeouts, invalid frames), all instances. */
  origoCounters: Record<string, number>;
  /** Warnings origo logged, by message, all instances. */
  origoWarnings: Record<string, number>;
}

export interface Failures {
  total: number;
  proxyHandshakes: Record<string, number>;
  clientHandshakes: Record<string, number>;
  errors: Record<string, number>;
  unexpectedCloses: Record<string, number>;
  missingAnswers: number;
  lateAnswers: number;
  missingProxyLists: number;
  lateProxyLists: number;
  emptyProxyLists: number;
  offersToUnknownProxies: number;
  unexpectedMessages: number;
}

export const round1 = (x: number) => Math.round(x * 10) / 10;

/**
 * What issue 34 asks of origo at any size: relay p99 under 50 ms on one instance (80 ms across
 * instances), under one core and 2 GiB per instance. Checked in every row.
 */
export const SCALE_TARGETS = { relayP99Ms: 50, relayCrossP99Ms: 80, cpuCores: 1, rssBytes: 2 * 2 ** 30 } as const;

/** The scale targets a row misses, in words. */
export function scaleProblems(r: Pick<Row, 'relayP99Ms' | 'relayCrossP99Ms' | 'cpuCores' | 'rssBytesPerInstance'>) {
  const t = SCALE_TARGETS;
  const problems: string[] = [];
  if (r.relayP99Ms !== null && r.relayP99Ms >= t.relayP99Ms) {
    problems.push(`relay p99 ${r.relayP99Ms} ms >= ${t.relayP99Ms} ms`);
  }
  if (r.relayCrossP99Ms !== null && r.relayCrossP99Ms >= t.relayCrossP99Ms) {
    problems.push(`cross-instance relay p99 ${r.relayCrossP99Ms} ms >= ${t.relayCrossP99Ms} ms`);
  }
  r.cpuCores.forEach((c, i) => c >= t.cpuCores && problems.push(`origo #${i} used ${c} cores`));
  r.rssBytesPerInstance.forEach(
    (b, i) => b >= t.rssBytes && problems.push(`origo #${i} RSS ${(b / 2 ** 30).toFixed(2)} GiB >= 2 GiB`),
  );
  return problems;
}

/** What the run measured besides the book's counts and samples. */
export interface Measured {
  registryProblem: string;
  clientSessions: number;
  proxies: number;
  offersPerSecond: number;
  steadyWindowMs: number;
  cpuPercentPerInstance: number[];
  steadyMemory: { rssBytes: number; peakRssBytes: number }[];
  /** RSS per instance once the proxies registered, before any client: what sessions add is above it. */
  baseline: number[];
  generatorCpuPercent: number;
  generatorRssBytes: number;
  generatorProcesses: number;
  redisCpuPercent: number | null;
  rampMs: { proxies: number; clients: number };
  origoCounters: Record<string, number>;
  origoWarnings: Record<string, number>;
}

/** The row: percentiles of the samples, failures counted and totalled, targets checked. */
export function summarise(s: LoadSettings, instances: number, book: RunBook, m: Measured): Row {
  const oneWay = book.oneWay.same.summary();
  const oneWayCross = book.oneWay.cross.summary();
  const roundTrip = book.roundTrip.same.summary();
  const roundTripCross = book.roundTrip.cross.summary();
  const requests = book.requestProxies.summary();
  const f = book.failures;
  const failures: Failures = {
    total: 0,
    proxyHandshakes: f.proxyHandshake.toJSON(),
    clientHandshakes: f.clientHandshake.toJSON(),
    errors: f.errors.toJSON(),
    unexpectedCloses: f.unexpectedCloses.toJSON(),
    missingAnswers: f.missingAnswers,
    lateAnswers: f.lateAnswers,
    missingProxyLists: f.missingProxyLists,
    lateProxyLists: f.lateProxyLists,
    emptyProxyLists: f.emptyProxyLists,
    offersToUnknownProxies: f.offersToUnknownProxies,
    unexpectedMessages: f.unexpectedMessages,
  };
  // A late answer or proxy list was already counted as missing.
  failures.total =
    f.proxyHandshake.total +
    f.clientHandshake.total +
    f.errors.total +
    f.unexpectedCloses.total +
    f.missingAnswers +
    f.missingProxyLists +
    f.emptyProxyLists +
    f.offersToUnknownProxies +
    f.unexpectedMessages;

  const problems: string[] = m.registryProblem ? [m.registryProblem] : [];
  if (m.clientSessions < s.clients) problems.push(`${m.clientSessions}/${s.clients} client sessions`);
  if (m.proxies < s.proxies) problems.push(`${m.proxies}/${s.proxies} proxies`);
  if (m.offersPerSecond < 0.9 * s.offerRate) {
    problems.push(
      `${m.offersPerSecond.toFixed(1)} offers/s of ${s.offerRate} asked (${book.offers.skipped} skipped: every active client busy)`,
    );
  }
  if (instances > 1 && book.offers.measured > 0 && book.offers.cross === 0) {
    problems.push('no offer crossed instances (is the proxy registry shared?)');
  }
  const rssTotal = m.steadyMemory.reduce((sum, x) => sum + x.rssBytes, 0);
  const rssBaseline = m.baseline.reduce((sum, x) => sum + x, 0);
  const cpuCores = m.cpuPercentPerInstance.map((p) => Math.round(p * 10) / 1000);
  const scaleTargetsMissed = scaleProblems({
    relayP99Ms: oneWay.p99Ms,
    relayCrossP99Ms: oneWayCross.p99Ms,
    cpuCores,
    rssBytesPerInstance: m.steadyMemory.map((x) => x.rssBytes),
  });
  return {
    instances,
    clientSessions: m.clientSessions,
    proxies: m.proxies,
    clientsTarget: s.clients,
    proxiesTarget: s.proxies,
    targetsReached: problems.length === 0,
    problems,
    scaleTargetsMissed,
    offers: book.offers.measured,
    offersPerSecond: round1(m.offersPerSecond),
    offersSkipped: book.offers.skipped,
    crossInstanceOffers: book.offers.cross,
    relayP50Ms: oneWay.p50Ms,
    relayP99Ms: oneWay.p99Ms,
    relayCrossP50Ms: oneWayCross.p50Ms,
    relayCrossP99Ms: oneWayCross.p99Ms,
    roundTripP50Ms: roundTrip.p50Ms,
    roundTripP99Ms: roundTrip.p99Ms,
    roundTripCrossP50Ms: roundTripCross.p50Ms,
    roundTripCrossP99Ms: roundTripCross.p99Ms,
    requestProxiesP50Ms: requests.p50Ms,
    requestProxiesP99Ms: requests.p99Ms,
    heartbeatsPerSecond: round1(book.heartbeatsMeasured / (m.steadyWindowMs / 1000)),
    cpuPercentPerInstance: m.cpuPercentPerInstance,
    cpuCores,
    rssBytesPerInstance: m.steadyMemory.map((x) => x.rssBytes),
    rssPeakBytesPerInstance: m.steadyMemory.map((x) => x.peakRssBytes),
    rssBytesPer1000Clients:
      m.clientSessions > 0 ? Math.round(((rssTotal - rssBaseline) / m.clientSessions) * 1000) : null,
    generatorCpuPercent: m.generatorCpuPercent,
    generatorRssBytes: m.generatorRssBytes,
    generatorProcesses: m.generatorProcesses,
    redisCpuPercent: m.redisCpuPercent,
    steadyWindowMs: Math.round(m.steadyWindowMs),
    rampMs: m.rampMs,
    latencySamples: { oneWay, oneWayCross, roundTrip, roundTripCross, requests },
    failures,
    origoCounters: m.origoCounters,
    origoWarnings: m.origoWarnings,
  };
}
