/**
 * The proxy's test helpers: loopback WebRTC pairs and an MUTP client over real channels. Local
 * origins, bounded waits and the in-process proxy's config are shared with other workspaces'
 * tests, so they live in @mutp/testing and are re-exported here.
 */
import { Codec, type DatagramChannel, Mode, Receiver, type RtcFactory, type RtcPeer } from '@mutp/shared';
import { until } from '@mutp/testing/wait';
import { ServeError, ServeErrorKind } from '../src/errors';

export { makeObject, objectOrigin, startServer, type TestServer } from '@mutp/testing/origin';
export { LOOPBACK_ONLY, silentLogger, testConfig } from '@mutp/testing/proxy';
export { until, within } from '@mutp/testing/wait';

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
  /** The sources' keys and declared features, as origo's offer would give them. */
  receiver?: Pick<ConstructorParameters<typeof Receiver>[0], 'signers' | 'sourceCapabilities'>;
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
    ...o.receiver,
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

/** A well-formed Ed25519 public key for OrigoLink options (origo only passes it on). */
export const TEST_ASSERTION_KEY = 'A'.repeat(43);

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
