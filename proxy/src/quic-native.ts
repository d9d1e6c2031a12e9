/**
 * The QUIC service's server and certificates from @mutp/quic (wtransport on quinn, our MutpRate
 * congestion controller), behind the QuicServerApi seam of quic-service.ts.
 */
import { generateCertificate, QuicServer } from '@mutp/quic';
import type { QuicCertificate } from './quic-certificates';
import type { QuicListenOptions, QuicServerApi } from './quic-service';

/** Sessions waiting for their token check at once; more are refused by the QUIC stack itself. */
const MAX_PENDING_SESSIONS = 64;
/**
 * From this many pending, a connection attempt from an unvalidated address gets a stateless Retry
 * first (quic/README.md "Address validation"): a flood from forged sources then holds no slot.
 */
const RETRY_ABOVE_PENDING_SESSIONS = 16;
/** Sessions at once: the peer limits decide below this (PeerManager); this bounds the native side. */
const MAX_SESSIONS = 4096;
/**
 * First PTO of a handshake is three times this: low so a handshake survives heavy loss in seconds
 * (quinn's default 333 ms makes its retransmissions 1, 2, 4 s apart).
 */
const INITIAL_RTT_MS = 100;

export async function listenNative(o: QuicListenOptions): Promise<QuicServerApi> {
  const server = await QuicServer.listen({
    host: o.host,
    port: o.port,
    certificatePem: o.certificate.certificatePem,
    privateKeyPem: o.certificate.privateKeyPem,
    maxSessions: MAX_SESSIONS,
    maxPendingSessions: MAX_PENDING_SESSIONS,
    retryAbovePendingSessions: RETRY_ABOVE_PENDING_SESSIONS,
    initialRttMs: INITIAL_RTT_MS,
    rate: o.maxRateBps > 0 ? { maxRateBps: o.maxRateBps, initialRateBps: o.maxRateBps } : undefined,
    onSessionRequest: (r) => o.events.onSessionRequest(r),
    onDatagram: (id, data) => o.events.onDatagram(id, data),
    onSendBufferLow: (id) => o.events.onSendBufferLow(id),
    onSessionClosed: (id, _code, reason) => o.events.onSessionClosed(id, reason || 'closed'),
  });
  return {
    get port() {
      return server.port;
    },
    acceptSession: (id) => {
      server.acceptSession(id);
    },
    rejectSession: (id, status) => {
      server.rejectSession(id, status);
    },
    sendDatagram: (id, bytes) => server.sendDatagram(id, bytes),
    bufferedBytes: (id) => server.bufferedBytes(id),
    setLowWaterMark: (id, bytes) => {
      server.setLowWaterMark(id, bytes);
    },
    closeSession: (id, code, reason) => {
      server.closeSession(id, code, reason);
    },
    reloadCertificate: (certificatePem, privateKeyPem) => server.reloadCertificate(certificatePem, privateKeyPem),
    close: () => server.close(),
  };
}

/** A self-signed ECDSA P-256 certificate for `names`, valid `validityDays` from now. */
export function nativeCertificate(names: string[], validityDays: number): QuicCertificate {
  const c = generateCertificate({ names: [...new Set(names)], validityDays });
  return {
    certificatePem: c.certificatePem,
    privateKeyPem: c.privateKeyPem,
    sha256: c.sha256,
    notBefore: c.notBefore,
    notAfter: c.notAfter,
  };
}
