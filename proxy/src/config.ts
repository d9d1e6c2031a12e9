/**
 * Proxy configuration from command-line flags and environment variables (flags win). Every
 * option with its default is listed by `--help`.
 */
import { hostname } from 'node:os';
import { Command, InvalidArgumentError, Option } from 'commander';
import { MAX_DATAGRAM_BYTES, MAX_OBJECT_BYTES, MAX_SYMBOL_SIZE, MIN_SYMBOL_SIZE, SourceEndpoint } from '@mutp/shared';
import { DEFAULT_DRAIN_TIMEOUT_MS } from './drain';
import { addShieldOptions, ShieldConfig, shieldConfig } from './shield-config';
import { addQuicCertOptions, QuicCaConfig, quicCaConfig } from './quic-cert-config';
import {
  featureList,
  flag,
  httpUrl,
  MAX_REGION_PREFIXES,
  origins,
  origoUrlProblem,
  pageOrigins,
  parseBytes,
  portRange,
  ports,
  quicUrl,
  regionName,
  regionPrefixes,
  wsUrls,
} from './config-values';
import { applyConfigFile, byteCount, exitTwoOnUsageErrors, integer, localDevRefusal } from '@mutp/cli-options';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface ProxyConfig {
  /**
   * Origo's proxy endpoint, e.g. ws://127.0.0.1:8700/v1/proxy, or the endpoints of several origo
   * instances sharing state (the link starts at a random one, moves on when one fails); none =
   * HTTP endpoints only.
   */
  origoUrl?: string | readonly string[];
  /** This proxy's key at origo (or origo's insecure shared dev secret). */
  secret: string;
  /**
   * Bearer token of /metrics and /healthz. Without one they answer loopback peers only: they
   * show load, cache contents' sizes and client counts, nothing a stranger needs.
   */
  metricsToken?: string;
  /** The id origo knows this proxy's key under (required with per-proxy keys). */
  proxyId?: string;
  /** Accept a plain ws:// origo on a non-loopback host (a man in the middle could inject clients). */
  insecure: boolean;
  /** Origin ports the proxy fetches from ('*' = any). */
  originPorts: '*' | number[];
  /** Page origins allowed to call /v1/http cross-origin (CORS), besides browser extensions. */
  corsOrigins: string[];
  name: string;
  /** Its region (locality, docs/deploy.md): origo offers it to clients of that region first. */
  region?: string;
  /** Client address prefixes (CIDR) its region serves: origo maps clients to regions by them. */
  regionPrefixes?: string[];
  /**
   * Optional MUTP features left off (docs/protocol.md §13), as a proxy one release behind: for
   * tests of a mixed fleet and rolling upgrades. Not declared to origo, never sent, and a
   * datagram using one is dropped as that release would.
   */
  disabledFeatures?: Readonly<ReturnType<typeof SourceEndpoint.parseFeatures>>;
  httpPort: number;
  httpHost: string;
  /** URL clients use for the HTTP endpoint; derived from host and port when absent. */
  advertisedHttpUrl?: string;
  iceBind?: string;
  icePortRange?: [number, number];
  mtu?: number;
  iceUdpMux: boolean;
  /**
   * UDP port of the QUIC endpoint (WebTransport, MUTP messages as QUIC datagrams; 0 = ephemeral);
   * absent: no QUIC, WebRTC only. It binds on httpHost.
   */
  quicPort?: number;
  /** URL clients open for QUIC; derived from httpUrl's host and quicPort when absent (same host as httpUrl). */
  advertisedQuicUrl?: string;
  /** Validity of each self-signed QUIC certificate, 1–14 days; rotated at three quarters of it. */
  quicCertificateDays: number;
  /** An operator's CA-issued certificate for the QUIC endpoint (quic-cert-config.ts); absent: self-signed. */
  quicCa?: QuicCaConfig;
  cacheBytes: number;
  /** Memory for transfer state beyond the cache: sender bookkeeping, codec copies, fetch buffers. */
  transferMemoryBytes: number;
  /** Origin fetches under way at once. */
  maxOriginFetches: number;
  /** Staging hints fetching at once (all clients); more are answered 'busy'. 0 refuses every hint. */
  maxStaging: number;
  /** Staging hints fetching at once for one client. */
  maxStagingPerClient: number;
  /** Smallest symbol size a client may ask for. */
  minSymbolSize: number;
  /** A client peer with no transfer and no datagram for this long is closed. */
  peerIdleTimeoutMs: number;
  maxObjectBytes: number;
  /** Upload limit in KB/s (1 KB = 1024 B); 0 = none. */
  uploadLimitKBps: number;
  /** Token bucket size in bytes; 0 = about 4 ms at the limit (see defaultBurstBytes). */
  uploadBurstBytes: number;
  /**
   * Under the upload limit, senders that ran out of tokens wait until this many ms of tokens
   * are back (within one datagram and the burst), then send them back to back; 0 = one datagram
   * (packets leave spaced at the rate). Fewer wake-ups cost less CPU per packet (pacer.ts): at
   * 1 ms timers a pump sent 1-2 datagrams, each pump a runtime wake-up (issue 33). The default,
   * 2 ms, is half the default burst, so a timer up to 2 ms late loses no tokens.
   */
  pacingQuantumMs: number;
  allowedOrigins: '*' | string[];
  allowPrivateOrigins: boolean;
  /**
   * The one-host profile (--local-dev): origins on loopback allowed, on any port (origin ports
   * '*' unless given); parseConfig refuses it with an HTTP host, advertised URL or ICE address
   * that is not loopback, and binds ICE to 127.0.0.1 unless told otherwise.
   */
  localDev?: boolean;
  maxTransfers: number;
  maxTransfersPerClient: number;
  maxPeers: number;
  maxPeersPerClient: number;
  /**
   * The fewest client networks (IPv4 /24, IPv6 /48, as origo names them) that can fill the proxy:
   * each holds at most 1/n of the peer slots, transfers, transfer memory and origin fetches.
   */
  minNetworks: number;
  /** Connect + response headers from the origin. */
  originTimeoutMs: number;
  /** The whole origin fetch, body included. */
  originTotalTimeoutMs: number;
  logLevel: LogLevel;
  /** On SIGTERM: how long active transfers may take to finish before the proxy closes anyway. */
  drainTimeoutMs?: number;
  /** Origin shielding (shield-config.ts): as a parent, a child, or both; absent: off. */
  shield?: ShieldConfig;
}

export const MiB = 1024 * 1024;

export const DEFAULT_CONFIG: Omit<ProxyConfig, 'secret'> = {
  name: `proxy-${hostname()}`.slice(0, 128),
  httpPort: 0,
  httpHost: '127.0.0.1',
  iceUdpMux: false,
  quicCertificateDays: 14,
  cacheBytes: 256 * MiB,
  transferMemoryBytes: 256 * MiB,
  maxOriginFetches: 32,
  maxStaging: 16,
  maxStagingPerClient: 4,
  minSymbolSize: 256,
  peerIdleTimeoutMs: 30_000,
  maxObjectBytes: 64 * MiB,
  uploadLimitKBps: 0,
  uploadBurstBytes: 0,
  pacingQuantumMs: 2,
  allowedOrigins: '*',
  allowPrivateOrigins: false,
  localDev: false,
  insecure: false,
  originPorts: [80, 443],
  corsOrigins: [],
  maxTransfers: 256,
  maxTransfersPerClient: 16,
  maxPeers: 256,
  maxPeersPerClient: 8,
  minNetworks: 8,
  originTimeoutMs: 15_000,
  originTotalTimeoutMs: 60_000,
  logLevel: 'info',
  drainTimeoutMs: DEFAULT_DRAIN_TIMEOUT_MS,
};

/** The commander program (used by main.ts and by `--help`); usage errors exit 2. */
export function buildCommand(): Command {
  const d = DEFAULT_CONFIG;
  return addQuicCertOptions(addShieldOptions(exitTwoOnUsageErrors(new Command('mutp-proxy'))))
    .description(
      'MUTP edge proxy: serves coded multi-source transfers over WebRTC and the Parallel HTTP baseline. ' +
        'HTTP /livez, /readyz, /healthz, /metrics, /v1/http. SIGTERM drains: new clients and transfers are ' +
        'refused, active transfers may finish (--drain-timeout-ms), then it exits; a second signal exits at once.' +
        '\n\nEvery option also comes from its environment variable or from --config: flags win, then the ' +
        'environment, then the file.',
    )
    .addOption(
      new Option(
        '--config <file>',
        'JSON file of options under their flag names, e.g. {"origo": "wss://origo.example/v1/proxy", "upload-limit": 1792}',
      ).env('MUTP_PROXY_CONFIG'),
    )
    .addOption(
      new Option('--origo <urls>', 'origo proxy endpoint (ws:// or wss://); several origo instances comma-separated')
        .env('MUTP_ORIGO_URL')
        .argParser(wsUrls),
    )
    .addOption(
      new Option('--secret <key>', "this proxy's key at origo (or origo's insecure shared dev secret; required)").env(
        'MUTP_PROXY_SECRET',
      ),
    )
    .addOption(
      new Option('--proxy-id <id>', 'the id origo lists this proxy key under (origo --proxy-keys)').env(
        'MUTP_PROXY_ID',
      ),
    )
    .addOption(
      new Option(
        '--metrics-token <token>',
        'bearer token of /metrics and /healthz (without one they answer loopback peers only)',
      ).env('MUTP_PROXY_METRICS_TOKEN'),
    )
    .addOption(
      new Option('--insecure', 'allow a plain ws:// origo on a non-loopback host')
        .env('MUTP_PROXY_INSECURE')
        .argParser(flag)
        .default(d.insecure),
    )
    .addOption(
      new Option(
        '--origin-ports <list>',
        'origin ports allowed, comma-separated, or * (listed --allowed-origins keep theirs)',
      )
        .env('MUTP_PROXY_ORIGIN_PORTS')
        .argParser(ports)
        .default(d.originPorts),
    )
    .addOption(
      new Option('--cors-origins <list>', 'web origins allowed to call /v1/http cross-origin (extensions always are)')
        .env('MUTP_PROXY_CORS_ORIGINS')
        .argParser(pageOrigins)
        .default(d.corsOrigins),
    )
    .addOption(new Option('--name <name>', 'name shown in origo').env('MUTP_PROXY_NAME').default(d.name))
    .addOption(
      new Option(
        '--region <name>',
        "this proxy's region (e.g. eu-west): origo offers clients of the region its proxies first; none: near every client",
      )
        .env('MUTP_PROXY_REGION')
        .argParser(regionName),
    )
    .addOption(
      new Option(
        '--region-prefixes <list>',
        `comma-separated client address prefixes (CIDR) the region serves, at most ${MAX_REGION_PREFIXES}: origo puts a client in the region of the longest declared prefix holding its address (needs --region and a key of its own, --proxy-id)`,
      )
        .env('MUTP_PROXY_REGION_PREFIXES')
        .argParser(regionPrefixes),
    )
    .addOption(
      new Option(
        '--disable-features <list>',
        'for tests and rolling upgrades: behave as a proxy without these optional MUTP features, comma-separated (extensions, ranges, weights, resume, attributes, signatures, symbol-digests, partitioned; docs/protocol.md §13)',
      )
        .env('MUTP_PROXY_DISABLE_FEATURES')
        .argParser(featureList),
    )
    .addOption(
      new Option('--http-port <port>', 'HTTP port (0 = ephemeral)')
        .env('MUTP_PROXY_HTTP_PORT')
        .argParser(integer(0, 65535))
        .default(d.httpPort),
    )
    .addOption(new Option('--http-host <host>', 'HTTP bind address').env('MUTP_PROXY_HTTP_HOST').default(d.httpHost))
    .addOption(
      new Option('--advertised-http-url <url>', 'HTTP URL clients use (default: derived from host and port)')
        .env('MUTP_PROXY_ADVERTISED_HTTP_URL')
        .argParser(httpUrl),
    )
    .addOption(new Option('--ice-bind <address>', 'local address for WebRTC (ICE)').env('MUTP_PROXY_ICE_BIND'))
    .addOption(
      new Option('--ice-port-range <a-b>', 'UDP port range for WebRTC')
        .env('MUTP_PROXY_ICE_PORT_RANGE')
        .argParser(portRange),
    )
    .addOption(
      new Option('--ice-udp-mux', 'all peers on one UDP port (needs --ice-port-range a-a)')
        .env('MUTP_PROXY_ICE_UDP_MUX')
        .argParser(flag),
    )
    .addOption(
      new Option('--mtu <bytes>', 'path MTU for WebRTC (libdatachannel default 1280; 1400 carries 1276-byte datagrams)')
        .env('MUTP_PROXY_MTU')
        .argParser(integer(576, 9000)),
    )
    .addOption(
      new Option(
        '--quic-port <port>',
        'UDP port of the QUIC endpoint (WebTransport datagrams; 0 = ephemeral); none = WebRTC only',
      )
        .env('MUTP_PROXY_QUIC_PORT')
        .argParser(integer(0, 65535)),
    )
    .addOption(
      new Option('--advertised-quic-url <url>', "QUIC URL clients open (https, httpUrl's host; default: derived)")
        .env('MUTP_PROXY_ADVERTISED_QUIC_URL')
        .argParser(quicUrl),
    )
    .addOption(
      new Option('--quic-certificate-days <n>', 'validity of each self-signed QUIC certificate, rotated before expiry')
        .env('MUTP_PROXY_QUIC_CERTIFICATE_DAYS')
        .argParser(integer(1, 14))
        .default(d.quicCertificateDays),
    )
    .addOption(
      new Option('--cache-bytes <bytes>', 'object cache size (e.g. 268435456 or 256MiB)')
        .env('MUTP_PROXY_CACHE_BYTES')
        .argParser(parseBytes)
        .default(d.cacheBytes, '256MiB'),
    )
    .addOption(
      new Option(
        '--transfer-memory <bytes>',
        'memory for transfers beyond the cache (sender state, codec copies, origin fetch buffers); full = new transfers refused',
      )
        .env('MUTP_PROXY_TRANSFER_MEMORY')
        .argParser(parseBytes)
        .default(d.transferMemoryBytes, '256MiB'),
    )
    .addOption(
      new Option('--max-origin-fetches <n>', 'origin fetches under way at once')
        .env('MUTP_PROXY_MAX_ORIGIN_FETCHES')
        .argParser(integer(1, 10_000))
        .default(d.maxOriginFetches),
    )
    .addOption(
      new Option(
        '--max-staging <n>',
        "staging hints fetching at once (clients' prefetches); 0 answers every hint 'busy'",
      )
        .env('MUTP_PROXY_MAX_STAGING')
        .argParser(integer(0, 10_000))
        .default(d.maxStaging),
    )
    .addOption(
      new Option('--max-staging-per-client <n>', 'staging hints fetching at once for one client')
        .env('MUTP_PROXY_MAX_STAGING_PER_CLIENT')
        .argParser(integer(1, 10_000))
        .default(d.maxStagingPerClient),
    )
    .addOption(
      new Option('--min-symbol-size <bytes>', 'smallest symbol size a client may ask for')
        .env('MUTP_PROXY_MIN_SYMBOL_SIZE')
        .argParser(integer(MIN_SYMBOL_SIZE, MAX_SYMBOL_SIZE))
        .default(d.minSymbolSize),
    )
    .addOption(
      new Option('--peer-idle-timeout-ms <ms>', 'close a client peer with no transfer and no datagram for this long')
        .env('MUTP_PROXY_PEER_IDLE_TIMEOUT_MS')
        .argParser(integer(1000, 3_600_000))
        .default(d.peerIdleTimeoutMs),
    )
    .addOption(
      new Option('--max-object-bytes <bytes>', `largest object served (at most ${MAX_OBJECT_BYTES})`)
        .env('MUTP_PROXY_MAX_OBJECT_BYTES')
        .argParser(byteCount(1, MAX_OBJECT_BYTES))
        .default(d.maxObjectBytes, '64MiB'),
    )
    .addOption(
      new Option('--upload-limit <KB/s>', 'upload limit of the whole proxy in KB/s (1 KB = 1024 B), 0 = none')
        .env('MUTP_PROXY_UPLOAD_LIMIT')
        .argParser(integer(0, 100_000_000))
        .default(d.uploadLimitKBps),
    )
    .addOption(
      new Option(
        '--upload-burst <bytes>',
        'bytes the upload limit lets go back to back (e.g. 64KiB); 0 = about 4 ms at the limit, as a capped link',
      )
        .env('MUTP_PROXY_UPLOAD_BURST')
        .argParser((t) => {
          const v = parseBytes(t);
          if (v !== 0 && (v < MAX_DATAGRAM_BYTES || v > 64 * MiB))
            throw new InvalidArgumentError(`must be 0 or in ${MAX_DATAGRAM_BYTES}..${64 * MiB}`);
          return v;
        })
        .default(d.uploadBurstBytes),
    )
    .addOption(
      new Option(
        '--pacing-quantum-ms <ms>',
        'under the upload limit, a sender out of tokens waits for this many ms of them (within one datagram and the burst) and sends them back to back (fewer wake-ups per datagram); 0 = one datagram at a time',
      )
        .env('MUTP_PROXY_PACING_QUANTUM_MS')
        .argParser(integer(0, 1000))
        .default(d.pacingQuantumMs),
    )
    .addOption(
      new Option(
        '--allowed-origins <list>',
        'comma-separated origins (https://cdn.example.com) or * = any public origin',
      )
        .env('MUTP_PROXY_ALLOWED_ORIGINS')
        .argParser(origins)
        .default(d.allowedOrigins),
    )
    .addOption(
      new Option(
        '--local-dev',
        'a trial or development on one machine: origins on loopback allowed, on any port; refuses to start unless it listens on and advertises loopback addresses only',
      )
        .env('MUTP_PROXY_LOCAL_DEV')
        .argParser(flag)
        .default(d.localDev),
    )
    .addOption(
      new Option('--allow-private-origins', 'TESTS ONLY: allow loopback, private and link-local origin addresses')
        .env('MUTP_PROXY_ALLOW_PRIVATE_ORIGINS')
        .argParser(flag)
        .default(d.allowPrivateOrigins),
    )
    .addOption(
      new Option('--max-transfers <n>', 'transfers at once, in total (MUTP and HTTP)')
        .env('MUTP_PROXY_MAX_TRANSFERS')
        .argParser(integer(1, 100_000))
        .default(d.maxTransfers),
    )
    .addOption(
      new Option('--max-transfers-per-client <n>', 'transfers at once per client')
        .env('MUTP_PROXY_MAX_TRANSFERS_PER_CLIENT')
        .argParser(integer(1, 100_000))
        .default(d.maxTransfersPerClient),
    )
    .addOption(
      new Option('--max-peers <n>', 'client peer connections at once')
        .env('MUTP_PROXY_MAX_PEERS')
        .argParser(integer(1, 100_000))
        .default(d.maxPeers),
    )
    .addOption(
      new Option('--max-peers-per-client <n>', 'peer connections per client id')
        .env('MUTP_PROXY_MAX_PEERS_PER_CLIENT')
        .argParser(integer(1, 1000))
        .default(d.maxPeersPerClient),
    )
    .addOption(
      new Option(
        '--min-networks <n>',
        'the fewest client networks (IPv4 /24, IPv6 /48) that can fill the proxy: each holds at most 1/n of its peers, transfers, transfer memory and origin fetches',
      )
        .env('MUTP_PROXY_MIN_NETWORKS')
        .argParser(integer(1, 1000))
        .default(d.minNetworks),
    )
    .addOption(
      new Option('--origin-timeout-ms <ms>', 'origin connect + response headers timeout')
        .env('MUTP_PROXY_ORIGIN_TIMEOUT_MS')
        .argParser(integer(1, 600_000))
        .default(d.originTimeoutMs),
    )
    .addOption(
      new Option('--origin-total-timeout-ms <ms>', 'whole origin fetch timeout (body included)')
        .env('MUTP_PROXY_ORIGIN_TOTAL_TIMEOUT_MS')
        .argParser(integer(1, 3_600_000))
        .default(d.originTotalTimeoutMs),
    )
    .addOption(
      new Option('--log-level <level>', 'log level')
        .env('MUTP_LOG_LEVEL')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default(d.logLevel),
    )
    .addOption(
      new Option('--drain-timeout-ms <ms>', 'on SIGTERM, how long active transfers may take to finish (then it closes)')
        .env('MUTP_PROXY_DRAIN_TIMEOUT_MS')
        .argParser(integer(0, 3_600_000))
        .default(d.drainTimeoutMs),
    );
}

/** Parses argv (node, script, ...flags) and the environment into a config; throws on errors. */
export function parseConfig(argv: string[], command: Command = buildCommand()): ProxyConfig {
  command.parse(argv);
  applyConfigFile(command, command.opts<{ config?: string }>().config);
  const o = command.opts();
  if (!o.secret) command.error('error: --secret (or MUTP_PROXY_SECRET) is required', { exitCode: 2 });
  const origoUrls: string[] = o.origo === undefined ? [] : typeof o.origo === 'string' ? [o.origo] : o.origo;
  const origoProblem = origoUrls.map((url) => origoUrlProblem(url, o.insecure)).find((p) => p !== undefined);
  if (origoProblem) command.error(`error: --origo: ${origoProblem}`, { exitCode: 2 });
  if (o.iceUdpMux && (!o.icePortRange || o.icePortRange[0] !== o.icePortRange[1]))
    command.error('error: --ice-udp-mux needs --ice-port-range with a single port (a-a)', { exitCode: 2 });
  if (o.localDev) {
    const refusal = localDevRefusal({
      '--http-host': o.httpHost,
      '--advertised-http-url': o.advertisedHttpUrl && new URL(o.advertisedHttpUrl).hostname,
      '--advertised-quic-url': o.advertisedQuicUrl && new URL(o.advertisedQuicUrl).hostname,
      '--ice-bind': o.iceBind,
    });
    if (refusal !== undefined) command.error(`error: ${refusal}`, { exitCode: 2 });
    // Origins on this machine listen on any port; listed ports are the operator's to keep.
    if (command.getOptionValueSource('originPorts') === 'default') o.originPorts = '*';
  }
  if (o.regionPrefixes !== undefined && o.region === undefined)
    command.error('error: --region-prefixes needs --region (the region they belong to)', { exitCode: 2 });
  const shield = shieldConfig(o);
  if (typeof shield === 'string') command.error(`error: ${shield}`, { exitCode: 2 });
  const quicCa = quicCaConfig(o);
  if (typeof quicCa === 'string') command.error(`error: ${quicCa}`, { exitCode: 2 });
  return {
    origoUrl: o.origo,
    secret: o.secret,
    ...(o.metricsToken ? { metricsToken: o.metricsToken as string } : {}),
    proxyId: o.proxyId,
    insecure: o.insecure,
    originPorts: o.originPorts,
    corsOrigins: o.corsOrigins,
    peerIdleTimeoutMs: o.peerIdleTimeoutMs,
    name: o.name,
    ...(o.region !== undefined ? { region: o.region as string } : {}),
    ...(o.regionPrefixes !== undefined ? { regionPrefixes: o.regionPrefixes as string[] } : {}),
    ...(o.disableFeatures !== undefined
      ? { disabledFeatures: o.disableFeatures as ReturnType<typeof SourceEndpoint.parseFeatures> }
      : {}),
    httpPort: o.httpPort,
    httpHost: o.httpHost,
    advertisedHttpUrl: o.advertisedHttpUrl,
    iceBind: o.iceBind ?? (o.localDev ? '127.0.0.1' : undefined),
    icePortRange: o.icePortRange,
    mtu: o.mtu,
    iceUdpMux: o.iceUdpMux ?? false,
    quicPort: o.quicPort,
    advertisedQuicUrl: o.advertisedQuicUrl,
    quicCertificateDays: o.quicCertificateDays,
    cacheBytes: o.cacheBytes,
    transferMemoryBytes: o.transferMemory,
    maxOriginFetches: o.maxOriginFetches,
    maxStaging: o.maxStaging,
    maxStagingPerClient: o.maxStagingPerClient,
    minSymbolSize: o.minSymbolSize,
    maxObjectBytes: o.maxObjectBytes,
    uploadLimitKBps: o.uploadLimit,
    uploadBurstBytes: o.uploadBurst,
    pacingQuantumMs: o.pacingQuantumMs,
    allowedOrigins: o.allowedOrigins,
    allowPrivateOrigins: o.allowPrivateOrigins,
    localDev: o.localDev,
    maxTransfers: o.maxTransfers,
    maxTransfersPerClient: o.maxTransfersPerClient,
    maxPeers: o.maxPeers,
    maxPeersPerClient: o.maxPeersPerClient,
    minNetworks: o.minNetworks,
    originTimeoutMs: o.originTimeoutMs,
    originTotalTimeoutMs: o.originTotalTimeoutMs,
    logLevel: o.logLevel,
    drainTimeoutMs: o.drainTimeoutMs,
    ...(shield ? { shield } : {}),
    ...(quicCa ? { quicCa } : {}),
  };
}
