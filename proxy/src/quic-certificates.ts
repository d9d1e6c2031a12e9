/**
 * The QUIC endpoint's certificates without a CA: self-signed ECDSA P-256, valid at most 14 days
 * (what WebTransport's `serverCertificateHashes` accepts), rotated before they expire. Clients
 * authenticate the proxy by the certificates' SHA-256, which the proxy reports to origo and origo
 * hands out with each offer, so a rotation is announced before it happens:
 *
 *   age 0          V/2                    3V/4              V
 *   |-- current ---|-- current + next ----|-- next (now current) ...
 *
 * At half its validity the next certificate is made and both hashes are reported; at three
 * quarters the endpoint switches to it (new handshakes present it) and the old hash is dropped. A
 * client holding an offer from the last quarter-validity (days) accepts either.
 */

export interface QuicCertificate {
  certificatePem: string;
  privateKeyPem: string;
  /** SHA-256 of the certificate's DER. */
  sha256: Uint8Array;
  /** Validity, ms since the epoch. */
  notBefore: number;
  notAfter: number;
}

export const MAX_CERTIFICATE_DAYS = 14;
const DAY_MS = 86_400_000;

export interface CertificateRotationOptions {
  /** 1–14. */
  validityDays: number;
  /** Makes a new certificate valid from now for `validityDays`. */
  generate: (validityDays: number) => QuicCertificate;
  /** Wall-clock time, ms since the epoch (certificates' validity is wall-clock). */
  now: () => number;
  /** The endpoint must present `certificate` to new handshakes from now on. */
  onSwitch: (certificate: QuicCertificate) => void;
  /** The hashes to report changed (a next certificate announced, or the switch made). */
  onHashesChanged?: (hashes: string[]) => void;
}

export class CertificateRotation {
  private current: QuicCertificate;
  private next?: QuicCertificate;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly o: CertificateRotationOptions) {
    if (!Number.isInteger(o.validityDays) || o.validityDays < 1 || o.validityDays > MAX_CERTIFICATE_DAYS)
      throw new RangeError(`QUIC certificate validity must be 1-${MAX_CERTIFICATE_DAYS} days, got ${o.validityDays}`);
    this.current = o.generate(o.validityDays);
  }

  /** The certificate new handshakes get now. */
  get certificate(): QuicCertificate {
    return this.current;
  }

  /** What to report to origo: the current certificate's hash, then the next one's when announced. */
  hashes(): string[] {
    return [this.current, ...(this.next ? [this.next] : [])].map((c) => base64(c.sha256));
  }

  /** Runs the schedule on timers until stop(). */
  start(): void {
    this.stopped = false;
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Brings the rotation up to `now` (the timers call it; tests call it with their own time). */
  advance(): void {
    const now = this.o.now();
    const { notBefore, notAfter } = this.current;
    const lifetime = notAfter - notBefore;
    if (this.next === undefined && now >= notBefore + lifetime / 2) {
      this.next = this.o.generate(this.o.validityDays);
      this.o.onHashesChanged?.(this.hashes());
    }
    if (this.next !== undefined && now >= notBefore + (3 * lifetime) / 4) {
      this.current = this.next;
      this.next = undefined;
      this.o.onSwitch(this.current);
      this.o.onHashesChanged?.(this.hashes());
      // A clock that jumped far ahead may be past the new certificate's half-life too.
      this.advance();
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    const { notBefore, notAfter } = this.current;
    const lifetime = notAfter - notBefore;
    const due = this.next === undefined ? notBefore + lifetime / 2 : notBefore + (3 * lifetime) / 4;
    // At least a second (a clock set back must not spin), at most a day (a clock set forward is seen).
    const wait = Math.min(Math.max(due - this.o.now(), 1000), DAY_MS);
    this.timer = setTimeout(() => {
      this.advance();
      this.schedule();
    }, wait);
    this.timer.unref();
  }
}

export function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}
