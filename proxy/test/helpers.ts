/** Test helpers: local origins, loopback WebRTC pairs, an MUTP client over real channels. */
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Codec, type DatagramChannel, Mode, Receiver, type RtcFactory, type RtcPeer, seededRandom } from '@mutp/shared';
import pino from 'pino';
import { ServeError, ServeErrorKind } from '../src/errors';

export const silentLogger = () => pino({ level: 'silent' });

/** Rejects with a clear message when `promise` takes longer than `ms`. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
    }),
  ]);
}

/** Resolves when `condition()` holds (polled), or fails after `ms` naming `what`. */
export async function until(condition: () => boolean, ms: number, what: string): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Deterministic pseudo-random bytes. */
export function makeObject(size: number, seed: number): Uint8Array {
  const random = seededRandom(seed);
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i += 4) {
    const v = random();
    bytes[i] = v;
    if (i + 1 < size) bytes[i + 1] = v >>> 8;
    if (i + 2 < size) bytes[i + 2] = v >>> 16;
    if (i + 3 < size) bytes[i + 3] = v >>> 24;
  }
  return bytes;
}

export interface TestServer {
  server: Server;
  url: string;
  hits: number;
  close(): Promise<void>;
}

/** An HTTP server on 127.0.0.1, port 0, counting requests; close() drops every connection. */
export async function startServer(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<TestServer> {
  const server = createServer((req, res) => {
    result.hits++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const result: TestServer = {
    server,
    url: `http://127.0.0.1:${port}`,
    hits: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return result;
}

/** Origin serving fixed objects by path (others 404). */
export function objectOrigin(objects: Record<string, Uint8Array>, contentType = 'video/mp4') {
  return startServer((req, res) => {
    const body = objects[req.url ?? ''];
    if (!body) {
      res.writeHead(404).end('not here');
      return;
    }
    res.writeHead(200, { 'content-type': contentType, 'content-length': body.length });
    res.end(body);
  });
}

export interface LoopbackPair {
  offerer: RtcPeer;
  answerer: RtcPeer;
  data: DatagramChannel;
  feedback: DatagramChannel;
  /** The answerer's channels as they arrive. */
  remoteChannels: DatagramChannel[];
  close(): void;
}

/**
 * Two peers of `factory` in this process, descriptions and candidates exchanged directly. The
 * offerer creates both MUTP channels; `onRemoteChannel` sees the answerer's side of each.
 */
export function loopbackPair(factory: RtcFactory, onRemoteChannel?: (c: DatagramChannel) => void): LoopbackPair {
  const offerer = factory.createPeer('offerer');
  const answerer = factory.createPeer('answerer');
  const remoteChannels: DatagramChannel[] = [];
  offerer.onLocalDescription = (d) => answerer.setRemoteDescription(d);
  answerer.onLocalDescription = (d) => offerer.setRemoteDescription(d);
  offerer.onLocalCandidate = (c) => answerer.addRemoteCandidate(c);
  answerer.onLocalCandidate = (c) => offerer.addRemoteCandidate(c);
  answerer.onChannel = (c) => {
    remoteChannels.push(c);
    onRemoteChannel?.(c);
  };
  const data = offerer.createChannel('mutp-data');
  const feedback = offerer.createChannel('mutp-feedback');
  offerer.startOffer();
  return {
    offerer,
    answerer,
    data,
    feedback,
    remoteChannels,
    close() {
      offerer.close();
      answerer.close();
    },
  };
}

/**
 * A loopback pair whose four channels are open. libdatachannel 0.24 (node-datachannel 0.33.4)
 * loses about one loopback handshake in a few hundred: ICE connects before the remote
 * description is committed and the DTLS handshake fails (libdatachannel #1632, node-datachannel
 * #443; fixed upstream after 0.24.5, not released). The client retries a failed connection once
 * (MutpClient.linkTo); a rig does the same, so one lost handshake does not fail a test about
 * something else. A second failure fails, naming both peers' states.
 */
export async function connectedLoopbackPair(
  factory: RtcFactory,
  onRemoteChannel?: (c: DatagramChannel) => void,
  ms = 10_000,
): Promise<LoopbackPair> {
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 2; attempt++) {
    const pair = loopbackPair(factory, onRemoteChannel);
    const states: string[] = [];
    pair.offerer.onStateChange = (s) => states.push(`offerer ${s}`);
    const start = Date.now();
    const open = () =>
      pair.data.isOpen &&
      pair.feedback.isOpen &&
      pair.remoteChannels.length === 2 &&
      pair.remoteChannels.every((c) => c.isOpen);
    while (!open() && pair.offerer.state !== 'failed' && Date.now() - start < ms) {
      await new Promise((r) => setTimeout(r, 5));
    }
    if (open()) return pair;
    pair.close();
    failures.push(
      `attempt ${attempt}: ${states.join(', ') || 'no state change'}, answerer ${pair.answerer.state}, ` +
        `${pair.remoteChannels.length} channels at the answerer after ${Date.now() - start} ms`,
    );
  }
  throw new Error(`a loopback pair did not connect: ${failures.join('; ')}`);
}

export interface ClientSource {
  data: DatagramChannel;
  feedback: DatagramChannel;
}

export interface DownloadOptions {
  url: string;
  mode: Mode;
  codec: Codec;
  transferId?: number;
  window?: number;
  generationSize?: number;
  symbolSize?: number;
  /** Called on every datagram sent to a source (tests inject garbage here). */
  beforeSend?: (source: number, send: (bytes: Uint8Array) => void) => void;
}

/**
 * Runs the shared Receiver over real channels: datagrams from source i's channels go in, its
 * REQUEST / FEEDBACK / STOP go out on source i's feedback channel. Resolves with the receiver
 * when it is no longer active.
 */
export function download(sources: ClientSource[], o: DownloadOptions): Promise<Receiver> {
  const clock = () => performance.now();
  const rx = new Receiver({
    transferId: o.transferId ?? 7,
    url: o.url,
    mode: o.mode,
    sourceCount: sources.length,
    window: o.window ?? 256,
    generationSize: o.generationSize ?? 16,
    symbolSize: o.symbolSize ?? 1120,
    codec: o.codec,
    now: clock(),
  });
  return new Promise<Receiver>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let done = false;
    const flush = () => {
      if (done) return;
      const now = clock();
      for (let d = rx.pollDatagram(now); d; d = rx.pollDatagram(now)) {
        const channel = sources[d.source].feedback;
        o.beforeSend?.(d.source, (bytes) => channel.send(bytes));
        channel.send(d.bytes);
      }
      if (rx.status !== 'active') {
        done = true;
        clearTimeout(timer);
        // Let the STOPs leave before the caller closes the channels.
        setTimeout(() => resolve(rx), 20);
        return;
      }
      const deadline = rx.nextDeadline();
      clearTimeout(timer);
      if (deadline !== null)
        timer = setTimeout(
          () => {
            rx.handleTimeout(clock());
            flush();
          },
          Math.max(1, Math.ceil(deadline - now)),
        );
    };
    sources.forEach((s, i) => {
      const onMessage = (bytes: Uint8Array) => {
        if (done) return;
        rx.handleDatagram(i, bytes, clock());
        flush();
      };
      s.data.onMessage = onMessage;
      s.feedback.onMessage = onMessage;
    });
    flush();
  });
}

/** Resolves when every channel is open. */
export function allOpen(channels: DatagramChannel[], ms: number, what: string): Promise<void> {
  return until(() => channels.every((c) => c.isOpen), ms, what);
}

/** A proxy config for in-process tests: ephemeral port on 127.0.0.1, quiet, no origo. */
export function testConfig(
  over: Partial<import('../src/config').ProxyConfig> = {},
): import('../src/config').ProxyConfig {
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

/** A well-formed Ed25519 public key for OrigoLink options (origo only passes it on). */
export const TEST_ASSERTION_KEY = 'A'.repeat(43);

/** Only loopback besides public addresses: tests never reach any other address. */
export const LOOPBACK_ONLY: ReadonlySet<'loopback'> = new Set(['loopback'] as const);

/** A token verifier with a fresh Ed25519 key, and a signer of client tokens as origo makes them. */
export async function testTokens() {
  const { generateKeyPairSync } = await import('node:crypto');
  const { SignJWT } = await import('jose');
  const { ClientTokenVerifier } = await import('../src/client-tokens');
  const pair = generateKeyPairSync('ed25519');
  const jwk = pair.publicKey.export({ format: 'jwk' });
  const verifier = new ClientTokenVerifier();
  await verifier.setKey({ kty: 'OKP', crv: 'Ed25519', x: jwk.x! });
  const sign = (
    sub: string,
    expiresInSeconds = 300,
    key = pair.privateKey,
    audience = 'mutp-proxy',
    claims: Record<string, unknown> = {},
  ) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'EdDSA' })
      .setIssuer('mutp-origo')
      .setAudience(audience)
      .setSubject(sub)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + expiresInSeconds)
      .sign(key);
  return { verifier, sign };
}

/** Awaits `promise` and expects it to reject with a ServeError of `kind` (and, if given, that text). */
export async function expectKind(
  promise: Promise<unknown>,
  kind: ServeErrorKind,
  text?: string | RegExp,
): Promise<void> {
  let error: unknown;
  try {
    await promise;
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(ServeError);
  expect((error as ServeError).kind).toBe(kind);
  if (text) expect((error as ServeError).message).toMatch(text);
}
