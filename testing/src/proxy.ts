/**
 * A real proxy in-process for tests: its configuration for loopback (ephemeral ports, quiet, no
 * origo unless given), the origin policy for local test origins, and a silent logger.
 */
import type { createProxy, Proxy, ProxyDeps } from '@mutp/proxy';
import pino from 'pino';

export type { Proxy } from '@mutp/proxy';

/** The proxy's configuration, as its public entry takes it. */
export type ProxyConfig = Parameters<typeof createProxy>[0];

export const silentLogger = () => pino({ level: 'silent' });

/** Only loopback besides public addresses: tests never reach any other address. */
export const LOOPBACK_ONLY: ReadonlySet<'loopback'> = new Set(['loopback'] as const);

/** A proxy config for in-process tests: ephemeral port on 127.0.0.1, quiet, no origo. */
export function testConfig(over: Partial<ProxyConfig> = {}): ProxyConfig {
  return {
    secret: 'test-secret',
    name: 'test-proxy',
    httpPort: 0,
    httpHost: '127.0.0.1',
    iceBind: '127.0.0.1',
    iceUdpMux: false,
    quicCertificateDays: 14,
    cacheBytes: 32 << 20,
    transferMemoryBytes: 64 << 20,
    maxOriginFetches: 32,
    maxStaging: 16,
    maxStagingPerClient: 4,
    minSymbolSize: 256,
    peerIdleTimeoutMs: 30_000,
    maxObjectBytes: 8 << 20,
    uploadLimitKBps: 0,
    uploadBurstBytes: 0,
    pacingQuantumMs: 0,
    allowedOrigins: '*',
    allowPrivateOrigins: false,
    insecure: false,
    // Test origins listen on ephemeral loopback ports.
    originPorts: '*',
    corsOrigins: [],
    maxTransfers: 64,
    maxTransfersPerClient: 16,
    maxPeers: 16,
    maxPeersPerClient: 4,
    // Every test client is on loopback: one network (the shares have their own tests).
    minNetworks: 1,
    originTimeoutMs: 5000,
    originTotalTimeoutMs: 10_000,
    logLevel: 'silent',
    ...over,
  };
}

/**
 * createProxy(testConfig(over)) with a silent logger and loopback origins allowed, unless `deps`
 * say otherwise. The proxy is loaded here, not above: unit tests that take only the config or the
 * logger from this module do not load node-datachannel and the QUIC addon with it.
 */
export async function createTestProxy(over: Partial<ProxyConfig> = {}, deps: ProxyDeps = {}): Promise<Proxy> {
  const proxyPackage = await import('@mutp/proxy');
  return proxyPackage.createProxy(testConfig(over), { logger: silentLogger(), allowedClasses: LOOPBACK_ONLY, ...deps });
}
