import { DestinationStream } from 'pino';
import { Random } from '@mutp/shared';

export interface OrigoConfig {
  port: number;
  host: string;
  /** Shared secret every proxy presents in `register`. Required. */
  proxySecret: string;
  /** Bearer token of the admin endpoints; they are disabled (404) when absent. */
  adminToken?: string;
  /** SQLite file of the download records, or ':memory:'. */
  db: string;
  heartbeatIntervalMs: number;
  /** A proxy without a heartbeat for this long is removed. Default 3 × heartbeatIntervalMs. */
  heartbeatTimeoutMs: number;
  logLevel: string;
  maxProxies: number;
  maxClients: number;
  maxConnectionsPerClient: number;
  /** Invalid frames a socket may send before origo closes it (1008). */
  maxInvalidMessages: number;
  /** Per-socket message rate (token bucket); above it the socket is closed (1008). */
  messageRatePerSecond: number;
  messageBurst: number;
  /** Per-client record rate; records above it are dropped with an error, the socket stays. */
  recordRatePerSecond: number;
  recordBurst: number;
  /** The first message (register or hello) must arrive within this time. */
  greetingTimeoutMs: number;
  /** WebSocket ping period; a socket that has not answered the previous ping is terminated. */
  pingIntervalMs: number;
  /** Records kept in the database; older ones are pruned. */
  maxRecords: number;
  /** Bytes queued towards one socket beyond which it is closed as too slow. */
  maxSocketBufferBytes: number;
  /** On close(), how long sockets get to finish their closing handshake before being cut. */
  shutdownGraceMs: number;
}

/** In-process extras (tests): where logs go, and the random source of selection. */
export interface OrigoOptions extends Partial<OrigoConfig> {
  proxySecret: string;
  logStream?: DestinationStream;
  random?: Random;
}

export const DEFAULT_CONFIG: Omit<OrigoConfig, 'proxySecret' | 'adminToken' | 'heartbeatTimeoutMs'> = {
  port: 8700,
  host: '127.0.0.1',
  db: 'origo.sqlite',
  heartbeatIntervalMs: 2000,
  logLevel: 'info',
  maxProxies: 1000,
  maxClients: 10_000,
  maxConnectionsPerClient: 64,
  maxInvalidMessages: 20,
  messageRatePerSecond: 200,
  messageBurst: 400,
  recordRatePerSecond: 5,
  recordBurst: 50,
  greetingTimeoutMs: 10_000,
  pingIntervalMs: 30_000,
  maxRecords: 1_000_000,
  maxSocketBufferBytes: 4 * 1024 * 1024,
  shutdownGraceMs: 2000,
};

/** Fills in defaults and checks the values; throws with a message naming the bad setting. */
export function resolveConfig(options: OrigoOptions): OrigoConfig {
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_CONFIG.heartbeatIntervalMs;
  const config: OrigoConfig = {
    ...DEFAULT_CONFIG,
    heartbeatTimeoutMs: 3 * heartbeatIntervalMs,
    ...(defined as Partial<OrigoConfig>),
    proxySecret: options.proxySecret,
  };
  if (typeof config.proxySecret !== 'string' || config.proxySecret.length === 0) {
    throw new Error('a proxy secret is required (--proxy-secret or MUTP_PROXY_SECRET)');
  }
  if (config.adminToken === '') delete config.adminToken;
  if (!Number.isInteger(config.port) || config.port < 0 || config.port > 65535) {
    throw new Error(`port must be an integer in [0, 65535], got ${config.port}`);
  }
  if (config.heartbeatIntervalMs < 100) throw new Error('heartbeatIntervalMs must be at least 100');
  if (config.heartbeatTimeoutMs <= config.heartbeatIntervalMs) {
    throw new Error('heartbeatTimeoutMs must be longer than heartbeatIntervalMs');
  }
  for (const key of [
    'maxProxies',
    'maxClients',
    'maxConnectionsPerClient',
    'maxInvalidMessages',
    'messageRatePerSecond',
    'messageBurst',
    'recordRatePerSecond',
    'recordBurst',
    'greetingTimeoutMs',
    'pingIntervalMs',
    'maxRecords',
    'maxSocketBufferBytes',
  ] as const) {
    if (!(config[key] > 0)) throw new Error(`${key} must be positive, got ${config[key]}`);
  }
  return config;
}
