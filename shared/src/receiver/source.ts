/**
 * One source as the receiver sees it: its counters, its request and feedback timers, the acks and
 * rate estimate of its data, and whether it was excluded (and why). Only its own bookkeeping: what
 * the transfer does about a source (agreement, shares, exclusion's consequences) is decided by
 * the Receiver.
 */
import { StopReason, StopReasonCode } from '../wire';
import { AckTracker } from './ack-tracker';
import { ReceiverConfig } from './config';
import { RateEstimator } from './rate-estimator';

export type SourceState = 'connecting' | 'active' | 'failed' | 'dropped';

/** A data seq this far below the largest seen means the sender started the transfer again. */
const RESTARTED_SEQ_GAP = 256;

/** Why a source was excluded as a polluter: its META, its DIGESTS, or its data. */
export type PollutionKind = 'meta' | 'digests' | 'data';

export interface Polluter {
  source: number;
  kind: PollutionKind;
  reason: string;
}

export interface SourceStats {
  state: SourceState;
  /** Data packets received (all, useful or not). */
  received: number;
  /** Data packets that increased the client's DoF. */
  useful: number;
  redundant: number;
  beforeMeta: number;
  afterComplete: number;
  invalid: number;
  malformed: number;
  bytes: number;
  rateBps: number;
  /**
   * From the last REQUEST sent to it to its first META, ms: a round trip plus the source's
   * origin fetch (none when cached). Undefined until its META arrived.
   */
  answerMs?: number;
  error?: string;
  /** Excluded as a polluter (wrong META or DIGESTS, or a packet that failed a verified unit). */
  polluter: boolean;
}

export type SourceConfig = Pick<
  ReceiverConfig,
  | 'requestRetryMs'
  | 'maxRequestRetryMs'
  | 'minRequestRetryMs'
  | 'feedbackIntervalMs'
  | 'ackEveryPackets'
  | 'trainLength'
  | 'medianWindow'
>;

export class Source {
  readonly stats: SourceStats = {
    state: 'connecting',
    received: 0,
    useful: 0,
    redundant: 0,
    beforeMeta: 0,
    afterComplete: 0,
    invalid: 0,
    malformed: 0,
    bytes: 0,
    rateBps: 0,
    polluter: false,
  };
  /** Something of this transfer (META, DIGESTS, data) arrived from it. */
  heard = false;
  /** Its META is the agreed identity: its data may be used. */
  metaOk = false;
  /** A REQUEST went to it: it may be fetching or sending even if nothing arrived yet. */
  requested = false;
  requestDueAt: number;
  private requestBackoff: number;
  /** When the last REQUEST went to it (-Infinity: none yet). */
  lastRequestAt = -Infinity;
  acks = new AckTracker();
  rate: RateEstimator;
  lastArrivalAt = 0;
  /** When anything of this transfer (META, DIGESTS, data) last arrived from it. */
  lastHeardAt = -Infinity;
  /**
   * Silent for resumeAfterMs after it had been heard (a disconnection, a sender that forgot the
   * transfer): REQUESTs go to it again until it answers; see takeResumeRequest.
   */
  resuming = false;
  /** Times it went silent and was asked again (resume attempts that began). */
  resumes = 0;
  private resumeDueAt = 0;
  private resumeBackoff = 0;
  /** Feedback should go out at the next poll, before its interval is up. */
  feedbackDue = false;
  lastFeedbackAt: number;
  private sinceFeedback = 0;
  /** A STOP to send at the next poll (-1: none). */
  stopDue: StopReasonCode | -1 = -1;
  lastStopAt = -Infinity;
  pollution?: PollutionKind;

  constructor(
    now: number,
    private readonly config: SourceConfig,
  ) {
    this.requestDueAt = now;
    this.requestBackoff = config.requestRetryMs;
    this.lastFeedbackAt = now;
    this.rate = new RateEstimator(config.trainLength, config.medianWindow);
  }

  /** Connecting or active: it may still send and gets a share of the work. */
  get live(): boolean {
    return this.stats.state === 'connecting' || this.stats.state === 'active';
  }

  hear(now: number): void {
    this.heard = true;
    this.lastHeardAt = now;
    if (this.stats.state === 'connecting') this.stats.state = 'active';
  }

  /**
   * A data packet's bookkeeping, whatever becomes of its payload; `arrivedAt` (≤ now) times the
   * delivery-rate estimate when the host read it later than it arrived.
   */
  onData(seq: number, bytes: number, now: number, arrivedAt = now): void {
    // Far behind the largest seq seen: a sender that lost the transfer started it again from
    // seq 0 (its META may have been lost); acks and rate must follow its numbering, not the old.
    if (this.acks.largestSeq - seq > RESTARTED_SEQ_GAP) this.restartTransport(now);
    this.resuming = false;
    this.hear(now);
    const s = this.stats;
    s.received++;
    s.bytes += bytes;
    this.lastArrivalAt = now;
    this.rate.onPacket(seq, bytes, arrivedAt);
    s.rateBps = this.rate.bytesPerSecond;
    this.acks.record(seq, now);
    if (++this.sinceFeedback >= this.config.ackEveryPackets) this.feedbackDue = true;
  }

  /** Whether a REQUEST is due now; if so it counts as sent and the next waits twice as long. */
  takeRequest(now: number): boolean {
    if (now < this.requestDueAt) return false;
    this.requestDueAt = now + this.requestBackoff;
    this.requestBackoff = Math.min(this.requestBackoff * 2, this.config.maxRequestRetryMs);
    this.requested = true;
    this.lastRequestAt = now;
    return true;
  }

  /**
   * Another source answered its REQUEST in `answerMs`: a source still silent after twice that
   * has probably lost its REQUEST (or its META was lost), so ask again then instead of after the
   * fixed retry, and back off from there. The floor keeps a loopback answer of a millisecond from
   * turning into a REQUEST per millisecond to a source that is merely fetching.
   */
  paceRequests(answerMs: number, floorMs: number): void {
    const pace = Math.max(floorMs, 2 * answerMs);
    if (pace >= this.requestBackoff) return;
    this.requestBackoff = pace;
    this.requestDueAt = Math.min(this.requestDueAt, this.lastRequestAt + pace);
  }

  /**
   * Whether a resume REQUEST is due now: it was heard, then silent for `afterMs` (the link went
   * away, or its sender forgot the transfer). REQUESTs repeat with the usual back-off until it is
   * heard again; a sender still holding the transfer ignores them, one that lost it starts again.
   */
  takeResumeRequest(now: number, afterMs: number): boolean {
    if (!this.resuming && (!this.heard || now - this.lastHeardAt < afterMs)) return false;
    if (!this.resuming) this.beginResume(now);
    if (now < this.resumeDueAt) return false;
    this.resumeDueAt = now + this.resumeBackoff;
    this.resumeBackoff = Math.min(this.resumeBackoff * 2, this.config.maxRequestRetryMs);
    this.lastRequestAt = now;
    return true;
  }

  /** Resuming from now: a REQUEST is due at once, and the next META starts the transport over. */
  beginResume(now: number): void {
    this.resuming = true;
    this.resumes++;
    this.resumeDueAt = now;
    this.resumeBackoff = this.config.requestRetryMs;
  }

  /** When the next resume REQUEST may go out (Infinity: not resuming). */
  get resumeDeadline(): number {
    return this.resuming ? this.resumeDueAt : Infinity;
  }

  /**
   * Its sender started the transfer again (a META while resuming, or seqs from 0): the acks and
   * the rate estimate start over with the new numbering; what was decoded stays.
   */
  restartTransport(now: number): void {
    this.acks = new AckTracker();
    this.rate = new RateEstimator(this.config.trainLength, this.config.medianWindow);
    this.sinceFeedback = 0;
    this.feedbackDue = true;
    this.lastFeedbackAt = now;
  }

  /** Its first META arrived. */
  answered(now: number): void {
    if (this.stats.answerMs === undefined && this.lastRequestAt > -Infinity)
      this.stats.answerMs = now - this.lastRequestAt;
  }

  /** Whether feedback is due now (asked for, or its interval is up); if so it counts as sent. */
  takeFeedback(now: number): boolean {
    if (!this.feedbackDue && now < this.feedbackDeadline) return false;
    this.feedbackDue = false;
    this.sinceFeedback = 0;
    this.lastFeedbackAt = now;
    return true;
  }

  get feedbackDeadline(): number {
    return this.lastFeedbackAt + this.config.feedbackIntervalMs;
  }

  /** The STOP due, if any, taken (sent) now. */
  takeStop(now: number): StopReasonCode | -1 {
    const reason = this.stopDue;
    if (reason !== -1) {
      this.stopDue = -1;
      this.lastStopAt = now;
    }
    return reason;
  }

  /** Tell a source that keeps sending after completion to stop, but not once per packet. */
  remindComplete(now: number): void {
    if (now - this.lastStopAt >= this.config.feedbackIntervalMs) this.stopDue = StopReason.Complete;
  }

  /** It can no longer serve (error, lost connection) or is excluded ('dropped'): no more share. */
  end(state: 'failed' | 'dropped', reason: string): void {
    this.stats.state = state;
    this.stats.error = reason;
  }

  /** Excluded as a polluter: its data is no longer used and, while it sends, it is told to stop. */
  exclude(kind: PollutionKind, reason: string): void {
    this.stats.polluter = true;
    this.pollution ??= kind;
    this.metaOk = false;
    if (!this.live) {
      this.stats.error = reason;
      return;
    }
    this.stopDue = StopReason.BadSource;
    this.end('dropped', reason);
  }
}
