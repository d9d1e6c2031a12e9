/**
 * Command-line flags, environment variables and the --config file of `origo` (each flag's env
 * fallback is in --help; @mutp/cli-options: precedence flags > env > file > defaults).
 */
import { Command, Option } from 'commander';
import { DEFAULT_CONFIG, OrigoOptions } from './config';
import { applyConfigFile, CommandWithEnv, integer, localDevRefusal } from '@mutp/cli-options';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function buildCli(): Command {
  const d = DEFAULT_CONFIG;
  return new CommandWithEnv('MUTP_ORIGO_')
    .name('origo')
    .description(
      'MUTP origo: proxy registry, proxy selection, WebRTC signalling relay and download records. ' +
        'WebSocket paths /v1/proxy and /v1/client; HTTP /livez, /readyz, /healthz, /metrics, /v1/keys ' +
        '(JWKS of client tokens), /v1/admin/proxies, /v1/records. Proxy credentials: --proxy-keys (or the ' +
        'insecure dev shared secret).\n\nEvery option also comes from its environment variable or from ' +
        '--config: flags win, then the environment, then the file.',
    )
    .addOption(
      new Option(
        '--config <file>',
        'JSON file of options under their flag names, e.g. {"port": 8700, "proxy-keys": "/etc/mutp/proxy-keys.json"}',
      ).env('MUTP_ORIGO_CONFIG'),
    )
    .addOption(
      new Option('--port <n>', 'TCP port (0 = any free port)')
        .env('MUTP_ORIGO_PORT')
        .argParser(integer(0, 65535))
        .default(d.port),
    )
    .addOption(new Option('--host <address>', 'address to listen on').env('MUTP_ORIGO_HOST').default(d.host))
    .addOption(
      new Option(
        '--proxy-keys <file>',
        'JSON {"<proxyId>": "<key>" | {"key": "<key>", "operator": "<name>"}}: each proxy registers with its own id and key (an operator named: offers and agreement spread over operators); SIGHUP reloads, a removed id is revoked',
      ).env('MUTP_ORIGO_PROXY_KEYS'),
    )
    .addOption(
      new Option(
        '--insecure-proxy-secret <secret>',
        'INSECURE dev mode instead of --proxy-keys: one secret shared by all proxies (any holder may claim any free id)',
      ).env('MUTP_PROXY_SECRET'),
    )
    .addOption(
      new Option(
        '--local-dev',
        'a trial or development on one machine: --allow-local-proxies and --allow-private-origins together; refuses to start unless --host is a loopback address',
      ).env('MUTP_ORIGO_LOCAL_DEV'),
    )
    .addOption(
      new Option(
        '--allow-local-proxies',
        'dev and testbed: accept proxies advertising a loopback or private-network httpUrl',
      ).env('MUTP_ORIGO_ALLOW_LOCAL_PROXIES'),
    )
    .addOption(
      new Option(
        '--allow-private-origins',
        'dev and testbed: judge conflicts about objects on loopback or private-network origins (any port)',
      ).env('MUTP_ORIGO_ALLOW_PRIVATE_ORIGINS'),
    )
    .addOption(
      new Option(
        '--token-key <file>',
        'PEM (PKCS#8) Ed25519 private key signing client tokens (default: generated)',
      ).env('MUTP_ORIGO_TOKEN_KEY'),
    )
    .addOption(
      new Option('--token-ttl-ms <ms>', 'client token lifetime (renewed a third into its lifetime)')
        .argParser(integer(10_000))
        .default(d.tokenTtlMs),
    )
    .addOption(
      new Option('--max-sockets-per-address <n>', 'open sockets per remote address, per path')
        .argParser(integer(1))
        .default(d.maxSocketsPerAddress),
    )
    .addOption(
      new Option('--max-pending-sockets <n>', 'sockets not yet greeted, per path (the oldest is closed beyond)')
        .argParser(integer(1))
        .default(d.maxPendingSockets),
    )
    .addOption(
      new Option('--max-pending-per-address <n>', 'sockets not yet greeted, per remote address and path')
        .argParser(integer(1))
        .default(d.maxPendingPerAddress),
    )
    .addOption(
      new Option(
        '--record-rate-per-address <n>',
        'download records per second per client network (IPv4 /24, IPv6 /48; the name is older)',
      )
        .argParser(integer(1))
        .default(d.recordRatePerAddress),
    )
    .addOption(
      new Option('--max-record-bytes <n>', 'bytes of records kept in the database (oldest pruned)')
        .argParser(integer(1))
        .default(d.maxRecordBytes),
    )
    .addOption(
      new Option('--db-busy-timeout-ms <ms>', 'how long a batch of records waits for a locked database before shedding')
        .argParser(integer(1))
        .default(d.dbBusyTimeoutMs),
    )
    .addOption(
      new Option('--admin-token <token>', 'bearer token of /v1/admin/* and /v1/records (disabled when absent)').env(
        'MUTP_ADMIN_TOKEN',
      ),
    )
    .addOption(
      new Option(
        '--metrics-token <token>',
        'bearer token of /metrics (without one it answers loopback clients only)',
      ).env('MUTP_ORIGO_METRICS_TOKEN'),
    )
    .addOption(
      new Option('--db <path>', "SQLite file of download records (':memory:' allowed; not with --records)")
        .env('MUTP_ORIGO_DB')
        .default(d.db),
    )
    .addOption(
      new Option(
        '--records <url>',
        'PostgreSQL instead of SQLite for download records, shared by several origo instances: postgres://user@host:5432/db (password: PGPASSWORD or ~/.pgpass)',
      ).env('MUTP_ORIGO_RECORDS'),
    )
    .addOption(
      new Option('--heartbeat-interval-ms <ms>', 'heartbeat period told to proxies')
        .env('MUTP_ORIGO_HEARTBEAT_INTERVAL_MS')
        .argParser(integer(100))
        .default(d.heartbeatIntervalMs),
    )
    .addOption(
      new Option('--heartbeat-timeout-ms <ms>', 'remove a proxy silent for this long (default: 3 × heartbeat interval)')
        .env('MUTP_ORIGO_HEARTBEAT_TIMEOUT_MS')
        .argParser(integer(101)),
    )
    .addOption(
      new Option('--log-level <level>', 'pino log level')
        .env('MUTP_ORIGO_LOG_LEVEL')
        .choices(LOG_LEVELS)
        .default(d.logLevel),
    )
    .addOption(
      new Option('--max-proxies <n>', 'registered proxies at most').argParser(integer(1)).default(d.maxProxies),
    )
    .addOption(new Option('--max-clients <n>', 'connected clients at most').argParser(integer(1)).default(d.maxClients))
    .addOption(
      new Option('--max-connections-per-client <n>', 'client-proxy connections one client may signal at once')
        .argParser(integer(1))
        .default(d.maxConnectionsPerClient),
    )
    .addOption(
      new Option('--max-invalid-messages <n>', 'invalid frames a socket may send before it is closed (1008)')
        .argParser(integer(1))
        .default(d.maxInvalidMessages),
    )
    .addOption(
      new Option('--message-rate <n>', 'messages per second per socket (token bucket); above it the socket is closed')
        .argParser(integer(1))
        .default(d.messageRatePerSecond),
    )
    .addOption(
      new Option('--message-burst <n>', 'token bucket size of --message-rate')
        .argParser(integer(1))
        .default(d.messageBurst),
    )
    .addOption(
      new Option('--record-rate <n>', 'download records per second per client; more are dropped with an error')
        .argParser(integer(1))
        .default(d.recordRatePerSecond),
    )
    .addOption(
      new Option('--record-burst <n>', 'token bucket size of --record-rate')
        .argParser(integer(1))
        .default(d.recordBurst),
    )
    .addOption(
      new Option(
        '--stage-rate <n>',
        'staging hints per second per client, each proxy named counting once; more are answered rate-limited',
      )
        .argParser(integer(1))
        .default(d.stageRatePerSecond),
    )
    .addOption(
      new Option('--stage-burst <n>', 'token bucket size of --stage-rate').argParser(integer(1)).default(d.stageBurst),
    )
    .addOption(
      new Option(
        '--stage-rate-per-address <n>',
        'staging hints per second per client network (IPv4 /24, IPv6 /48: all its clients; the name is older)',
      )
        .argParser(integer(1))
        .default(d.stageRatePerAddress),
    )
    .addOption(
      new Option('--stage-burst-per-address <n>', 'token bucket size of --stage-rate-per-address')
        .argParser(integer(1))
        .default(d.stageBurstPerAddress),
    )
    .addOption(
      new Option(
        '--offer-rate-per-network <n>',
        'proxies offered per second per client network (IPv4 /24, IPv6 /48: all its clients); above it request-proxies is answered rate-limited',
      )
        .argParser(integer(1))
        .default(d.offerRatePerNetwork),
    )
    .addOption(
      new Option('--offer-burst-per-network <n>', 'token bucket size of --offer-rate-per-network (at least 32)')
        .argParser(integer(32))
        .default(d.offerBurstPerNetwork),
    )
    .addOption(
      new Option('--stage-timeout-ms <ms>', "how long origo waits for a proxy's answer to a staging hint")
        .argParser(integer(1))
        .default(d.stageTimeoutMs),
    )
    .addOption(
      new Option('--greeting-timeout-ms <ms>', 'register / hello must arrive within this time')
        .argParser(integer(1))
        .default(d.greetingTimeoutMs),
    )
    .addOption(
      new Option('--ping-interval-ms <ms>', 'WebSocket ping period; a socket missing a pong is cut')
        .argParser(integer(1))
        .default(d.pingIntervalMs),
    )
    .addOption(
      new Option('--max-records <n>', 'records kept in the database (oldest pruned)')
        .argParser(integer(1))
        .default(d.maxRecords),
    )
    .addOption(
      new Option('--max-socket-buffer-bytes <n>', 'bytes queued towards one socket before it is closed as too slow')
        .argParser(integer(1))
        .default(d.maxSocketBufferBytes),
    )
    .addOption(
      new Option('--shutdown-grace-ms <ms>', 'time sockets get to close on SIGTERM/SIGINT')
        .argParser(integer(0))
        .default(d.shutdownGraceMs),
    )
    .addOption(
      new Option(
        '--redis <url>',
        'several origo instances behind one name share proxies and relay signalling through this Redis (needs --token-key shared by all)',
      ).env('MUTP_ORIGO_REDIS'),
    )
    .addOption(
      new Option('--redis-prefix <prefix>', 'key and channel prefix in Redis')
        .env('MUTP_ORIGO_REDIS_PREFIX')
        .default(d.redisPrefix),
    )
    .addOption(
      new Option('--cluster-refresh-ms <ms>', 'how often the shared proxy registry is read from Redis')
        .env('MUTP_ORIGO_CLUSTER_REFRESH_MS')
        .argParser(integer(50))
        .default(d.clusterRefreshMs),
    )
    .addOption(
      new Option('--instance-id <id>', 'this instance in the cluster (logs, admin listing; default: random)').env(
        'MUTP_ORIGO_INSTANCE_ID',
      ),
    )
    .addOption(
      new Option(
        '--trust-proxy <addresses>',
        'comma-separated IPs/CIDRs of the TLS reverse proxies in front of origo: X-Forwarded-For from them names the client (per-address limits)',
      ).env('MUTP_ORIGO_TRUST_PROXY'),
    );
}

/** Parses argv (node, script, ...flags) into createOrigo's options; errors exit through commander. */
export function parseCli(argv: string[]): OrigoOptions {
  const program: Command = buildCli();
  program.parse(argv);
  applyConfigFile(program, program.opts<{ config?: string }>().config);
  const o = program.opts<Record<string, unknown>>();
  const secret = (o.insecureProxySecret as string | undefined) || undefined;
  const keys = (o.proxyKeys as string | undefined) || undefined;
  const records = (o.records as string | undefined) || undefined;
  const switchOn = (value: unknown) => value === true || value === 'true' || value === '1';
  const localDev = switchOn(o.localDev);
  const localDevProblem = localDev ? localDevRefusal({ '--host': o.host as string }) : undefined;
  if (localDevProblem !== undefined) program.error(`error: ${localDevProblem}`, { exitCode: 2 });
  if (records !== undefined && !/^postgres(ql)?:\/\//.test(records)) {
    program.error('error: --records must be a postgres:// or postgresql:// URL', { exitCode: 2 });
  }
  if (records !== undefined && program.getOptionValueSource('db') !== 'default' && o.db !== '') {
    program.error(
      'error: records go to SQLite (--db, MUTP_ORIGO_DB) or to PostgreSQL (--records, MUTP_ORIGO_RECORDS), not both',
      { exitCode: 2 },
    );
  }
  if (secret === undefined && keys === undefined) {
    program.error(
      'error: proxy credentials are required: --proxy-keys <file>, or for dev --insecure-proxy-secret <secret> (MUTP_PROXY_SECRET)',
      { exitCode: 2 },
    );
  }
  return {
    port: o.port as number,
    host: o.host as string,
    proxySecret: keys === undefined ? secret : undefined,
    proxyKeysFile: keys,
    localDev,
    allowLocalProxies: switchOn(o.allowLocalProxies),
    allowPrivateOrigins: switchOn(o.allowPrivateOrigins),
    tokenKeyFile: (o.tokenKey as string | undefined) || undefined,
    tokenTtlMs: o.tokenTtlMs as number,
    maxSocketsPerAddress: o.maxSocketsPerAddress as number,
    maxPendingSockets: o.maxPendingSockets as number,
    maxPendingPerAddress: o.maxPendingPerAddress as number,
    recordRatePerAddress: o.recordRatePerAddress as number,
    maxRecordBytes: o.maxRecordBytes as number,
    dbBusyTimeoutMs: o.dbBusyTimeoutMs as number,
    adminToken: (o.adminToken as string | undefined) || undefined,
    metricsToken: (o.metricsToken as string | undefined) || undefined,
    db: records === undefined ? (o.db as string) : undefined,
    recordsUrl: records,
    heartbeatIntervalMs: o.heartbeatIntervalMs as number,
    heartbeatTimeoutMs: o.heartbeatTimeoutMs as number | undefined,
    logLevel: o.logLevel as string,
    maxProxies: o.maxProxies as number,
    maxClients: o.maxClients as number,
    maxConnectionsPerClient: o.maxConnectionsPerClient as number,
    maxInvalidMessages: o.maxInvalidMessages as number,
    messageRatePerSecond: o.messageRate as number,
    messageBurst: o.messageBurst as number,
    recordRatePerSecond: o.recordRate as number,
    recordBurst: o.recordBurst as number,
    stageRatePerSecond: o.stageRate as number,
    stageBurst: o.stageBurst as number,
    stageRatePerAddress: o.stageRatePerAddress as number,
    stageBurstPerAddress: o.stageBurstPerAddress as number,
    offerRatePerNetwork: o.offerRatePerNetwork as number,
    offerBurstPerNetwork: o.offerBurstPerNetwork as number,
    stageTimeoutMs: o.stageTimeoutMs as number,
    greetingTimeoutMs: o.greetingTimeoutMs as number,
    pingIntervalMs: o.pingIntervalMs as number,
    maxRecords: o.maxRecords as number,
    maxSocketBufferBytes: o.maxSocketBufferBytes as number,
    shutdownGraceMs: o.shutdownGraceMs as number,
    redisUrl: (o.redis as string | undefined) || undefined,
    redisPrefix: o.redisPrefix as string,
    clusterRefreshMs: o.clusterRefreshMs as number,
    instanceId: (o.instanceId as string | undefined) || undefined,
    trustProxy: ((o.trustProxy as string | undefined) ?? '')
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== ''),
  };
}
