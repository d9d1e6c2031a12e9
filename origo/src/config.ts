import ipaddr from 'ipaddr.js';
import { localDevRefusal } from '@mutp/cli-options';
import { DestinationStream } from 'pino';
import { Random } from '@mutp/shared';
import type { Lookup } from './proxy-auth';

export interface OrigoConfig {
  port: number;
  host: string;
  /**
   * Insecure dev mode: one secret shared by every proxy (any holder may register under any id
   * not currently live). Production uses `proxyKeysFile`. One of the two is required.
   */
  proxySecret?: string;
  /** JSON file `{"<proxyId>": "<key>"}`: each proxy's own key (reloaded on SIGHUP). */
  proxyKeysFile?: string;
  /**
   * The one-host profile (--local-dev): allowLocalProxies and allowPrivateOrigins together, and
   * `host` must be a loopback address (resolveConfig refuses another).
   */
  localDev: boolean;
  /** Dev/local: proxies may advertise loopback `httpUrl`s. */
  allowLocalProxies: boolean;
  /**
   * Dev/testbed: conflicts about objects on loopback or private-network origins (any port) are
   * judged too; otherwise origo fetches only public addresses on ports 80 and 443.
   */
  allowPrivateOrigins: boolean;
  /** PEM (PKCS#8) Ed25519 private key signing client tokens; generated at start when absent. */
  tokenKeyFile?: string;
  /** Lifetime of a client token; origo sends a renewed one a third into it. */
  tokenTtlMs: number;
  /** A `hello` may present a token expired at most this long ago and keep its client id. */
  tokenGraceMs: number;
  /** Open WebSockets per remote address, per path (/v1/proxy, /v1/client). */
  maxSocketsPerAddress: number;
  /** Sockets that have not greeted yet, per path; beyond it the oldest is closed to make room. */
  maxPendingSockets: number;
  /** Sockets that have not greeted yet, per remote address and path. */
  maxPendingPerAddress: number;
  /** Records per second per remote address (all its clients together). */
  recordRatePerAddress: number;
  recordBurstPerAddress: number;
  /** Bytes of records kept in the database (estimate per row); the oldest are pruned. */
  maxRecordBytes: number;
  /** SQLite busy timeout: how long one batch may wait for a locked database. */
  dbBusyTimeoutMs: number;
  /** Bearer token of the admin endpoints; they are disabled (404) when absent. */
  adminToken?: string;
  /** Bearer token of /metrics; without one it answers loopback clients only. */
  metricsToken?: string;
  /** SQLite file of the download records, or ':memory:'. */
  db: string;
  /** PostgreSQL URL (postgres:// or postgresql://) of the download records instead of the SQLite `db`. */
  recordsUrl?: string;
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
  /**
   * Staging hints per second per client, each proxy a hint names counting once (a hint to 4
   * proxies costs 4); hints above it are answered 'failed' with error 'rate-limited'.
   */
  stageRatePerSecond: number;
  stageBurst: number;
  /** The same per remote address (all its clients together). */
  stageRatePerAddress: number;
  stageBurstPerAddress: number;
  /**
   * Proxies offered per second per client network (IPv4 /24, IPv6 /48: all its clients, whatever
   * their ids), each proxy in a `proxies` answer counting once; a request-proxies above it is
   * answered `error {rate-limited}`. The burst is at least 32 (the most one request may ask for).
   */
  offerRatePerNetwork: number;
  offerBurstPerNetwork: number;
  /** How long origo waits for a proxy's answer to a hint before forgetting it. */
  stageTimeoutMs: number;
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
  /**
   * Redis URL shared by several origo instances (registry, picks, revocations, cross-instance
   * signalling); absent: this instance alone, everything in memory.
   */
  redisUrl?: string;
  /** Key prefix in Redis (several deployments on one Redis). */
  redisPrefix: string;
  /** How often the shared registry is read (how stale other instances' proxies may be). */
  clusterRefreshMs: number;
  /** This instance's name in the cluster (logs, /v1/admin/proxies); random when absent. */
  instanceId?: string;
  /**
   * Addresses (IPs or CIDRs) of the TLS reverse proxies in front of origo: for connections from
   * them the client's address is taken from X-Forwarded-For, so per-address budgets see real
   * clients. Empty: the socket's address, always (a header from anyone else is ignored).
   */
  trustProxy: string[];
}

/** In-process extras (tests): where logs go, the random source of selection, the DNS of proxies' names. */
export interface OrigoOptions extends Partial<OrigoConfig> {
  logStream?: DestinationStream;
  random?: Random;
  lookup?: Lookup;
  /** How often registered proxies' names are resolved again (tests; default 10 minutes). */
  nameRecheckMs?: number;
}

export const DEFAULT_CONFIG: Omit<
  OrigoConfig,
  | 'proxySecret'
  | 'proxyKeysFile'
  | 'tokenKeyFile'
  | 'adminToken'
  | 'metricsToken'
  | 'heartbeatTimeoutMs'
  | 'redisUrl'
  | 'instanceId'
  | 'recordsUrl'
> = {
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
  stageRatePerSecond: 8,
  stageBurst: 32,
  stageRatePerAddress: 32,
  stageBurstPerAddress: 128,
  offerRatePerNetwork: 64,
  offerBurstPerNetwork: 512,
  stageTimeoutMs: 60_000,
  greetingTimeoutMs: 3000,
  localDev: false,
  allowLocalProxies: false,
  allowPrivateOrigins: false,
  tokenTtlMs: 5 * 60_000,
  tokenGraceMs: 60 * 60_000,
  maxSocketsPerAddress: 32,
  maxPendingSockets: 256,
  maxPendingPerAddress: 8,
  recordRatePerAddress: 20,
  recordBurstPerAddress: 100,
  maxRecordBytes: 256 * 1024 * 1024,
  dbBusyTimeoutMs: 50,
  pingIntervalMs: 30_000,
  maxRecords: 1_000_000,
  maxSocketBufferBytes: 4 * 1024 * 1024,
  shutdownGraceMs: 2000,
  redisPrefix: 'mutp:',
  trustProxy: [],
  clusterRefreshMs: 500,
};

/** Fills in defaults and checks the values; throws with a message naming the bad setting. */
export function resolveConfig(options: OrigoOptions): OrigoConfig {
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_CONFIG.heartbeatIntervalMs;
  const config: OrigoConfig = {
    ...DEFAULT_CONFIG,
    heartbeatTimeoutMs: 3 * heartbeatIntervalMs,
    ...(defined as Partial<OrigoConfig>),
  };
  if (config.localDev) {
    const refusal = localDevRefusal({ host: config.host });
    if (refusal !== undefined) throw new Error(refusal);
    config.allowLocalProxies = true;
    config.allowPrivateOrigins = true;
  }
  if (config.proxySecret === '') delete config.proxySecret;
  if (config.proxySecret === undefined && config.proxyKeysFile === undefined) {
    throw new Error('proxy credentials are required: --proxy-keys <file> (or --insecure-proxy-secret for dev)');
  }
  if (config.adminToken === '') delete config.adminToken;
  if (config.metricsToken === '') delete config.metricsToken;
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
    'stageRatePerSecond',
    'stageBurst',
    'stageRatePerAddress',
    'stageBurstPerAddress',
    'offerRatePerNetwork',
    'stageTimeoutMs',
    'greetingTimeoutMs',
    'pingIntervalMs',
    'maxRecords',
    'maxSocketBufferBytes',
    'tokenTtlMs',
    'maxSocketsPerAddress',
    'maxPendingSockets',
    'maxPendingPerAddress',
    'recordRatePerAddress',
    'recordBurstPerAddress',
    'maxRecordBytes',
    'dbBusyTimeoutMs',
  ] as const) {
    if (!(config[key] > 0)) throw new Error(`${key} must be positive, got ${config[key]}`);
  }
  if (config.tokenTtlMs < 10_000) throw new Error('tokenTtlMs must be at least 10000');
  if (!(config.offerBurstPerNetwork >= 32)) {
    throw new Error(
      `offerBurstPerNetwork must be at least 32 (one request's most), got ${config.offerBurstPerNetwork}`,
    );
  }
  if (config.recordsUrl === '') delete config.recordsUrl;
  if (config.recordsUrl !== undefined) {
    if (!/^postgres(ql)?:\/\//.test(config.recordsUrl)) {
      throw new Error('--records must be a postgres:// or postgresql:// URL');
    }
    if (options.db !== undefined) {
      throw new Error('records go to SQLite (--db) or to PostgreSQL (--records), not both');
    }
  }
  if (config.redisUrl === '') delete config.redisUrl;
  if (config.redisUrl !== undefined) {
    if (!/^rediss?:\/\//.test(config.redisUrl)) throw new Error('--redis must be a redis:// or rediss:// URL');
    // Every instance must sign client tokens with one key: proxies registered on one instance
    // verify tokens a client got from another, and a client keeps its id when it fails over.
    if (config.tokenKeyFile === undefined) throw new Error('--redis needs --token-key <file> shared by every instance');
  }
  if (!(config.clusterRefreshMs >= 50)) throw new Error('clusterRefreshMs must be at least 50');
  for (const entry of config.trustProxy) {
    if (!isAddressOrCidr(entry)) throw new Error(`trustProxy: ${JSON.stringify(entry)} is not an IP address or CIDR`);
  }
  return config;
}

function isAddressOrCidr(entry: string): boolean {
  if (ipaddr.isValid(entry)) return true;
  try {
    ipaddr.parseCIDR(entry);
    return true;
  } catch {
    return false;
  }
}
