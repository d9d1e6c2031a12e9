/**
 * One QUIC session as the data channel a TransferHost serves: sends go out as datagrams,
 * `bufferedAmount` is the session's datagram send buffer (late binding), the low-water wake-up
 * comes from the server.
 */
import { DATA_CHANNEL_LABEL, type DatagramChannel } from '@mutp/shared';

/** Datagram bytes the proxy keeps queued in a session (TransferHost's low-water mark). */
export const QUIC_LOW_WATER_BYTES = 16 * 1024;

/**
 * What one queued datagram adds to the native send-buffer count at most besides its payload:
 * wtransport's header before it (a varint of the session's quarter stream id, 8 bytes at most).
 */
export const QUIC_DATAGRAM_OVERHEAD_BYTES = 8;

/** What a session channel asks of the QUIC server its session belongs to (quic-service.ts). */
export interface QuicSessionServer {
  sendDatagram(sessionId: number, bytes: Uint8Array): boolean;
  /** Bytes queued for the session and not yet sent (0 when it is gone). */
  bufferedBytes(sessionId: number): number;
  setLowWaterMark(sessionId: number, bytes: number): void;
  closeSession(sessionId: number, code: number, reason: string): void;
}

export class QuicSessionChannel implements DatagramChannel {
  readonly label = DATA_CHANNEL_LABEL;
  /**
   * The low-water wake-up comes from the native side's poll (every 1 ms) through a threadsafe
   * call, behind whatever the JS thread is doing: 4.8 KB (2.6 ms at 1792 KB/s) ran dry between
   * wake-ups; 16 KB keeps ~9 ms queued, still a fraction of a round trip for late binding.
   */
  readonly preferredLowWater = QUIC_LOW_WATER_BYTES;
  onOpen?: () => void;
  onMessage?: (bytes: Uint8Array) => void;
  onClose?: (reason?: string) => void;
  private open = true;
  private onLow?: () => void;
  /** The native send copies the datagram into the session's queue before it returns. */
  readonly copiesOnSend = true;
  /**
   * At least the bytes the session holds queued: the native count when last read plus what was
   * sent since (the runtime only drains the queue meanwhile); Infinity when unknown. Each native
   * reading takes quinn's connection lock, which its runtime thread holds while it handles
   * packets: the pump's check before every datagram was one such reading per datagram (issue 33).
   */
  private queuedAtMost = Infinity;

  constructor(
    private readonly server: QuicSessionServer,
    private readonly sessionId: number,
  ) {}

  get isOpen(): boolean {
    return this.open;
  }

  /**
   * The session's queued bytes, or a bound above them that is still below `preferredLowWater`:
   * whoever compares it with that mark decides as with the exact count, which is read only when
   * the bound reaches the mark.
   */
  get bufferedAmount(): number {
    if (!this.open) return 0;
    if (this.queuedAtMost < this.preferredLowWater) return this.queuedAtMost;
    this.queuedAtMost = this.server.bufferedBytes(this.sessionId);
    return this.queuedAtMost;
  }

  send(bytes: Uint8Array): boolean {
    if (!this.open || !this.server.sendDatagram(this.sessionId, bytes)) return false;
    this.queuedAtMost += bytes.length + QUIC_DATAGRAM_OVERHEAD_BYTES;
    return true;
  }

  setLowWaterMark(bytes: number, onLow: () => void): void {
    this.onLow = onLow;
    this.server.setLowWaterMark(this.sessionId, bytes);
  }

  drained(): void {
    if (!this.open) return;
    // The queue drained to the mark: the next check reads how far.
    this.queuedAtMost = Infinity;
    this.onLow?.();
  }

  /** The TransferHost closes its channel: the session goes. */
  close(): void {
    this.closeSession('closed by the proxy');
  }

  closeSession(reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.server.closeSession(this.sessionId, 0, reason.slice(0, 120));
  }

  closedByPeer(reason: string): void {
    if (!this.open) return;
    this.open = false;
    this.onClose?.(reason);
  }
}
