/**
 * The ERROR datagrams a source endpoint sends: queued for the caller to send on any channel, not
 * paced and bounded (beyond `maxControlQueue` the oldest are dropped), and its REQUEST refusals
 * remembered for a while, so a REQUEST repeated because its ERROR was lost gets the same answer
 * without a new fetch.
 */
import { encodeError, RequestMessage } from '../wire';

export interface ErrorReplyLimits {
  /** Control datagrams (ERRORs) waiting to be sent; beyond, the oldest are dropped. */
  maxControlQueue: number;
  /** Refusals remembered so a repeated REQUEST gets the same answer without a new fetch. */
  maxRecentErrors: number;
  recentErrorMs: number;
}

interface RecentError {
  url: string;
  datagram: Uint8Array;
  at: number;
}

export class ErrorReplies {
  private readonly control: Uint8Array[] = [];
  private readonly recentErrors = new Map<number, RecentError>();

  constructor(private readonly limits: ErrorReplyLimits) {}

  /** Queues a control datagram; false when the queue was full and its oldest datagram was dropped. */
  queue(datagram: Uint8Array): boolean {
    let kept = true;
    if (this.control.length >= this.limits.maxControlQueue) {
      this.control.shift();
      kept = false;
    }
    this.control.push(datagram);
    return kept;
  }

  /** The next control datagram to send, or null. */
  poll(): Uint8Array | null {
    return this.control.shift() ?? null;
  }

  /** The ERROR this REQUEST (same transfer, same URL) got a moment ago, if any: the answer again. */
  recentAnswer(request: RequestMessage, now: number): Uint8Array | undefined {
    const recent = this.recentErrors.get(request.transferId);
    return recent && recent.url === request.url && now - recent.at < this.limits.recentErrorMs
      ? recent.datagram
      : undefined;
  }

  /** Remembers the ERROR a REQUEST was refused with, for repeats of it. */
  remember(request: RequestMessage, datagram: Uint8Array, now: number): void {
    if (this.recentErrors.size >= this.limits.maxRecentErrors) {
      const oldest = this.recentErrors.keys().next().value;
      if (oldest !== undefined) this.recentErrors.delete(oldest);
    }
    this.recentErrors.delete(request.transferId);
    this.recentErrors.set(request.transferId, { url: request.url, datagram, at: now });
  }
}

/** An ERROR datagram; its message is clipped to what the wire format carries. */
export function errorDatagram(transferId: number, code: number, message: string): Uint8Array {
  return encodeError({ transferId, code, message: clip(message) });
}

/** ERROR messages are capped by the wire format; keep the start of a long one. */
export function clip(message: string): string {
  return message.length > 200 ? `${message.slice(0, 197)}...` : message;
}

export function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
