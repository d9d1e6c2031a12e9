/**
 * What FEEDBACK acknowledges of one source's data: the largest sequence number received, when,
 * and which of the 32 before it arrived (bit i = seq largestSeq - 1 - i), as in QUIC's ACK frame
 * but fixed-size. The source derives its losses and RTT from it.
 */
export class AckTracker {
  /** -1 until the first data packet. */
  largestSeq = -1;
  largestSeqAt = 0;
  ackBits = 0;

  record(seq: number, now: number): void {
    const largest = this.largestSeq;
    if (largest < 0 || seq > largest) {
      const shift = largest < 0 ? 64 : seq - largest;
      if (shift > 32) this.ackBits = 0;
      else if (shift === 32) this.ackBits = 0x80000000;
      else this.ackBits = ((this.ackBits << shift) | (1 << (shift - 1))) >>> 0;
      this.largestSeq = seq;
      this.largestSeqAt = now;
      return;
    }
    const back = largest - 1 - seq;
    if (back >= 0 && back < 32) this.ackBits = (this.ackBits | (1 << back)) >>> 0;
  }
}
