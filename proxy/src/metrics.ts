/**
 * Prometheus metrics of one proxy (its own registry, so several proxies can run in one process,
 * as the tests do). Served at GET /metrics.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Seconds: from a few milliseconds (a cached object on loopback) to a minute (a large object at a capped rate). */
const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export class ProxyMetrics {
  readonly registry = new Registry();
  readonly transfersActive: Gauge<'mode'>;
  readonly transfersTotal: Counter<'mode' | 'outcome'>;
  readonly bytesSent: Counter<'kind'>;
  readonly cacheLookups: Counter<'outcome'>;
  readonly cacheBytes: Gauge;
  readonly cacheEntries: Gauge;
  readonly originErrors: Counter<'kind'>;
  readonly stageHints: Counter<'outcome'>;
  readonly stagePrepared: Counter<'outcome'>;
  readonly malformedDatagrams: Counter;
  readonly unknownTransferDatagrams: Counter;
  readonly peers: Gauge;
  readonly uploadWaits: Counter;
  readonly httpRequests: Counter<'route' | 'status'>;
  readonly quicSessions: Counter<'outcome'>;
  readonly transferSeconds: Histogram<'mode'>;
  readonly firstByteSeconds: Histogram<'mode'>;
  readonly originFetchSeconds: Histogram<'outcome'>;
  readonly originBytes: Counter;
  readonly parentBytes: Counter;
  readonly shieldServed: Counter<'outcome'>;
  readonly shieldFetches: Counter<'outcome'>;
  readonly shieldBytes: Counter<'source'>;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.transfersActive = new Gauge({
      name: 'mutp_proxy_transfers_active',
      help: 'Transfers being served (MUTP by mode, and http)',
      labelNames: ['mode'],
      registers,
    });
    this.transfersTotal = new Counter({
      name: 'mutp_proxy_transfers_total',
      help: 'Transfers ended, by mode and outcome (done, failed, closed, or the error sent)',
      labelNames: ['mode', 'outcome'],
      registers,
    });
    this.bytesSent = new Counter({
      name: 'mutp_proxy_bytes_sent_total',
      help: 'Bytes sent to clients (mutp datagrams, http bodies)',
      labelNames: ['kind'],
      registers,
    });
    this.cacheLookups = new Counter({
      name: 'mutp_proxy_cache_lookups_total',
      help: 'Object cache lookups: hit, miss (origin fetch), joined (shared a fetch under way)',
      labelNames: ['outcome'],
      registers,
    });
    this.cacheBytes = new Gauge({ name: 'mutp_proxy_cache_bytes', help: 'Bytes in the object cache', registers });
    this.cacheEntries = new Gauge({ name: 'mutp_proxy_cache_entries', help: 'Objects in the cache', registers });
    this.originErrors = new Counter({
      name: 'mutp_proxy_origin_errors_total',
      help: 'Failed origin fetches by kind (not-found, origin-error, timeout, too-large, refused, internal)',
      labelNames: ['kind'],
      registers,
    });
    this.stageHints = new Counter({
      name: 'mutp_proxy_stage_hints_total',
      help: "Staging hints from origo, by outcome (staged, cached, busy, over-budget: the client network's fetches already cost the origin more than its downloads earn, uncacheable, or the fetch error kind)",
      labelNames: ['outcome'],
      registers,
    });
    this.stagePrepared = new Counter({
      name: 'mutp_proxy_stage_prepared_total',
      help: "Staged objects whose encoder was prepared for the hint's layout, by outcome (prepared, refused: a layout a REQUEST would be refused for, overloaded: no memory budget, failed)",
      labelNames: ['outcome'],
      registers,
    });
    this.malformedDatagrams = new Counter({
      name: 'mutp_proxy_malformed_datagrams_total',
      help: 'Datagrams from clients that failed to decode (dropped)',
      registers,
    });
    this.unknownTransferDatagrams = new Counter({
      name: 'mutp_proxy_unknown_transfer_datagrams_total',
      help: 'Datagrams for transfers this proxy does not have (dropped)',
      registers,
    });
    this.peers = new Gauge({ name: 'mutp_proxy_peers', help: 'Client peer connections', registers });
    this.uploadWaits = new Counter({
      name: 'mutp_proxy_upload_limit_waits_total',
      help: 'Times a sender waited for the upload limit (token bucket)',
      registers,
    });
    this.httpRequests = new Counter({
      name: 'mutp_proxy_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['route', 'status'],
      registers,
    });
    this.quicSessions = new Counter({
      name: 'mutp_proxy_quic_sessions_total',
      help: 'QUIC (WebTransport) session requests by outcome: accepted, unauthorized, refused (peer limits, draining), not-found',
      labelNames: ['outcome'],
      registers,
    });
    this.transferSeconds = new Histogram({
      name: 'mutp_proxy_transfer_duration_seconds',
      help: 'Transfers from request to end (any outcome), MUTP by mode, and http',
      labelNames: ['mode'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.firstByteSeconds = new Histogram({
      name: 'mutp_proxy_transfer_first_byte_seconds',
      help: 'Time to first byte: from a transfer request to its first byte ready to send (its object found in the cache, or fetched), MUTP by mode, and http',
      labelNames: ['mode'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.originFetchSeconds = new Histogram({
      name: 'mutp_proxy_origin_fetch_duration_seconds',
      help: 'Origin fetches from start to the whole body (or the failure), by outcome (ok, or the error kind)',
      labelNames: ['outcome'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.originBytes = new Counter({
      name: 'mutp_proxy_origin_bytes_total',
      help: 'Body bytes of completed origin fetches (what the origin sent for the cache)',
      registers,
    });
    this.parentBytes = new Counter({
      name: 'mutp_proxy_parent_bytes_total',
      help: "Shield child: body bytes of completed fetches a shield parent served in the origin's place (checked against the origin; not in mutp_proxy_origin_bytes_total)",
      registers,
    });
    this.shieldServed = new Counter({
      name: 'mutp_proxy_shield_requests_total',
      help: 'Shield parent: child requests by outcome (served, busy, over-budget, loop, unauthorized-<why>, stream-gone, stream-failed, or the error kind)',
      labelNames: ['outcome'],
      registers,
    });
    this.shieldFetches = new Counter({
      name: 'mutp_proxy_shield_fetches_total',
      help: "Shield child: misses by outcome (verified: the parent's bytes matched the origin's evidence; parent-failed, parent-loop (refused by a parent set up in a loop), parent-stale, parent-lied, unchecked (no evidence from the origin): fetched from the origin instead; origin-direct: the origin's probe brought the whole object)",
      labelNames: ['outcome'],
      registers,
    });
    this.shieldBytes = new Counter({
      name: 'mutp_proxy_shield_bytes_total',
      help: 'Origin shielding bytes by source: parent (received from the parent), origin-check (probes and samples from the origin), served-to-children (as a parent)',
      labelNames: ['source'],
      registers,
    });
    new Gauge({
      name: 'mutp_proxy_build_info',
      help: 'Always 1: the proxy version and the Node.js version running it',
      labelNames: ['version', 'node'],
      registers,
    }).set({ version: packageVersion(), node: process.version }, 1);
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'mutp_proxy_' });
  }
}

/** @mutp/proxy's version: package.json is one folder up from src/ and from dist/ alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
}
