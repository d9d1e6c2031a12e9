/**
 * The browser's QUIC transport: a WebTransport session to a proxy's QUIC endpoint, MUTP messages
 * as its datagrams. The proxy's self-signed certificate is accepted only by the hashes origo gave
 * (`serverCertificateHashes`, Chrome >= 100, Firefox >= 125), as the DTLS fingerprint in the SDP
 * authenticates it on WebRTC; a proxy offered without hashes has a CA's certificate, which the
 * browser validates as for any https site. Datagrams are read in a loop that only queues them, with
 * a deep incoming queue, so a burst is not dropped before the frame gets to it; they reach the
 * link in batches (datagram-batches.ts), so the core answers a batch, not every datagram.
 */
import type { LinkTransport, QuicTarget } from '@mutp/shared/client';
import { BatchCounters, DatagramBatches, frameTasks, readInto, ScheduleTask } from './datagram-batches';

/** Datagrams the browser may queue for the reader (its default is small: a burst would be dropped). */
const INCOMING_HIGH_WATER_MARK = 4096;
/** Datagrams waiting to be sent before new ones are dropped (the proxy paces; requests and feedback are small). */
const OUTGOING_HIGH_WATER_MARK = 256;

function hashBytes(base64: string): Uint8Array<ArrayBuffer> {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

/** One scheduler for every link of the frame (its MessageChannel is made once, when first hidden). */
const nextTask: ScheduleTask = frameTasks();

/** Every WebTransport link's batches and sends in this frame (profile:browser reads them). */
export const datagramBatchCounters: BatchCounters & { sent: number } = {
  datagrams: 0,
  batches: 0,
  largestBatch: 0,
  sent: 0,
};

/** Whether this browser has WebTransport with certificate hashes at all. */
export function webTransportAvailable(): boolean {
  return typeof WebTransport === 'function';
}

export async function openWebTransport(target: QuicTarget): Promise<LinkTransport> {
  if (!webTransportAvailable()) throw new Error('this browser has no WebTransport');
  const hashes: readonly string[] | undefined = target.certificateHashes;
  const session = new WebTransport(
    target.url,
    hashes !== undefined && hashes.length > 0
      ? { serverCertificateHashes: hashes.map((h) => ({ algorithm: 'sha-256', value: hashBytes(h) })) }
      : {},
  );
  try {
    await session.ready;
  } catch (e) {
    throw new Error(`WebTransport: ${e instanceof Error ? e.message : String(e)}`);
  }
  return new WebTransportLink(session);
}

class WebTransportLink implements LinkTransport {
  readonly kind = 'quic';
  onDatagram?: (bytes: Uint8Array, receivedAt?: number) => void;
  onClose?: (reason: string) => void;
  private open = true;
  private closedByUs = false;
  private readonly writer: WritableStreamDefaultWriter<Uint8Array>;
  private readonly batches = new DatagramBatches(
    (bytes, receivedAt) => {
      if (this.open) this.onDatagram?.(bytes, receivedAt);
    },
    nextTask,
    () => performance.now(),
    datagramBatchCounters,
  );

  constructor(private readonly session: WebTransport) {
    const datagrams = session.datagrams as WebTransportDatagramDuplexStream & {
      incomingHighWaterMark?: number;
      outgoingHighWaterMark?: number;
    };
    datagrams.incomingHighWaterMark = INCOMING_HIGH_WATER_MARK;
    datagrams.outgoingHighWaterMark = OUTGOING_HIGH_WATER_MARK;
    this.writer = datagrams.writable.getWriter();
    void readInto(datagrams.readable.getReader(), this.batches);
    session.closed.then(
      (info) => this.ended(info.reason || 'session closed'),
      (e: unknown) => this.ended(e instanceof Error ? e.message : String(e)),
    );
  }

  get isOpen(): boolean {
    return this.open;
  }

  send(bytes: Uint8Array): boolean {
    if (!this.open) return false;
    datagramBatchCounters.sent++;
    // Unreliable: a datagram the browser cannot queue is dropped, as on the network.
    this.writer.write(bytes).catch(() => undefined);
    return true;
  }

  close(reason = 'closed by the client'): void {
    if (!this.open) return;
    this.open = false;
    this.closedByUs = true;
    this.batches.close();
    try {
      this.session.close({ closeCode: 0, reason: reason.slice(0, 100) });
    } catch {
      // Already closed under us.
    }
  }

  private ended(reason: string): void {
    if (this.closedByUs || !this.open) return;
    this.open = false;
    this.batches.close();
    this.onClose?.(reason);
  }
}
