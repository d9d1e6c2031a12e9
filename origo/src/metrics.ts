/**
 * Prometheus metrics of one origo instance, on its own registry (several instances can run in
 * one process, as the tests do), plus prom-client's default process metrics.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type SignalDirection = 'client-to-proxy' | 'proxy-to-client';
/** json: not JSON; schema: JSON failing the schema; oversized: above MAX_SIGNAL_BYTES; unexpected: valid but not allowed now. */
export type InvalidKind = 'json' | 'schema' | 'oversized' | 'unexpected';

export function createMetrics() {
  const registry = new Registry();
  // The process metrics under the same prefix as the proxy's (mutp_proxy_process_cpu_seconds_total).
  collectDefaultMetrics({ register: registry, prefix: 'mutp_origo_' });
  const registers = [registry];
  new Gauge({
    name: 'mutp_origo_build_info',
    help: 'Always 1: the origo version and the Node.js version running it',
    labelNames: ['version', 'node'] as const,
    registers,
  }).set({ version: packageVersion(), node: process.version }, 1);
  return {
    registry,
    proxies: new Gauge({ name: 'mutp_origo_proxies_connected', help: 'Registered proxies', registers }),
    proxiesDraining: new Gauge({
      name: 'mutp_origo_proxies_draining',
      help: 'Registered proxies draining (no longer offered, finishing their transfers)',
      registers,
    }),
    requestProxiesSeconds: new Histogram({
      name: 'mutp_origo_request_proxies_duration_seconds',
      help: 'request-proxies handling, from the message to the answer (proxies, or an error)',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    clients: new Gauge({ name: 'mutp_origo_clients_connected', help: 'Clients that said hello', registers }),
    connections: new Gauge({
      name: 'mutp_origo_connections',
      help: 'Client-proxy connections whose signalling origo relays',
      registers,
    }),
    signalsRelayed: new Counter({
      name: 'mutp_origo_signals_relayed_total',
      help: 'Signal and connection-closed messages relayed, by direction',
      labelNames: ['direction'] as const,
      registers,
    }),
    invalidMessages: new Counter({
      name: 'mutp_origo_invalid_messages_total',
      help: 'Frames refused, by kind (json, schema, oversized, unexpected)',
      labelNames: ['kind'] as const,
      registers,
    }),
    recordsStored: new Counter({ name: 'mutp_origo_records_stored_total', help: 'Download records stored', registers }),
    recordsRefused: new Counter({
      name: 'mutp_origo_records_refused_total',
      help: 'Download records refused, by reason (forged-record, rate-limited)',
      labelNames: ['reason'] as const,
      registers,
    }),
    recordsShed: new Counter({
      name: 'mutp_origo_records_shed_total',
      help: 'Valid download records not stored, by reason (queue-full, db-unhealthy, db-error)',
      labelNames: ['reason'] as const,
      registers,
    }),
    registrationsRefused: new Counter({
      name: 'mutp_origo_registrations_refused_total',
      help: 'Proxy registrations refused, by reason',
      labelNames: ['reason'] as const,
      registers,
    }),
    socketsDropped: new Counter({
      name: 'mutp_origo_sockets_dropped_total',
      help: 'Sockets origo closed on a peer, by reason',
      labelNames: ['reason'] as const,
      registers,
    }),
    clusterErrors: new Counter({
      name: 'mutp_origo_cluster_errors_total',
      help: 'Operations on the shared state (Redis) that failed, by operation; cross-instance relay refused while it is down',
      labelNames: ['operation'] as const,
      registers,
    }),
    stageHints: new Counter({
      name: 'mutp_origo_stage_hints_total',
      help: 'Staging hints per proxy named, by outcome (forwarded, staged, failed, rate-limited, not-offered, unknown-proxy, relay-unavailable, expired)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    conflictVerdicts: new Counter({
      name: 'mutp_origo_conflict_verdicts_total',
      help: 'Conflicts clients handed in, by outcome (judged, no-conflict, refused, origin-failed)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    conflictStatements: new Counter({
      name: 'mutp_origo_conflict_statements_total',
      help: 'Signed statements of judged conflicts, by result (matches-origin, proven-false, inconclusive)',
      labelNames: ['result'] as const,
      registers,
    }),
    offersRefused: new Counter({
      name: 'mutp_origo_offers_refused_total',
      help: 'request-proxies answered with an error instead of proxies, by reason (rate-limited: the client network offer budget)',
      labelNames: ['reason'] as const,
      registers,
    }),
    heartbeatTimeouts: new Counter({
      name: 'mutp_origo_heartbeat_timeouts_total',
      help: 'Proxies removed for missing heartbeats',
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** @mutp/origo's version: package.json is one folder up from src/ and from dist/ alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
}
