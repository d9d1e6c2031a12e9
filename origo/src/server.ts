/**
 * Origo: the broker service, composed. The broker (broker.ts) holds the state and routing; the
 * session layer (sessions/) runs each WebSocket — budgets, greeting, framing, validation,
 * liveness; routes.ts is the HTTP side on fastify + @fastify/websocket (WebSocket endpoints,
 * JWKS, health, metrics, admin). This file builds them and owns start-up and shutdown.
 */
import pino, { Logger } from 'pino';
import { Broker } from './broker';
import { OrigoConfig, OrigoOptions, resolveConfig } from './config';
import { createMetrics, Metrics } from './metrics';
import { loadProxyKeys, ProxyKeys } from './proxy-auth';
import { DEFAULT_WRITER, RecordWriter } from './record-writer';
import { RecordDatabase } from './record-db';
import { createHttpApp } from './routes';
import { Sessions } from './sessions/sessions';
import { TokenIssuer } from './tokens';

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
  const records = new RecordDatabase({
    path: config.db,
    maxRows: config.maxRecords,
    maxBytes: config.maxRecordBytes,
    busyTimeoutMs: config.dbBusyTimeoutMs,
  });
  const writer = new RecordWriter(records, DEFAULT_WRITER, {
    log,
    stored: metrics.recordsStored,
    shed: metrics.recordsShed,
  });
  const random = options.random ?? (() => (Math.random() * 0x100000000) >>> 0);
  const tokens = new TokenIssuer(config.tokenTtlMs, config.tokenKeyFile);
  let proxyKeys: ProxyKeys | undefined =
    config.proxyKeysFile !== undefined ? loadProxyKeys(config.proxyKeysFile) : undefined;
  if (proxyKeys === undefined) {
    log.warn('insecure dev mode: one shared proxy secret (--insecure-proxy-secret); use --proxy-keys in production');
  }
  const broker = new Broker(config, { log, metrics, records: writer, random, tokens, proxyKeys: () => proxyKeys });
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
      proxyKeys = keys;
      broker.revokeMissing(keys);
      log.info({ proxies: keys.size }, 'proxy keys reloaded');
    },
    async listen() {
      await records.ready; // a database that cannot be opened fails the start, with SQLite's reason
      await app.listen({ port: config.port, host: config.host });
      const address = app.server.address();
      const port = typeof address === 'object' && address !== null ? address.port : config.port;
      log.info(
        { host: config.host, port, adminEndpoints: config.adminToken !== undefined, db: config.db },
        'origo listening',
      );
      return { port, host: config.host };
    },
    close() {
      closePromise ??= (async () => {
        sessions.stop();
        broker.close();
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
