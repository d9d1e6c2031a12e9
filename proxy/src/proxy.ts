/**
 * One edge proxy: HTTP endpoint (baseline, health, readiness, metrics), object cache behind the
 * SSRF-guarded origin fetch, upload shaping, client peer connections with their transfer hosts,
 * and the link to origo. `createProxy(config)` builds it without starting anything, so tests run
 * it in-process. `drain()` then `close()` is the graceful shutdown (drain.ts).
 */
import { networkInterfaces } from 'node:os';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { type Codec, type Mode, MODES, RtcFactory, SourceEndpoint } from '@mutp/shared';
import { createNodeRtcFactory } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import pino, { Logger } from 'pino';
import { AssertionKey } from './assertion-key';
import { AddressClass, LookupAll, OriginPolicy } from '@mutp/origin-fetch';
import type { ProxyConfig } from './config';
import { ClientTokenVerifier } from './client-tokens';
import { DEFAULT_DRAIN_TIMEOUT_MS, DrainableAdmission, DRAINING_REASON, transfersDone } from './drain';
import { asServeError } from './errors';
import { createHttpServer, Readiness } from './http-server';
import { ProxyMetrics } from './metrics';
import { ObjectCache, ObjectCacheStats } from './object-cache';
import { ObjectSource } from './object-source';
import { fetchOrigin } from '@mutp/origin-fetch';
import { OrigoLink, OrigoLinkStats } from './origo-link';
import { PeerManager } from './peer-manager';
import { QuicCertificate } from './quic-certificates';
import { listenNative, nativeCertificate } from './quic-native';
import { QuicListen, QuicService, quicUrlHost } from './quic-service';
import { RateMeter } from './rate-meter';
import { encoderPreparer } from './stage-prepare';
import { HintLedger } from './hint-ledger';
import { Stager } from './stager';
import { Pacer, pacingQuantumBytes } from './pacer';
import { TokenBucket, TokenBucketStats } from './token-bucket';
import { TransferHostStats, TransferServices } from './transfer-host';

export interface ProxyDeps {
  logger?: Logger;
  /** WebRTC implementation (default: node-datachannel with the config's ICE settings). */
  rtc?: RtcFactory;
  /** Codecs (default: loadNodeCodecs(), loaded once at start). */
  codecs?: Partial<Record<Mode, Codec>>;
  /** Resolver for origin hosts (tests). */
  lookup?: LookupAll;
  /** Tests: exactly these non-public address classes are allowed (e.g. only loopback). */
  allowedClasses?: ReadonlySet<AddressClass>;
  /** Called when the proxy must stop for good (origo refused the secret). */
  onFatal?: (error: Error) => void;
  /** Verifies client tokens (default: one fed the key origo sends at registration). */
  tokens?: ClientTokenVerifier;
  /** Starts the QUIC server when `quicPort` is set (default: @mutp/quic's WebTransport server). */
  quicListen?: QuicListen;
  /** Makes QUIC certificates (default: @mutp/quic's self-signed ECDSA P-256). */
  generateCertificate?: (validityDays: number) => QuicCertificate;
}

export interface ProxyStats {
  name: string;
  proxyId?: string;
  /** Shutting down: no new clients or transfers (drain()). */
  draining: boolean;
  uptimeMs: number;
  httpUrl?: string;
  activeTransfers: number;
  maxTransfers: number;
  uploadBps: number;
  capacityBps: number;
  bytesSent: number;
  cache: ObjectCacheStats;
  bucket: TokenBucketStats;
  origo?: OrigoLinkStats;
  peers: { peers: number; ignoredSignals: number; refusedPeers: number; hosts: TransferHostStats[] };
  /** The QUIC endpoint, when it runs one. */
  quic?: ReturnType<QuicService['stats']> & { url?: string; certificateHashes: string[] };
}

export interface Proxy {
  start(): Promise<{ httpUrl: string; quicUrl?: string }>;
  /**
   * Graceful drain: refuses new client connections and transfers, tells origo at once (which
   * stops offering this proxy) and the connected clients (ERROR GoingAway: they move their next
   * segments elsewhere), and resolves when no transfer is active or after `timeoutMs`
   * (default: the config's drainTimeoutMs) with the number still active. close() follows.
   */
  drain(timeoutMs?: number): Promise<number>;
  close(): Promise<void>;
  /** 200 on /readyz: registered with origo (when one is configured) and not draining. */
  readiness(): Readiness;
  stats(): ProxyStats;
  /** Shared parts, for tests and embedding (e.g. a TransferHost without origo). */
  readonly services: TransferServices;
  readonly peers: PeerManager;
  readonly logger: Logger;
}

/** A codec's WebAssembly instance larger than this is dropped when its last encoder is freed. */
export const WASM_RECYCLE_ABOVE_BYTES = 32 * 1024 * 1024;

/** What --local-dev opens among the non-public address classes of origins: this machine. */
const LOOPBACK_ORIGINS: ReadonlySet<AddressClass> = new Set<AddressClass>(['loopback']);

export function createProxy(config: ProxyConfig, deps: ProxyDeps = {}): Proxy {
  const logger = deps.logger ?? pino({ level: config.logLevel, base: { service: 'mutp-proxy', name: config.name } });
  const startedAt = performance.now();
  const metrics = new ProxyMetrics({ defaultMetrics: true });
  const abort = new AbortController();
  // --local-dev opens loopback only; --allow-private-origins every private class.
  const localOnly = config.localDev && !config.allowPrivateOrigins;
  const policy: OriginPolicy = {
    allowedOrigins: config.allowedOrigins,
    allowPrivateOrigins: config.allowPrivateOrigins || config.localDev === true,
    allowedClasses: deps.allowedClasses ?? (localOnly ? LOOPBACK_ORIGINS : undefined),
    originPorts: config.originPorts,
  };
  const tokens = deps.tokens ?? new ClientTokenVerifier();
  if (config.allowPrivateOrigins)
    logger.warn(
      '--allow-private-origins is on: origins on loopback/private/link-local addresses are allowed (tests only)',
    );
  if (config.localDev)
    logger.warn(
      { httpHost: config.httpHost, iceBind: config.iceBind, originPorts: config.originPorts },
      'local development (--local-dev): origins on loopback allowed; listening on loopback only',
    );
  // Every byte beyond the cache (sender state, codec copies, fetch buffers) is charged here first.
  const admission = new DrainableAdmission({
    maxTransfers: config.maxTransfers,
    maxPerClient: config.maxTransfersPerClient,
    memoryBytes: config.transferMemoryBytes,
    minNetworks: config.minNetworks,
  });
  // What each client network's origin fetches cost against its completed downloads (staging hints).
  const hints = new HintLedger();
  const cache = new ObjectCache({
    maxBytes: config.cacheBytes,
    budget: admission.memory,
    maxConcurrentFetches: config.maxOriginFetches,
    minNetworks: config.minNetworks,
    fetch: (url, control) => {
      const timer = metrics.originFetchSeconds.startTimer();
      return fetchOrigin(url, {
        ...policy,
        maxBytes: config.maxObjectBytes,
        headersTimeoutMs: config.originTimeoutMs,
        totalTimeoutMs: Math.max(config.originTimeoutMs, config.originTotalTimeoutMs),
        lookup: deps.lookup,
        signal: AbortSignal.any([abort.signal, control.signal]),
        reserve: control.reserve,
        onBody: control.onBody,
        range: control.range,
      }).then(
        (fetched) => {
          timer({ outcome: 'ok' });
          return fetched;
        },
        (e: unknown) => {
          const error = asServeError(e);
          timer({ outcome: error.kind });
          metrics.originErrors.inc({ kind: error.kind });
          logger.info({ url, kind: error.kind, message: error.message }, 'origin fetch failed');
          throw error;
        },
      );
    },
    onLookup: (outcome) => metrics.cacheLookups.inc({ outcome }),
    onOriginBytes: (network, bytes, source) => {
      // A shield parent's bytes are not the origin's (checked against it: shield-fetch.ts).
      (source === 'parent' ? metrics.parentBytes : metrics.originBytes).inc(bytes);
      if (network !== undefined) hints.chargeOrigin(network, bytes, performance.now());
    },
  });
  const objects = new ObjectSource(policy, cache, (error) => metrics.originErrors.inc({ kind: error.kind }));
  const capacityBps = config.uploadLimitKBps * 1024;
  const bucket = new TokenBucket(capacityBps, config.uploadBurstBytes || undefined, performance.now());
  const meter = new RateMeter();
  const services: TransferServices = {
    codecs: deps.codecs ?? {},
    objects,
    bucket,
    pacer: new Pacer(bucket, pacingQuantumBytes(bucket, config.pacingQuantumMs)),
    admission,
    metrics,
    meter,
    logger,
    hints,
    endpointLimits: { minSymbolSize: config.minSymbolSize, idleTimeoutMs: config.peerIdleTimeoutMs },
    // With an upload limit the proxy knows its capacity: a new client's first transfer starts at it.
    uploadCapBps: capacityBps > 0 ? capacityBps : undefined,
    disabledFeatures: config.disabledFeatures,
  };
  // Signed METAs only where origo publishes the key: a standalone proxy has nobody to vouch for it.
  const assertionKey = config.origoUrl ? new AssertionKey() : undefined;
  if (assertionKey) services.signer = assertionKey.signer(() => link?.proxyId);
  const rtc =
    deps.rtc ??
    createNodeRtcFactory({
      bindAddress: config.iceBind,
      portRangeBegin: config.icePortRange?.[0],
      portRangeEnd: config.icePortRange?.[1],
      mtu: config.mtu,
      enableIceUdpMux: config.iceUdpMux || undefined,
      name: 'proxy',
    });
  const peers = new PeerManager({
    rtc,
    services,
    logger,
    maxPeers: config.maxPeers,
    maxPeersPerClient: config.maxPeersPerClient,
    minNetworks: config.minNetworks,
  });
  let server: Server | undefined;
  let link: OrigoLink | undefined;
  const stager = new Stager({
    objects,
    send: (answer) => link?.sendStaged(answer),
    metrics,
    logger,
    maxConcurrent: config.maxStaging,
    maxPerClient: config.maxStagingPerClient,
    timeoutMs: Math.max(config.originTimeoutMs, config.originTotalTimeoutMs),
    draining: () => admission.draining,
    prepare: encoderPreparer(() => services.codecs, config.minSymbolSize),
    ledger: hints,
  });
  let httpUrl: string | undefined;
  let quic: QuicService | undefined;
  let quicUrl: string | undefined;
  let closed = false;

  const stats = (): ProxyStats => {
    const c = cache.stats();
    metrics.cacheBytes.set(c.bytes);
    metrics.cacheEntries.set(c.entries);
    return {
      name: config.name,
      proxyId: link?.proxyId,
      draining: admission.draining,
      uptimeMs: Math.round(performance.now() - startedAt),
      httpUrl,
      activeTransfers: admission.activeTransfers,
      maxTransfers: config.maxTransfers,
      uploadBps: Math.round(meter.bytesPerSecond()),
      capacityBps,
      bytesSent: meter.totalBytes,
      cache: c,
      bucket: bucket.stats(),
      origo: link?.stats(),
      peers: peers.stats(),
      ...(quic ? { quic: { ...quic.stats(), url: quicUrl, certificateHashes: quic.certificateHashes() } } : {}),
    };
  };

  const readiness = (): Readiness => {
    if (admission.draining) return { ready: false, reason: 'draining' };
    if (link !== undefined && link.state !== 'registered') {
      return { ready: false, reason: 'not-registered', origoLink: link.state };
    }
    if (server === undefined || closed) return { ready: false, reason: 'not-serving' };
    return { ready: true };
  };

  return {
    services,
    peers,
    logger,
    stats,
    readiness,
    async start() {
      if (server) throw new Error('proxy already started');
      // WebAssembly memory only grows: instances that grew for a peak are replaced once idle.
      if (!deps.codecs) services.codecs = await loadNodeCodecs({ recycleAboveBytes: WASM_RECYCLE_ABOVE_BYTES });
      const modes = MODES.filter((m) => services.codecs[m] !== undefined);
      if (modes.length === 0) throw new Error('no codec loaded: the proxy could serve no mode');
      server = createHttpServer({
        objects,
        bucket,
        admission,
        metrics,
        meter,
        logger,
        tokens,
        corsOrigins: config.corsOrigins,
        maxPerAddress: config.maxTransfersPerClient,
        hints,
        signAnswer: assertionKey?.answerSigner(() => link?.proxyId),
        metricsToken: config.metricsToken,
        health: () => {
          const s = stats();
          return { status: 'ok', ...s, peers: { ...s.peers, hosts: undefined } };
        },
        readiness,
      });
      const listening = server;
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(config.httpPort, config.httpHost, () => {
          listening.off('error', reject);
          resolve();
        });
      });
      const port = (listening.address() as AddressInfo).port;
      httpUrl = config.advertisedHttpUrl ?? deriveHttpUrl(config.httpHost, port);
      logger.info(
        { httpUrl, listen: `${config.httpHost}:${port}`, modes, uploadLimitBps: capacityBps },
        'HTTP endpoint up',
      );
      if (config.quicPort !== undefined) {
        const service = new QuicService({
          host: config.httpHost,
          port: config.quicPort,
          advertisedUrl: config.advertisedQuicUrl,
          certificateDays: config.quicCertificateDays,
          ...(config.quicCa
            ? { caCertificate: { files: config.quicCa, host: quicUrlHost(config.advertisedQuicUrl ?? httpUrl) } }
            : {}),
          generateCertificate:
            deps.generateCertificate ?? ((days) => nativeCertificate([new URL(httpUrl!).hostname, 'localhost'], days)),
          maxRateBps: capacityBps,
          peers,
          tokens,
          logger,
          metrics,
          listen: deps.quicListen ?? listenNative,
          // A rotation reaches origo at once, not at the next beat.
          onHashesChanged: () => link?.heartbeatNow(),
        });
        quic = service;
        const quicPort = await service.start();
        quicUrl = service.url(httpUrl);
        logger.info({ quicUrl, listen: `${config.httpHost}:${quicPort}/udp` }, 'QUIC endpoint up');
      }
      const quicService = quic;
      if (config.origoUrl) {
        link = new OrigoLink({
          url: config.origoUrl,
          secret: config.secret,
          proxyId: config.proxyId,
          name: config.name,
          httpUrl,
          capacityBps,
          maxTransfers: config.maxTransfers,
          modes,
          assertionKey: assertionKey!.publicKey,
          region: config.region,
          regionPrefixes: config.regionPrefixes,
          capabilities: SourceEndpoint.declaredFeatures(config.disabledFeatures),
          ...(quicService && quicUrl ? { quic: () => quicService.endpoint(quicUrl!) } : {}),
          logger,
          load: () => ({
            activeTransfers: admission.activeTransfers,
            uploadBps: Math.round(meter.bytesPerSecond()),
            capacityBps,
            // Only while draining: the usual heartbeat stays as it was.
            ...(admission.draining ? { draining: true } : {}),
            ...(quicService?.reportsHashes ? { quicCertificateHashes: quicService.certificateHashes() } : {}),
          }),
          onSignal: (m) => peers.handleSignal(m),
          onConnectionClosed: (id, reason) => peers.handleClosed(id, reason),
          onStage: (hint) => stager.handle(hint),
          onStale: (m) => {
            const dropped = cache.dropVersion(m.url, m.range, Buffer.from(m.digest, 'hex'));
            logger.info({ url: m.url, range: m.range, dropped }, 'origo found a cached version stale');
          },
          onFatal: (error) => deps.onFatal?.(error),
          onRegistered: (proxyId, tokenKey) => {
            tokens.setProxyId(proxyId);
            tokens.setKey(tokenKey).catch((err: unknown) => logger.error({ err }, 'origo sent an unusable token key'));
          },
        });
        peers.sink = link;
        link.start();
      } else {
        logger.warn('no origo URL: serving the HTTP endpoints only');
      }
      return { httpUrl, ...(quicUrl ? { quicUrl } : {}) };
    },
    async drain(timeoutMs = config.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS) {
      if (!admission.draining) {
        admission.startDraining();
        peers.goAway(DRAINING_REASON);
        link?.heartbeatNow();
        logger.info(
          { activeTransfers: admission.activeTransfers, timeoutMs },
          'draining: new clients and transfers refused, waiting for the active transfers',
        );
      }
      const left = await transfersDone(admission, timeoutMs);
      if (left > 0) logger.warn({ transfers: left, timeoutMs }, 'drain timeout: closing with transfers still active');
      else logger.info('drained: no transfer left');
      return left;
    },
    async close() {
      if (closed) return;
      closed = true;
      abort.abort();
      stager.close();
      peers.closeAll();
      await quic?.close();
      await link?.close();
      if (server) {
        const s = server;
        s.closeIdleConnections();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => s.closeAllConnections(), 2000);
          s.close(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
      logger.info('proxy closed');
    },
  };
}

/** http://host:port; a wildcard bind advertises the first external IPv4 address. */
function deriveHttpUrl(host: string, port: number): string {
  let h = host;
  if (h === '0.0.0.0' || h === '::' || h === '') {
    h = '127.0.0.1';
    for (const list of Object.values(networkInterfaces())) {
      const external = list?.find((a) => a.family === 'IPv4' && !a.internal);
      if (external) {
        h = external.address;
        break;
      }
    }
  }
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}
