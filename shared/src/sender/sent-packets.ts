/**
 * The DATA packets this source has sent and not yet retired, by sequence number, in a ring of
 * (unit, sent-at) records. Feedback's acks retire them as delivered or lost (QUIC's packet and
 * time thresholds); silence expires them. What stays live is what is in flight, per unit and in
 * all; what retires counts toward the measured loss rate.
 */

const RING = 8192; // > maxInFlightPackets, so live records never collide

/** The counters of SenderStats this part keeps. */
interface LossStats {
  lost: number;
  expired: number;
}

export class SentPackets {
  /** The sequence number the next DATA gets. */
  nextSeq = 0;
  /** Own packets in flight. */
  inFlight = 0;
  lostPackets = 0;
  private deliveredPackets = 0;
  readonly transit: Uint16Array; // own packets in transit per unit
  readonly delivered: Uint16Array; // own packets per unit the client acknowledged
  private readonly ringUnit = new Int32Array(RING);
  private readonly ringSentAt = new Float64Array(RING);
  private readonly ringLive = new Uint8Array(RING);
  private largestAcked = -1;
  private oldestLive = 0; // every seq below is not live

  constructor(
    unitCount: number,
    private readonly reorderThreshold: number,
    private readonly stats: LossStats,
  ) {
    this.transit = new Uint16Array(unitCount);
    this.delivered = new Uint16Array(unitCount);
  }

  /** `seq` was sent by this source and its record is still in the ring. */
  holds(seq: number): boolean {
    return seq < this.nextSeq && this.nextSeq - seq <= RING;
  }

  /** When packet `seq` (one the ring holds) was sent. */
  sentAt(seq: number): number {
    return this.ringSentAt[seq & (RING - 1)];
  }

  /** Acknowledged `seq` is the largest so far (so its ack is an RTT sample). */
  raiseLargestAcked(seq: number): boolean {
    if (seq <= this.largestAcked) return false;
    this.largestAcked = seq;
    return true;
  }

  /** DATA `nextSeq`, of `unit`, goes out now. */
  onSent(unit: number, now: number): void {
    const slot = this.nextSeq++ & (RING - 1);
    this.ringUnit[slot] = unit;
    this.ringSentAt[slot] = now;
    this.ringLive[slot] = 1;
    this.transit[unit]++;
    this.inFlight++;
  }

  /** The client discarded what it had of `unit` (a rewind): its earlier deliveries count no more. */
  forgetDelivered(unit: number): void {
    this.delivered[unit] = 0;
  }

  /**
   * Retire packets the feedback accounts for: delivered ones (largestSeq and the ackBits below it)
   * at once; missing ones as lost once `reorderThreshold` later packets have arrived, or when they
   * are older than the 32 packets ackBits covers.
   */
  retireAcknowledged(largest: number, ackBits: number, now: number, smoothedRttMs: number): void {
    for (let seq = Math.max(this.oldestLive, largest - 32); seq <= largest; seq++) {
      if (seq === largest || (ackBits >>> (largest - 1 - seq)) & 1) this.retire(seq, 'delivered');
    }
    const lostUpTo = largest - this.reorderThreshold;
    for (let seq = this.oldestLive; seq <= lostUpTo; seq++) this.retire(seq, 'lost');
    // Time threshold (as QUIC): a missing packet sent well over an RTT ago is lost even when
    // fewer than reorderThreshold packets followed it, as before a pause in sending.
    const sentBefore = now - (9 / 8) * smoothedRttMs;
    for (let seq = Math.max(this.oldestLive, lostUpTo + 1); seq < largest; seq++) {
      if (this.ringSentAt[seq & (RING - 1)] <= sentBefore) this.retire(seq, 'lost');
    }
    while (this.oldestLive < this.nextSeq && !this.ringLive[this.oldestLive & (RING - 1)]) this.oldestLive++;
  }

  /** Expire the packets sent `timeoutMs` or longer before `now` that no feedback accounted for. */
  expireStale(now: number, timeoutMs: number): void {
    while (this.oldestLive < this.nextSeq) {
      const slot = this.oldestLive & (RING - 1);
      // Same expression as the Sender's nextDeadline(), so a timeout at that deadline always expires the packet.
      if (this.ringLive[slot] && this.ringSentAt[slot] + timeoutMs > now) break;
      this.retire(this.oldestLive++, 'expired');
    }
  }

  /** When the oldest packet still in flight was sent; Infinity when none is. */
  oldestSentAt(): number {
    if (this.inFlight > 0) {
      for (let seq = this.oldestLive; seq < this.nextSeq; seq++) {
        const slot = seq & (RING - 1);
        if (this.ringLive[slot]) return this.ringSentAt[slot];
      }
    }
    return Infinity;
  }

  /** Measured loss; a prior of 20 delivered packets keeps one early loss from looking like 50%. */
  lossRate(): number {
    return this.lostPackets / (this.lostPackets + this.deliveredPackets + 20);
  }

  private retire(seq: number, outcome: 'delivered' | 'lost' | 'expired'): void {
    const slot = seq & (RING - 1);
    if (!this.ringLive[slot]) return;
    this.ringLive[slot] = 0;
    const unit = this.ringUnit[slot];
    this.transit[unit]--;
    this.inFlight--;
    if (outcome === 'delivered') {
      this.delivered[unit]++;
      this.deliveredPackets++;
    } else {
      this.lostPackets++;
      this.stats.lost++;
      if (outcome === 'expired') this.stats.expired++;
    }
  }
}
