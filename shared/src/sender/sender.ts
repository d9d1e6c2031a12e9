/**
 * MUTP sender: one transfer of one object from this source (proxy) to one client. Sans-IO: the
 * caller feeds received datagrams and the time, pulls datagrams when its channel can take one,
 * and calls handleTimeout at nextDeadline(). It owns the transfer and ties its parts together:
 *
 * - `SlotOwnership` (ownership.ts): which source owns each slot, and the pins of begun units;
 * - `SentPackets` (sent-packets.ts): the sent ring, what is in flight, losses and expiry;
 * - `ClientProgress` (progress.ts): the client's DoF per unit and this source's window;
 * - `PathState` (path-state.ts): the client's reported rate and cap, the RTT, the in-flight limit;
 * - `MetaAnnouncement` (announcement.ts): META and DIGESTS, repeated until acknowledged;
 * - `ResumeHold` (resume-hold.ts): a resumed transfer's DATA waits for the client's feedback;
 * - `DataWriter` (data-writer.ts): DATA datagrams; `SymbolDigestAnswers`: asked symbol digests.
 *
 * It is the schedulers' view (schedulers.ts): they read the parts' per-unit state through it
 * once per unit per packet, so it keeps direct references to those arrays.
 */
import { TransferError } from '../errors';
import { Layout } from '../layout';
import { Partition } from '../partition';
import { decode, FeedbackMessage, Message, MessageType, NO_SEQ, StopReason } from '../wire';
import { MetaAnnouncement } from './announcement';
import { DEFAULT_SENDER_CONFIG, SenderConfig } from './config';
import { DataWriter } from './data-writer';
import { SenderOptions, PathEstimate } from './options';
import { SlotOwnership } from './ownership';
import { PathState } from './path-state';
import { ClientProgress } from './progress';
import { ResumeHold } from './resume-hold';
import { RttEstimator } from './rtt';
import { createScheduler, Scheduler, ScheduleView } from './schedulers';
import { SentPackets } from './sent-packets';
import { SymbolDigestAnswers } from './symbol-digest-answers';

export { DEFAULT_SENDER_CONFIG } from './config';
export type { SenderConfig } from './config';
export type { MetaSigner, PathEstimate, SenderOptions } from './options';

export type SenderStatus = 'active' | 'done' | 'failed';

export interface SenderStats {
  dataSent: number;
  metaSent: number;
  bytesSent: number;
  expired: number;
  feedbackReceived: number;
  malformedReceived: number;
  /** Polls refused because the in-flight limit was reached (rate-based limit or the client's cap). */
  blockedByInFlight: number;
  /** Polls where the scheduler found nothing worth sending in the window. */
  nothingToSend: number;
  lost: number;
}

const FEEDBACK_TYPE = {
  uncoded: MessageType.FeedbackUncoded,
  rlnc: MessageType.FeedbackRlnc,
  fountain: MessageType.FeedbackFountain,
} as const;

export class Sender implements ScheduleView {
  readonly layout: Layout;
  readonly transferId: number;
  readonly sourceIndex: number;
  readonly sourceCount: number;
  readonly generationSize: number;
  status: SenderStatus = 'active';
  error?: TransferError;
  readonly stats: SenderStats = {
    dataSent: 0,
    metaSent: 0,
    bytesSent: 0,
    expired: 0,
    feedbackReceived: 0,
    malformedReceived: 0,
    blockedByInFlight: 0,
    nothingToSend: 0,
    lost: 0,
  };
  readonly rtt: RttEstimator;

  private readonly config: SenderConfig;
  private readonly scheduler: Scheduler;
  private readonly windowUnits: number;
  private readonly writer: DataWriter;
  private readonly symbolDigestAnswers: SymbolDigestAnswers;
  private readonly owners: SlotOwnership;
  private readonly sent: SentPackets;
  private readonly progress: ClientProgress;
  private readonly path: PathState;
  private readonly announcement: MetaAnnouncement;
  private readonly resumeHold = new ResumeHold();
  // The parts' per-unit arrays the scheduler view reads.
  private readonly ranks: Uint16Array;
  private readonly transit: Uint16Array;
  private readonly delivered: Uint16Array;
  private readonly enteredAt: Float64Array;
  private now: number;
  private newestFeedbackSeq = -1;
  private lastHeardAt: number;

  constructor(opts: SenderOptions) {
    const r = opts.request;
    this.config = { ...DEFAULT_SENDER_CONFIG, ...opts.config };
    this.transferId = r.transferId;
    this.sourceIndex = r.sourceIndex;
    this.sourceCount = r.sourceCount;
    this.generationSize = r.generationSize;
    this.layout = new Layout(r.mode, opts.object.length, r.symbolSize, r.generationSize);
    this.windowUnits = this.layout.windowUnits(r.window);
    this.writer = new DataWriter(opts.codec, opts.object, this.layout, r, opts.random);
    this.writer.datagramBuffer = opts.datagramBuffer;
    this.symbolDigestAnswers = new SymbolDigestAnswers(this.layout, opts.object, r.transferId, opts.sha256);
    this.scheduler = createScheduler(r.mode, r.scheduler, opts.random);
    const { unitCount } = this.layout;
    this.owners = new SlotOwnership(unitCount, r.sourceCount, r.weights);
    this.path = new PathState(this.config, r.symbolSize, opts.warmStart);
    this.rtt = this.path.rtt;
    this.sent = new SentPackets(unitCount, this.config.reorderThreshold, this.stats);
    this.now = opts.now;
    // A client resuming (it lost the connection this transfer's first incarnation ran on): what it
    // has is not sent again. Units below fromUnit are complete, and fountain block ids start past
    // those this source index sent before. A hostile client can only make this source send less.
    this.progress = new ClientProgress(
      this.layout,
      this.windowUnits,
      this.owners,
      this.sent,
      r.resume?.fromUnit ?? 0,
      opts.now,
    );
    if (r.resume) {
      this.writer.skipBlockRounds(r.resume.blockRound);
      this.resumeHold.start(opts.now + this.rtt.timeout(this.config.ackDelaySlackMs));
    }
    this.ranks = this.progress.ranks;
    this.enteredAt = this.progress.enteredAt;
    this.transit = this.sent.transit;
    this.delivered = this.sent.delivered;
    this.announcement = new MetaAnnouncement(opts, this.layout, this.rtt, this.config.ackDelaySlackMs, this.stats);
    this.lastHeardAt = opts.now;
  }

  /**
   * When set, DATA datagrams are built in this buffer and returned as views of it: each is valid
   * until the next pollDatagram (of any sender given the same buffer). For hosts whose channel
   * copies a datagram before send() returns: no allocation per packet. A datagram longer than
   * the buffer gets an array of its own.
   */
  get datagramBuffer(): Uint8Array | undefined {
    return this.writer.datagramBuffer;
  }
  set datagramBuffer(buffer: Uint8Array | undefined) {
    this.writer.datagramBuffer = buffer;
  }

  // ---- ScheduleView
  /** The current weights' partition (see SlotOwnership). */
  get partition(): Partition {
    return this.owners.partition;
  }
  get windowStart(): number {
    return this.progress.wMin;
  }
  get windowEnd(): number {
    return this.progress.windowEnd;
  }
  rank(unit: number): number {
    return this.ranks[unit];
  }
  unitSize(unit: number): number {
    return this.layout.unitSize(unit);
  }
  inTransit(unit: number): number {
    return this.transit[unit];
  }
  deliveredOwn(unit: number): number {
    return this.delivered[unit];
  }
  ownerOf(unit: number, slot: number): number {
    return this.owners.ownerOf(unit, slot);
  }
  redundancy(unit: number): number {
    if (this.sent.lostPackets === 0) return 0;
    const c = this.config;
    const size = this.layout.unitSize(unit);
    const bdp = this.path.transferBdpPackets(this.owners.partition.share(this.sourceIndex));
    // Before a rate estimate the BDP is unknown: every unit gets the plain allowance.
    if (bdp === 0) return Math.ceil(size * this.sent.lossRate() * c.redundancyFactor);
    const tailUnits = Math.ceil((c.tailBdps * bdp) / this.layout.symbolsPerUnit);
    if (unit >= this.layout.unitCount - tailUnits)
      return Math.ceil(size * this.sent.lossRate() * c.tailRedundancyFactor);
    if (this.windowUnits * this.layout.symbolsPerUnit >= c.repairWindowBdps * bdp) return 0;
    return Math.ceil(size * this.sent.lossRate() * c.redundancyFactor);
  }
  lossAllowance(packets: number): number {
    if (this.sent.lostPackets === 0) return 0;
    return Math.ceil(packets * this.sent.lossRate() * this.config.redundancyFactor);
  }
  overdue(unit: number): boolean {
    return this.now - this.enteredAt[unit] > this.config.overdueRtts * this.rtt.smoothed + this.config.ackDelaySlackMs;
  }

  get packetsInFlight(): number {
    return this.sent.inFlight;
  }

  /** The path as this transfer left it, for the next transfer's warm start; undefined before feedback. */
  pathEstimate(): PathEstimate | undefined {
    return this.path.estimate();
  }

  /** Packets this source may have in flight now. */
  get inFlightLimit(): number {
    return this.path.inFlightLimit;
  }

  /** Feed a datagram from the client (feedback, stop, or a repeated request). */
  handleDatagram(bytes: Uint8Array, now: number): void {
    if (this.status !== 'active') return;
    const decoded = decode(bytes);
    if (!decoded.ok) {
      this.stats.malformedReceived++;
      return;
    }
    this.handleMessage(decoded.value, now);
  }

  /** Feed a message already decoded (the source endpoint decodes each datagram once). */
  handleMessage(m: Message, now: number): void {
    if (this.status !== 'active') return;
    if (m.transferId !== this.transferId) {
      this.stats.malformedReceived++;
      return;
    }
    this.lastHeardAt = now;
    switch (m.type) {
      case MessageType.FeedbackUncoded:
      case MessageType.FeedbackRlnc:
      case MessageType.FeedbackFountain:
        this.onFeedback(m, now);
        break;
      case MessageType.Stop:
        this.status = m.reason === StopReason.Complete ? 'done' : 'failed';
        if (this.status === 'failed')
          this.error = new TransferError('cancelled', `client stopped the transfer (reason ${m.reason})`);
        this.writer.free();
        break;
      case MessageType.SymbolDigestsRequest:
        this.symbolDigestAnswers.ask(m.check);
        break;
      case MessageType.Request:
        this.announcement.onRequest(now);
        break;
      default:
        this.stats.malformedReceived++;
    }
  }

  private onFeedback(m: FeedbackMessage, now: number): void {
    if (m.type !== FEEDBACK_TYPE[this.layout.mode] || m.weights.length <= this.sourceIndex) {
      this.stats.malformedReceived++;
      return;
    }
    this.stats.feedbackReceived++;
    this.now = now;
    this.resumeHold.release();
    if (m.complete) {
      this.status = 'done';
      this.writer.free();
      return;
    }
    const seqKnown = m.largestSeq !== NO_SEQ && this.sent.holds(m.largestSeq);
    // Feedback can arrive reordered: rate, cap and weights come from the newest one only.
    const newest = !seqKnown ? this.newestFeedbackSeq < 0 : m.largestSeq >= this.newestFeedbackSeq;
    if (seqKnown && this.sent.raiseLargestAcked(m.largestSeq))
      this.rtt.addSample(now - this.sent.sentAt(m.largestSeq) - m.ackDelay / 10);
    if (newest) {
      if (seqKnown) this.newestFeedbackSeq = m.largestSeq;
      this.path.onReport(m.rateBps, m.inFlightCap);
    }
    this.announcement.onFeedback(m.metaKnown, seqKnown ? m.largestSeq : -1, now);
    // Progress first: units this feedback shows begun are pinned to the partition they began under.
    this.progress.apply(m, newest && m.rewind === true, now);
    if (newest) this.owners.repartition(m.weights);
    if (seqKnown) this.sent.retireAcknowledged(m.largestSeq, m.ackBits, now, this.rtt.smoothed);
  }

  /**
   * The next datagram to send, or null if there is nothing to send now. Call only when the
   * transport can take a datagram, so the choice uses the freshest feedback.
   */
  pollDatagram(now: number): Uint8Array | null {
    if (this.status !== 'active') return null;
    const announcement = this.announcement.poll(now, this.sent.nextSeq);
    if (announcement) return announcement;
    const answer = this.symbolDigestAnswers.next();
    if (answer) return answer;
    if (this.resumeHold.holds(now)) return null;
    this.now = now;
    this.sent.expireStale(now, this.rtt.timeout(this.config.ackDelaySlackMs));
    if (this.sent.inFlight >= this.path.inFlightLimit) {
      this.stats.blockedByInFlight++;
      return null;
    }
    const unit = this.scheduler.pick(this);
    if (unit < 0) {
      this.stats.nothingToSend++;
      return null;
    }
    const datagram = this.writer.write(unit, this.sent.nextSeq);
    this.owners.pin(unit);
    this.sent.onSent(unit, now);
    this.stats.dataSent++;
    this.stats.bytesSent += datagram.length;
    return datagram;
  }

  /** When handleTimeout should next be called, or null if never. Always later than the last handleTimeout. */
  nextDeadline(): number | null {
    if (this.status !== 'active') return null;
    const timeout = this.rtt.timeout(this.config.ackDelaySlackMs);
    return Math.min(
      this.lastHeardAt + this.config.idleTimeoutMs,
      this.announcement.deadline,
      this.resumeHold.deadline,
      // Same expression as SentPackets.expireStale, so a timeout at this deadline expires the packet.
      this.sent.oldestSentAt() + timeout,
    );
  }

  handleTimeout(now: number): void {
    if (this.status !== 'active') return;
    if (now - this.lastHeardAt >= this.config.idleTimeoutMs) {
      this.status = 'failed';
      this.error = new TransferError('idle-timeout', `no word from the client for ${this.config.idleTimeoutMs} ms`);
      this.writer.free();
      return;
    }
    this.announcement.onTimeout(now);
    this.resumeHold.onTimeout(now);
    this.sent.expireStale(now, this.rtt.timeout(this.config.ackDelaySlackMs));
  }

  /** Abandon the transfer (e.g. the peer connection closed). */
  close(): void {
    if (this.status === 'active') this.status = 'done';
    this.writer.free();
  }
}
