/**
 * Origo: the broker service, composed. The broker (broker/) holds the state and routing; the
 * session layer (sessions/) runs each WebSocket — budgets, greeting, framing, validation,
 * liveness; routes.ts is the HTTP side on fastify + @fastify/websocket (WebSocket endpoints,
 * JWKS, health, metrics, admin). This file builds them and owns start-up and shutdown.
 */
import { randomBytes } from 'node:crypto';
import pino, { Logger } from 'pino';
import { fetchOrigin } from '@mutp/origin-fetch';
import type { OriginFetcher } from './conflicts';
import { Broker } from './broker/router';
import { OrigoConfig, OrigoOptions, resolveConfig } from './config';
import { createMetrics, Metrics } from './metrics';
import { keyFileExposure, loadProxyKeys, ProxyKeys } from './proxy-auth';
import { DEFAULT_WRITER, RecordWriter } from './records/record-writer';
import { describeRecordBackend, openRecordBackend } from './records/backend-factory';
import { createHttpApp } from './routes';
import { Sessions } from './sessions/sessions';
import { TokenIssuer } from './tokens';
import { Cluster, SoloCluster } from './cluster/cluster';
import { RedisCluster } from './cluster/redis';
import { redactUrl } from './redact-url';

export interface Origo {
  readonly config: OrigoConfig;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Starts listening; resolves with the bound port (useful with port 0). */
  listen(): Promise<{ port: number; host: string }>;
  /** Graceful shutdown: stop accepting, close every socket with 1001, close the database. */
  close(): Promise<void>;
  counts(): { proxies: number; clients: number; connections: number };
  /** Re-reads --proxy-keys (SIGHUP): proxies whose key is gone are dropped. */
  reloadProxyKeys(): void;
  /** Writes the queued records now and resolves when they are stored or shed (tests; otherwise a timer does). */
  flushRecords(): Promise<void>;
}

export function createOrigo(options: OrigoOptions): Origo {
  const config = resolveConfig(options);
  const log: Logger = options.logStream
    ? pino({ level: config.logLevel, base: { service: 'origo' } }, options.logStream)
    : pino({ level: config.logLevel, base: { service: 'origo' } });
  const metrics = createMetrics();
  const records = openRecordBackend(config, log, metrics);
  const writer = new RecordWriter(records, DEFAULT_WRITER, {
    log,
    stored: metrics.recordsStored,
    shed: metrics.recordsShed,
  });
  const random = options.random ?? (() => (Math.random() * 0x100000000) >>> 0);
  const tokens = new TokenIssuer(config.tokenTtlMs, config.tokenKeyFile);
  for (const file of [config.proxyKeysFile, config.tokenKeyFile]) {
    const exposure = file === undefined ? undefined : keyFileExposure(file);
    if (exposure !== undefined) log.warn(exposure);
  }
  let proxyKeys: ProxyKeys | undefined =
    config.proxyKeysFile !== undefined ? loadProxyKeys(config.proxyKeysFile) : undefined;
  if (proxyKeys === undefined) {
    log.warn('insecure dev mode: one shared proxy secret (--insecure-proxy-secret); use --proxy-keys in production');
  }
  if (config.localDev) {
    log.warn(
      { host: config.host },
      'local development (--local-dev): proxies on loopback accepted, loopback origins judged; listening on loopback only',
    );
  }
  const cluster = createCluster(config, log, metrics);
  const broker = new Broker(config, {
    log,
    metrics,
    records: writer,
    random,
    tokens,
    proxyKeys: () => proxyKeys,
    cluster,
    ...(options.lookup !== undefined ? { lookup: options.lookup } : {}),
    ...(options.nameRecheckMs !== undefined ? { nameRecheckMs: options.nameRecheckMs } : {}),
    fetchOrigin: judgingFetch(config),
  });
  const sessions = new Sessions(config, broker, log, metrics);
  const app = createHttpApp({ config, log, metrics, broker, sessions, records, tokens });
  let closePromise: Promise<void> | undefined;

  return {
    config,
    log,
    metrics,
    counts: () => broker.counts,
    flushRecords: () => writer.flush(),
    reloadProxyKeys() {
      if (config.proxyKeysFile === undefined) return;
      const keys = loadProxyKeys(config.proxyKeysFile);
      const exposure = keyFileExposure(config.proxyKeysFile);
      if (exposure !== undefined) log.warn(exposure);
      const previous = proxyKeys;
      proxyKeys = keys;
      broker.revokeRemoved(previous, keys);
      log.info({ proxies: keys.size }, 'proxy keys reloaded');
    },
    async listen() {
      // A SQLite file that cannot be opened fails the start, with SQLite's reason; PostgreSQL is
      // awaited a bounded time and origo starts without it (records are shed until it answers).
      await records.ready;
      try {
        await broker.start(); // joins the other instances; an unreachable Redis fails the start
      } catch (err) {
        await cluster.close();
        throw new Error(`cannot reach redis ${redactUrl(config.redisUrl ?? '')}: ${(err as Error).message}`);
      }
      await app.listen({ port: config.port, host: config.host });
      const address = app.server.address();
      const port = typeof address === 'object' && address !== null ? address.port : config.port;
      log.info(
        { host: config.host, port, adminEndpoints: config.adminToken !== undefined, ...describeRecordBackend(config) },
        'origo listening',
      );
      return { port, host: config.host };
    },
    close() {
      closePromise ??= (async () => {
        sessions.stop();
        broker.close();
        await cluster.close();
        await sessions.closeAll();
        await app.close();
        await writer.close();
        await records.close();
        log.info('origo closed');
      })();
      return closePromise;
    },
  };
}

function createCluster(config: OrigoConfig, log: Logger, metrics: Metrics): Cluster {
  const instanceId = config.instanceId ?? `o-${randomBytes(6).toString('base64url')}`;
  if (config.redisUrl === undefined) return new SoloCluster(instanceId);
  return new RedisCluster({
    url: config.redisUrl,
    instanceId,
    prefix: config.redisPrefix,
    refreshMs: config.clusterRefreshMs,
    staleAfterMs: config.heartbeatTimeoutMs,
    log: log.child({ instanceId }),
    onError: (operation) => metrics.clusterErrors.inc({ operation }),
  });
}

/**
 * How origo fetches an object to judge a conflict: the proxies' own SSRF-guarded fetch, anonymous,
 * public addresses on ports 80 and 443 only (any address and port with allowPrivateOrigins).
 */
function judgingFetch(config: OrigoConfig): OriginFetcher {
  return async (url, range, maxBytes) => {
    const fetched = await fetchOrigin(url, {
      allowedOrigins: '*',
      allowPrivateOrigins: config.allowPrivateOrigins,
      originPorts: config.allowPrivateOrigins ? '*' : [80, 443],
      maxBytes,
      headersTimeoutMs: 5000,
      totalTimeoutMs: 15_000,
      userAgent: 'mutp-origo (conflict verdict)',
      ...(range ? { range } : {}),
    });
    return { bytes: fetched.bytes, etag: fetched.etag, lastModified: fetched.lastModified };
  };
}
