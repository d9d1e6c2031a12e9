/**
 * MUTP sender: one transfer of one object from this source (proxy) to one client. Sans-IO: the
 * caller feeds received datagrams and the time, pulls datagrams when its channel can take one,
 * and calls handleTimeout at nextDeadline().
 */
import { bytesEqual } from '../bytes';
import { UnitEncoder } from '../codec/types';
import { TransferError } from '../errors';
import { Layout } from '../layout';
import { unitDigests, unitRoot } from '../integrity';
import { SymbolDigestAnswers } from './symbol-digest-answers';
import { assertionMessage } from '../assertion';
import { UNIT_DIGEST_BYTES, UNLIMITED_IN_FLIGHT } from '../limits';
import { Partition } from '../partition';
import { Random } from '../random';
import {
  DATA_FOUNTAIN_HEADER_BYTES,
  DATA_RLNC_HEADER_BYTES,
  DATA_UNCODED_HEADER_BYTES,
  decode,
  encodeDigests,
  encodeMeta,
  MAX_DIGESTS_PER_MESSAGE,
  FeedbackMessage,
  Message,
  MessageType,
  NO_SEQ,
  RequestResume,
  StopReason,
  writeDataFountainHeader,
  writeDataRlncHeader,
  writeDataUncodedHeader,
} from '../wire';
import { RttEstimator } from './rtt';
import { createScheduler, Scheduler, ScheduleView } from './schedulers';
import { DEFAULT_SENDER_CONFIG, SenderConfig } from './config';
import { PathEstimate, SenderOptions } from './options';

export { DEFAULT_SENDER_CONFIG } from './config';
export type { SenderConfig } from './config';
export type { MetaSigner, PathEstimate, SenderOptions } from './options';

/**
 * A warm start never assumes more than this rate (4 Gbit/s): the estimate comes from the client's
 * own reports, and maxInFlightPackets bounds the in-flight limit it yields anyway.
 */
const MAX_WARM_RATE_BPS = 500_000_000;

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

const RING = 8192; // > maxInFlightPackets, so live records never collide
/** Partitions kept for pinned units (see Sender.epochs). */
const MAX_EPOCHS = 64;

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
  partition: Partition;
  readonly rtt: RttEstimator;

  private readonly config: SenderConfig;
  private readonly encoder: UnitEncoder;
  private readonly scheduler: Scheduler;
  private readonly windowUnits: number;
  private readonly meta: Uint8Array;
  /** DIGESTS datagrams, sent right after every META until the client acknowledges both. */
  private readonly digests: Uint8Array[];
  private digestCursor: number;
  private readonly ranks: Uint16Array; // client's DoF per unit, as last reported
  /** Fountain: how many block ids this source has used per source block (see buildData). */
  private readonly blockIdsUsed: Uint32Array;
  private readonly transit: Uint16Array; // own packets in transit per unit
  private readonly enteredAt: Float64Array; // when each unit entered this source's window
  private readonly delivered: Uint16Array; // own packets per unit the client acknowledged
  /**
   * The partition each unit's slots were owned by when work on it began (this source sent into it
   * or the client reported DoF of it); unset for untouched units, which follow the current one.
   * Weights change with every noisy rate estimate, and re-owning slots other sources have already
   * sent makes the new owners send them again: on 40 ms testbed paths that was a fifth of rlnc's
   * packets.
   */
  private readonly pinned: Uint16Array; // index into `epochs`; 0 = not begun
  /**
   * The partitions units are pinned to, by epoch (index 0 unused); the last is the current one.
   * The client decides how often weights change, so at most MAX_EPOCHS are kept: past that every
   * pin is dropped, which costs an erratic client efficiency, never the proxy memory.
   */
  private epochs: Partition[] = [];
  private weights: Uint8Array;
  /**
   * Pins protect shares that started from the sources' capacities (the REQUEST carried weights).
   * From equal shares (capacities unknown) the first measured weights must correct begun units
   * too, or a fast source waits a whole window for its share (simulator, N = 6 mixed caps without
   * capacities: efficiency 0.81 with pins against 0.86 without).
   */
  private readonly keepBegunOwners: boolean;
  private now: number;
  private readonly ringUnit = new Int32Array(RING);
  private readonly ringSentAt = new Float64Array(RING);
  private readonly ringLive = new Uint8Array(RING);
  private wMin = 0;
  private nextSeq = 0;
  private deliveredPackets = 0;
  private lostPackets = 0;
  private largestAcked = -1;
  private oldestLive = 0; // every seq below is not live
  private inFlight = 0;
  private rateBps = 0;
  private inFlightCap = UNLIMITED_IN_FLIGHT;
  private newestFeedbackSeq = -1;
  private metaAcked = false;
  /** META goes out first and again each timeout until a feedback says the client has it. */
  private metaPending = true;
  private metaDueAt: number;
  /** When the last META went out, and the first DATA seq sent after it. */
  private metaSentAt = -Infinity;
  private firstSeqAfterMeta = 0;
  private lastHeardAt: number;
  /**
   * A resuming client's transfer (its REQUEST has a resume part) sends no DATA before the
   * client's first FEEDBACK, or this deadline: its window holds units the client has partly or
   * wholly decoded, which only FEEDBACK describes, and a window sent blind was a window wasted
   * (testbed, rlnc after a network change: up to 640 redundant packets of 7490).
   */
  private holdDataUntil = -Infinity;
  private readonly symbolDigestAnswers: SymbolDigestAnswers;
  /**
   * When set, DATA datagrams are built in this buffer and returned as views of it: each is valid
   * until the next pollDatagram (of any sender given the same buffer). For hosts whose channel
   * copies a datagram before send() returns: no allocation per packet. A datagram longer than
   * the buffer gets an array of its own.
   */
  datagramBuffer?: Uint8Array;
  /** The last view of datagramBuffer handed out (most datagrams of a transfer have one length). */
  private datagramView?: Uint8Array;
  private datagramPayload?: Uint8Array;
  /** The payload part of the datagram datagramOf() returned last. */
  private payload: Uint8Array = new Uint8Array(0);

  constructor(opts: SenderOptions) {
    const r = opts.request;
    this.config = { ...DEFAULT_SENDER_CONFIG, ...opts.config };
    this.transferId = r.transferId;
    this.sourceIndex = r.sourceIndex;
    this.sourceCount = r.sourceCount;
    this.generationSize = r.generationSize;
    this.layout = new Layout(r.mode, opts.object.length, r.symbolSize, r.generationSize);
    this.windowUnits = this.layout.windowUnits(r.window);
    this.encoder = opts.codec.createEncoder(opts.object, this.layout);
    this.symbolDigestAnswers = new SymbolDigestAnswers(this.layout, opts.object, r.transferId, opts.sha256);
    this.scheduler = createScheduler(r.mode, r.scheduler, opts.random);
    this.random = opts.random;
    this.weights = r.weights ? Uint8Array.from(r.weights) : new Uint8Array(r.sourceCount);
    this.partition = new Partition(this.weights);
    this.epochs = [this.partition, this.partition];
    this.keepBegunOwners = r.weights !== undefined;
    const warm = opts.warmStart;
    const warmUsable = warm !== undefined && warm.rateBps > 0 && warm.minRttMs > 0 && Number.isFinite(warm.minRttMs);
    // The warm RTT stands in until this transfer's own samples arrive (the minimum is re-learnt).
    this.rtt = new RttEstimator(warmUsable ? warm.minRttMs : this.config.initialRttMs);
    if (warmUsable) this.rateBps = Math.min(warm.rateBps, MAX_WARM_RATE_BPS);
    this.ranks = new Uint16Array(this.layout.unitCount);
    this.blockIdsUsed = new Uint32Array(r.mode === 'fountain' ? this.layout.unitCount : 0);
    this.transit = new Uint16Array(this.layout.unitCount);
    this.enteredAt = new Float64Array(this.layout.unitCount);
    this.delivered = new Uint16Array(this.layout.unitCount);
    this.pinned = new Uint16Array(this.layout.unitCount);
    this.now = opts.now;
    if (r.resume) {
      this.resumeFrom(r.resume);
      this.holdDataUntil = opts.now + this.rtt.timeout(this.config.ackDelaySlackMs);
    }
    this.enteredAt.fill(opts.now, this.wMin, Math.min(this.wMin + this.windowUnits, this.layout.unitCount));
    const digests = opts.unitDigests ?? unitDigests(opts.object, this.layout, opts.sha256);
    const identity = {
      objectLength: opts.object.length,
      symbolSize: r.symbolSize,
      generationSize: r.generationSize,
      mode: r.mode,
      digest: opts.digest,
      unitRoot: unitRoot(digests, opts.sha256),
      attributes: opts.attributes,
    };
    const provenance = opts.provenance ?? { fetchedAt: 0 };
    const signed = opts.signer && {
      ...provenance,
      signature: opts.signer.sign(assertionMessage(identity, provenance, r, opts.signer.proxyId)),
    };
    this.meta = encodeMeta({ transferId: r.transferId, ...identity, ...(signed ? { signed } : {}) });
    this.digests = [];
    const perMessage = MAX_DIGESTS_PER_MESSAGE * UNIT_DIGEST_BYTES;
    for (let at = 0; at < digests.length; at += perMessage) {
      const chunk = digests.subarray(at, at + perMessage);
      this.digests.push(encodeDigests({ transferId: r.transferId, first: at / UNIT_DIGEST_BYTES, digests: chunk }));
    }
    this.digestCursor = this.digests.length;
    this.metaDueAt = opts.now;
    this.lastHeardAt = opts.now;
    this.datagramBuffer = opts.datagramBuffer;
  }

  private readonly random: Random;

  /**
   * A client resuming (it lost the connection this transfer's first incarnation ran on): what it
   * has is not sent again. Units below fromUnit are complete, and fountain block ids start past
   * those this source index sent before. A hostile client can only make this source send less.
   */
  private resumeFrom(resume: RequestResume): void {
    const unitCount = this.layout.unitCount;
    this.wMin = Math.min(resume.fromUnit, unitCount);
    for (let u = 0; u < this.wMin; u++) this.ranks[u] = this.layout.unitSize(u);
    this.blockIdsUsed.fill(resume.blockRound);
  }

  // ---- ScheduleView
  get windowStart(): number {
    return this.wMin;
  }
  get windowEnd(): number {
    return Math.min(this.wMin + this.windowUnits, this.layout.unitCount);
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
    const epoch = this.keepBegunOwners ? this.pinned[unit] : 0;
    return (epoch > 0 ? this.epochs[epoch] : this.partition).owner(slot);
  }
  redundancy(unit: number): number {
    if (this.lostPackets === 0) return 0;
    const c = this.config;
    const size = this.layout.unitSize(unit);
    const bdp = this.transferBdpPackets();
    // Before a rate estimate the BDP is unknown: every unit gets the plain allowance.
    if (bdp === 0) return Math.ceil(size * this.lossRate() * c.redundancyFactor);
    const tailUnits = Math.ceil((c.tailBdps * bdp) / this.layout.symbolsPerUnit);
    if (unit >= this.layout.unitCount - tailUnits) return Math.ceil(size * this.lossRate() * c.tailRedundancyFactor);
    if (this.windowUnits * this.layout.symbolsPerUnit >= c.repairWindowBdps * bdp) return 0;
    return Math.ceil(size * this.lossRate() * c.redundancyFactor);
  }
  lossAllowance(packets: number): number {
    if (this.lostPackets === 0) return 0;
    return Math.ceil(packets * this.lossRate() * this.config.redundancyFactor);
  }
  /** Measured loss; a prior of 20 delivered packets keeps one early loss from looking like 50%. */
  private lossRate(): number {
    return this.lostPackets / (this.lostPackets + this.deliveredPackets + 20);
  }
  /**
   * Packets all sources of the transfer deliver per round trip, as this source sees it: its own
   * reported rate over its share of the slots. 0 before the first rate estimate.
   */
  private transferBdpPackets(): number {
    const share = this.partition.share(this.sourceIndex);
    if (this.rateBps <= 0 || share <= 0) return 0;
    return ((this.rateBps / share) * (this.rtt.smoothed / 1000)) / (this.layout.symbolSize + DATA_RLNC_HEADER_BYTES);
  }
  overdue(unit: number): boolean {
    return this.now - this.enteredAt[unit] > this.config.overdueRtts * this.rtt.smoothed + this.config.ackDelaySlackMs;
  }

  get packetsInFlight(): number {
    return this.inFlight;
  }

  /** The path as this transfer left it, for the next transfer's warm start; undefined before feedback. */
  pathEstimate(): PathEstimate | undefined {
    return this.rateBps > 0 && this.rtt.sampled ? { rateBps: this.rateBps, minRttMs: this.rtt.min } : undefined;
  }

  /** Packets this source may have in flight now. */
  get inFlightLimit(): number {
    const c = this.config;
    let limit = c.initialWindowPackets;
    if (this.rateBps > 0) {
      // The client measures whole datagrams, so divide by the datagram size, not the symbol size.
      // 'smoothed' takes over only where the gain no longer covers the queue (smoothed RTT above
      // gain x min): below that it is the min RTT, as on WebRTC (more in flight costs late
      // binding under loss: rlnc on paper-loss2 0.76-0.89 with the smoothed RTT always, 0.87 without).
      const smoothed = c.inFlightRtt === 'smoothed' && this.rtt.sampled ? this.rtt.smoothed / c.inFlightGain : 0;
      const rttMs = Math.max(this.rtt.base, smoothed);
      const bdpPackets = (this.rateBps * rttMs) / 1000 / (this.layout.symbolSize + DATA_RLNC_HEADER_BYTES);
      limit = Math.min(c.maxInFlightPackets, Math.ceil(c.inFlightGain * bdpPackets) + c.inFlightHeadroomPackets);
    }
    return this.inFlightCap === UNLIMITED_IN_FLIGHT ? limit : Math.min(limit, this.inFlightCap);
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
        this.encoder.free();
        break;
      case MessageType.SymbolDigestsRequest:
        this.symbolDigestAnswers.ask(m.check);
        break;
      case MessageType.Request:
        // The client has not seen our META yet: repeat it, but at most once per round trip (META
        // brings every DIGESTS datagram along: one small REQUEST must not buy that each time).
        if (!this.metaAcked && now - this.metaSentAt >= this.rtt.smoothed) this.metaPending = true;
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
    this.holdDataUntil = -Infinity;
    if (m.metaKnown) this.metaAcked = true;
    if (m.complete) {
      this.status = 'done';
      this.encoder.free();
      return;
    }
    const seqKnown = m.largestSeq !== NO_SEQ && m.largestSeq < this.nextSeq && this.nextSeq - m.largestSeq <= RING;
    // Feedback can arrive reordered: rate, cap and weights come from the newest one only.
    const newest = !seqKnown ? this.newestFeedbackSeq < 0 : m.largestSeq >= this.newestFeedbackSeq;
    if (seqKnown && m.largestSeq > this.largestAcked) {
      const slot = m.largestSeq & (RING - 1);
      this.rtt.addSample(now - this.ringSentAt[slot] - m.ackDelay / 10);
      this.largestAcked = m.largestSeq;
    }
    if (newest) {
      if (seqKnown) this.newestFeedbackSeq = m.largestSeq;
      if (m.rateBps > 0) this.rateBps = m.rateBps;
      this.inFlightCap = m.inFlightCap;
    }
    if (
      !this.metaAcked &&
      seqKnown &&
      m.largestSeq >= this.firstSeqAfterMeta &&
      now - this.metaSentAt >= this.rtt.smoothed
    ) {
      // Data sent after our META arrived, yet the client has not accepted the META: it was lost
      // (or the client still waits for the other sources to agree). Until it is accepted the
      // client can only hold our data, so repeat it now rather than after a timeout (the first
      // one is taken before any RTT sample), at most once per round trip.
      this.metaPending = true;
    }
    // Progress first: units this feedback shows begun are pinned to the partition they began under.
    this.applyProgress(m, newest && m.rewind === true);
    if (newest) this.repartition(m.weights);
    if (seqKnown) this.retireAcknowledged(m.largestSeq, m.ackBits);
  }

  private repartition(weights: Uint8Array): void {
    if (bytesEqual(weights, this.weights)) return; // most feedback repeats the published weights
    // A source that dropped to no share (silent, failed, excluded) sends nothing more: its slots
    // in begun units must pass to the others now, not wait until they are overdue.
    const previous = this.partition;
    let unpin = this.epochs.length > MAX_EPOCHS;
    for (let i = 0; i < weights.length && !unpin; i++) if (weights[i] === 0 && previous.share(i) > 0) unpin = true;
    if (unpin) {
      this.pinned.fill(0);
      this.epochs = [previous];
    }
    this.weights = Uint8Array.from(weights);
    this.partition = new Partition(weights);
    this.epochs.push(this.partition);
  }

  /** Pins unit u to the current partition if work on it has not begun before. */
  private pin(unit: number): void {
    if (this.pinned[unit] === 0) this.pinned[unit] = this.epochs.length - 1;
  }

  /**
   * Client progress grows: completed units below wMin, then the window's bitmap or ranks. Only
   * when a check unit fails its digest does the client discard what it had of it: the newest
   * feedback with the rewind flag may then lower wMin and ranks, and this source sends again.
   */
  private applyProgress(m: FeedbackMessage, rewind: boolean): void {
    const { unitCount } = this.layout;
    const wMin = Math.min(m.wMin, unitCount);
    const oldEnd = this.windowEnd;
    if (rewind && wMin < this.wMin) this.wMin = wMin;
    for (let u = this.wMin; u < wMin; u++) this.ranks[u] = this.layout.unitSize(u);
    const report = (u: number, rank: number): void => {
      if (rank > 0) this.pin(u);
      if (rank > this.ranks[u]) this.ranks[u] = rank;
      else if (rewind && rank < this.ranks[u]) {
        this.ranks[u] = rank;
        this.delivered[u] = 0;
      }
    };
    if (m.type === MessageType.FeedbackUncoded) {
      for (let i = 0; i < m.bitCount && wMin + i < unitCount; i++) report(wMin + i, (m.bitmap[i >> 3] >> (i & 7)) & 1);
    } else if (m.type === MessageType.FeedbackRlnc) {
      for (let i = 0; i < m.ranks.length && wMin + i < unitCount; i++) {
        const u = wMin + i;
        report(u, Math.min(m.ranks[i], this.layout.unitSize(u)));
      }
    } else {
      // Fountain: what the client still needs. A block is done only when it says 0 (it may need
      // a few blocks beyond the symbol count), so rank = size - missing stays below size till then.
      for (let i = 0; i < m.missing.length && wMin + i < unitCount; i++) {
        const u = wMin + i;
        report(u, Math.max(0, this.layout.unitSize(u) - m.missing[i]));
      }
    }
    while (this.wMin < unitCount && this.ranks[this.wMin] >= this.layout.unitSize(this.wMin)) this.wMin++;
    this.enteredAt.fill(this.now, oldEnd, this.windowEnd);
  }

  /**
   * Retire packets the feedback accounts for: delivered ones (largestSeq and the ackBits below it)
   * at once; missing ones as lost once `reorderThreshold` later packets have arrived, or when they
   * are older than the 32 packets ackBits covers.
   */
  private retireAcknowledged(largest: number, ackBits: number): void {
    for (let seq = Math.max(this.oldestLive, largest - 32); seq <= largest; seq++) {
      if (seq === largest || (ackBits >>> (largest - 1 - seq)) & 1) this.retire(seq, 'delivered');
    }
    const lostUpTo = largest - this.config.reorderThreshold;
    for (let seq = this.oldestLive; seq <= lostUpTo; seq++) this.retire(seq, 'lost');
    // Time threshold (as QUIC): a missing packet sent well over an RTT ago is lost even when
    // fewer than reorderThreshold packets followed it, as before a pause in sending.
    const sentBefore = this.now - (9 / 8) * this.rtt.smoothed;
    for (let seq = Math.max(this.oldestLive, lostUpTo + 1); seq < largest; seq++) {
      if (this.ringSentAt[seq & (RING - 1)] <= sentBefore) this.retire(seq, 'lost');
    }
    while (this.oldestLive < this.nextSeq && !this.ringLive[this.oldestLive & (RING - 1)]) this.oldestLive++;
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

  private expireStale(now: number): void {
    const timeout = this.rtt.timeout(this.config.ackDelaySlackMs);
    while (this.oldestLive < this.nextSeq) {
      const slot = this.oldestLive & (RING - 1);
      // Same expression as nextDeadline(), so a timeout at that deadline always expires the packet.
      if (this.ringLive[slot] && this.ringSentAt[slot] + timeout > now) break;
      this.retire(this.oldestLive++, 'expired');
    }
  }

  /**
   * The next datagram to send, or null if there is nothing to send now. Call only when the
   * transport can take a datagram, so the choice uses the freshest feedback.
   */
  pollDatagram(now: number): Uint8Array | null {
    if (this.status !== 'active') return null;
    if (this.metaPending && !this.metaAcked) {
      this.metaPending = false;
      this.metaDueAt = now + this.rtt.timeout(this.config.ackDelaySlackMs);
      this.metaSentAt = now;
      this.firstSeqAfterMeta = this.nextSeq;
      this.stats.metaSent++;
      this.digestCursor = 0;
      return this.meta;
    }
    if (this.digestCursor < this.digests.length && !this.metaAcked) return this.digests[this.digestCursor++];
    const answer = this.symbolDigestAnswers.next();
    if (answer) return answer;
    if (now < this.holdDataUntil) return null;
    this.now = now;
    this.expireStale(now);
    if (this.inFlight >= this.inFlightLimit) {
      this.stats.blockedByInFlight++;
      return null;
    }
    const unit = this.scheduler.pick(this);
    if (unit < 0) {
      this.stats.nothingToSend++;
      return null;
    }
    return this.buildData(unit, now);
  }

  /**
   * A datagram to build DATA in, `headerBytes` + `payloadLength` long, and its payload part
   * (`this.payload`): views of datagramBuffer, or a new array.
   */
  private datagramOf(headerBytes: number, payloadLength: number): Uint8Array {
    const length = headerBytes + payloadLength;
    const buffer = this.datagramBuffer;
    if (!buffer || length > buffer.length) {
      const datagram = new Uint8Array(length);
      this.payload = datagram.subarray(headerBytes);
      return datagram;
    }
    let view = this.datagramView;
    if (!view || view.buffer !== buffer.buffer || view.byteOffset !== buffer.byteOffset || view.length !== length) {
      this.datagramView = view = buffer.subarray(0, length);
      this.datagramPayload = buffer.subarray(headerBytes, length);
    }
    this.payload = this.datagramPayload!;
    return view;
  }

  private buildData(unit: number, now: number): Uint8Array {
    const seq = this.nextSeq++;
    const payloadLength = this.layout.payloadLength(unit);
    let datagram: Uint8Array;
    if (this.layout.mode === 'uncoded') {
      datagram = this.datagramOf(DATA_UNCODED_HEADER_BYTES, payloadLength);
      writeDataUncodedHeader(datagram, this.transferId, seq, unit);
      this.encoder.encodeInto(unit, 0, this.payload);
    } else if (this.layout.mode === 'rlnc') {
      const seed = this.random();
      datagram = this.datagramOf(DATA_RLNC_HEADER_BYTES, payloadLength);
      writeDataRlncHeader(datagram, this.transferId, seq, unit, seed);
      this.encoder.encodeInto(unit, seed, this.payload);
    } else {
      // Source i of N uses block ids i, i + N, i + 2N, ...: the sources never send the same block,
      // and together they start with the systematic ids (the cheapest to decode).
      let blockId = this.sourceIndex + this.sourceCount * this.blockIdsUsed[unit]++;
      while (this.encoder.usableKey && !this.encoder.usableKey(unit, blockId))
        blockId = this.sourceIndex + this.sourceCount * this.blockIdsUsed[unit]++;
      datagram = this.datagramOf(DATA_FOUNTAIN_HEADER_BYTES, payloadLength);
      writeDataFountainHeader(datagram, this.transferId, seq, unit, blockId);
      this.encoder.encodeInto(unit, blockId, this.payload);
    }
    this.pin(unit);
    const slot = seq & (RING - 1);
    this.ringUnit[slot] = unit;
    this.ringSentAt[slot] = now;
    this.ringLive[slot] = 1;
    this.transit[unit]++;
    this.inFlight++;
    this.stats.dataSent++;
    this.stats.bytesSent += datagram.length;
    return datagram;
  }

  /** When handleTimeout should next be called, or null if never. Always later than the last handleTimeout. */
  nextDeadline(): number | null {
    if (this.status !== 'active') return null;
    let deadline = this.lastHeardAt + this.config.idleTimeoutMs;
    if (!this.metaAcked && !this.metaPending) deadline = Math.min(deadline, this.metaDueAt);
    if (this.holdDataUntil > -Infinity) deadline = Math.min(deadline, this.holdDataUntil);
    if (this.inFlight > 0) {
      for (let seq = this.oldestLive; seq < this.nextSeq; seq++) {
        const slot = seq & (RING - 1);
        if (!this.ringLive[slot]) continue;
        deadline = Math.min(deadline, this.ringSentAt[slot] + this.rtt.timeout(this.config.ackDelaySlackMs));
        break;
      }
    }
    return deadline;
  }

  handleTimeout(now: number): void {
    if (this.status !== 'active') return;
    if (now - this.lastHeardAt >= this.config.idleTimeoutMs) {
      this.status = 'failed';
      this.error = new TransferError('idle-timeout', `no word from the client for ${this.config.idleTimeoutMs} ms`);
      this.encoder.free();
      return;
    }
    if (!this.metaAcked && !this.metaPending && now >= this.metaDueAt) this.metaPending = true;
    if (now >= this.holdDataUntil) this.holdDataUntil = -Infinity;
    this.expireStale(now);
  }

  /** Abandon the transfer (e.g. the peer connection closed). */
  close(): void {
    if (this.status === 'active') this.status = 'done';
    this.encoder.free();
  }
}
