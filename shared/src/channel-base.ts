/**
 * What the WebRTC adapters' channels (the browser's RTCDataChannel in the extension, node-datachannel
 * in node-rtc) have in common, written once: the DatagramChannel callbacks, opening and closing
 * reported once each, the close reason, the late-binding low-water wake-up.
 *
 * The per-datagram paths (send, bufferedAmount, isOpen, the platform's message event) stay in each
 * adapter, written directly against its platform: no extra call or allocation per datagram. They
 * read `closed` (a plain field) like every other check here.
 */
import type { DatagramChannel } from './transport';

export abstract class DatagramChannelBase implements DatagramChannel {
  onOpen?: () => void;
  onMessage?: (bytes: Uint8Array) => void;
  onClose?: (reason?: string) => void;
  /** Called once when the channel closes, before onClose (its peer connection forgets it). */
  onRelease?: () => void;

  /** Closed locally or by the platform: final, nothing is reported or sent after it. */
  protected closed = false;
  /** The platform's last error message: the reason given when the channel closes after it. */
  protected lastError?: string;
  private opened = false;
  private onLow?: () => void;

  constructor(readonly label: string) {}

  abstract readonly bufferedAmount: number;
  abstract readonly isOpen: boolean;
  abstract send(bytes: Uint8Array): boolean;

  setLowWaterMark(bytes: number, onLow: () => void): void {
    this.onLow = onLow;
    if (!this.closed) this.setPlatformLowWaterMark(Math.max(0, Math.floor(bytes)));
  }

  close(): void {
    if (this.closed) return;
    this.closePlatformChannel();
    this.markClosed('closed locally');
  }

  /** Sets the platform's buffered-amount-low threshold (whole bytes, not negative); must not throw. */
  protected abstract setPlatformLowWaterMark(bytes: number): void;

  /** Closes the platform's channel; must not throw (it may already be closed). */
  protected abstract closePlatformChannel(): void;

  /** The platform's buffered-amount-low event: the sender's wake-up, while the channel lives. */
  protected bufferedAmountLow(): void {
    if (!this.closed) this.onLow?.();
  }

  /** The platform's open event (or a channel handed over already open): reported once. */
  protected markOpen(): void {
    if (this.opened || this.closed) return;
    this.opened = true;
    this.onOpen?.();
  }

  /** The platform's close event, or a local close: reported once, with the reason. */
  protected markClosed(reason?: string): void {
    if (this.closed) return;
    this.closed = true;
    this.onRelease?.();
    this.onClose?.(reason);
  }
}
