/**
 * Which transport a proxy link gets. QUIC datagrams (no SCTP window that halves on every random
 * loss, one handshake instead of ICE + DTLS + SCTP) are preferred where the proxy offers them and
 * the host can open them; WebRTC is the fallback. The fallback must not cost much when UDP to the
 * QUIC port is blocked (nothing answers, the handshake only times out), so WebRTC starts as soon
 * as QUIC fails or has had a head start without opening, and whichever opens first carries the
 * link (QUIC when both are open at once); the other is closed.
 */
import { ClientError } from './errors';
import { Clock } from './host';
import { ConnectTimeoutError, LinkTransport } from './link-transport';

export type TransportPreference = 'auto' | 'quic' | 'webrtc';

/** How long QUIC has alone before WebRTC starts beside it (a blocked UDP port costs at most this). */
export const QUIC_HEAD_START_MS = 1000;

type Opener = () => Promise<LinkTransport>;

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
