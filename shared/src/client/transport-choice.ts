/**
 * Which transport a proxy link gets. QUIC datagrams (no SCTP window that halves on every random
 * loss, one handshake instead of ICE + DTLS + SCTP) are preferred where the proxy offers them and
 * the host can open them; WebRTC is the fallback. The fallback must not cost much when UDP to the
 * QUIC port is blocked (nothing answers, the handshake only times out), so WebRTC starts as soon
 * as QUIC fails or has had a head start without opening, and whichever opens first carries the
 * link (QUIC when both are open at once); the other is closed.
 */
import { ProxyInfo } from '..';
import { ClientError } from './errors';
import { ClientHost, Clock } from './host';
import { ConnectTimeoutError, LinkTransport, openQuicTransport, openWebRtcTransport } from './link-transport';
import { OrigoSession } from './origo-session';

export type TransportPreference = 'auto' | 'quic' | 'webrtc';

/** How long QUIC has alone before WebRTC starts beside it (a blocked UDP port costs at most this). */
export const QUIC_HEAD_START_MS = 1000;

/** A proxy whose QUIC endpoint failed is reached over WebRTC alone for this long (no head start wasted). */
const QUIC_FAILURE_MEMORY_MS = 60_000;

type Opener = () => Promise<LinkTransport>;

const why = (e: unknown) => (e instanceof Error ? e.message : String(e));

/** Opens a client's transports to proxies, by its preference, remembering whose QUIC failed. */
export class TransportOpener {
  /** Proxies whose QUIC endpoint failed, by when: WebRTC alone for a while. */
  private readonly quicFailedAt = new Map<string, number>();
  private nextLink = 0;

  constructor(
    private readonly host: ClientHost,
    private readonly config: { transport?: TransportPreference; trace?: (line: string) => void },
  ) {}

  /** A transport to `proxy` by the configured preference (QUIC first where it can be had). */
  open(session: OrigoSession, proxy: ProxyInfo, timeoutMs: number): Promise<LinkTransport> {
    const clock = this.host.clock;
    const preference = this.config.transport ?? 'auto';
    const webrtc = () => openWebRtcTransport(session, this.host.rtc, proxy, this.connectionId(), clock, timeoutMs);
    const quicOpener = this.host.quic;
    const token = session.tokenFor(proxy);
    if (preference === 'webrtc') return webrtc();
    if (proxy.quic === undefined || quicOpener === undefined || token === undefined) {
      if (preference === 'auto') return webrtc();
      const missing = proxy.quic === undefined ? 'it offers no QUIC endpoint' : 'this client cannot open QUIC';
      return Promise.reject(new ClientError('connect-failed', `proxy ${proxy.name}: ${missing}`));
    }
    const quic = () =>
      openQuicTransport(quicOpener, proxy, token, clock, timeoutMs).catch((e: unknown) => {
        this.quicFailedAt.set(proxy.proxyId, clock.now());
        this.config.trace?.(`${proxy.name}: QUIC failed (${why(e)})`);
        throw e;
      });
    if (preference === 'quic') return quic();
    const failedAt = this.quicFailedAt.get(proxy.proxyId);
    if (failedAt !== undefined && clock.now() - failedAt < QUIC_FAILURE_MEMORY_MS) return webrtc();
    this.quicFailedAt.delete(proxy.proxyId);
    return openPreferringQuic(quic, webrtc, clock);
  }

  private connectionId(): string {
    return `c${(this.host.random() >>> 0).toString(36)}${this.nextLink++}`;
  }
}

/**
 * Opens `quic` and, after its head start or its failure, `webrtc`; resolves with the first to
 * open, rejects when both failed (with both reasons).
 */
export function openPreferringQuic(
  quic: Opener,
  webrtc: Opener,
  clock: Clock,
  headStartMs = QUIC_HEAD_START_MS,
): Promise<LinkTransport> {
  return new Promise<LinkTransport>((resolve, reject) => {
    let chosen: LinkTransport | undefined;
    let webrtcStarted = false;
    const failures: { kind: string; error: unknown }[] = [];
    let pending = 1;
    const opened = (t: LinkTransport) => {
      if (chosen !== undefined) {
        t.close('another transport opened first');
        return;
      }
      chosen = t;
      cancelHeadStart();
      resolve(t);
    };
    const failed = (kind: string, e: unknown) => {
      failures.push({ kind, error: e });
      if (--pending === 0 && chosen === undefined && webrtcStarted) reject(bothFailed(failures));
      else if (kind === 'quic') startWebRtc();
    };
    const startWebRtc = () => {
      if (webrtcStarted || chosen !== undefined) return;
      webrtcStarted = true;
      pending++;
      webrtc().then(opened, (e: unknown) => failed('webrtc', e));
    };
    const cancelHeadStart = clock.setTimer(headStartMs, startWebRtc);
    quic().then(opened, (e: unknown) => failed('quic', e));
  });
}

/** Both failed: a timeout when both timed out (the proxy may just be unreachable), else connect-failed. */
function bothFailed(failures: { kind: string; error: unknown }[]): ClientError {
  const message = failures
    .map(
      ({ kind, error }) =>
        `${kind}: ${(error instanceof Error ? error.message : String(error)).replace(/^connect-failed: /, '')}`,
    )
    .join('; ');
  if (failures.every((f) => f.error instanceof ConnectTimeoutError)) return new ConnectTimeoutError(message);
  return new ClientError('connect-failed', message);
}
