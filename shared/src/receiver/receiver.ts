/**
 * MUTP receiver: one object downloaded from N sources at once (the client side). Sans-IO: the
 * caller feeds datagrams per source with the time, pulls datagrams to send (requests, feedback,
 * stops) and calls handleTimeout at nextDeadline(). It owns the transfer: it knows every source
 * and its rate, paces them apart (weights) and caps what they keep in flight near the end.
 */
import { sha256 } from '@noble/hashes/sha256';
import { Codec } from '../codec/types';
import { CheckLayout } from '../integrity';
import { TransferError, TransferErrorCode } from '../errors';
import { Layout } from '../layout';
import { MAX_OBJECT_BYTES, MAX_SOURCES, UNLIMITED_IN_FLIGHT } from '../limits';
import {
  decode,
  describeErrorCode,
  encodeFeedbackFountain,
  encodeFeedbackRlnc,
  encodeFeedbackUncoded,
  encodeRequest,
  encodeStop,
  FeedbackCommon,
  MessageType,
  MetaMessage,
  Mode,
  DigestsMessage,
  NO_SEQ,
  SchedulerName,
  StopReason,
  StopReasonCode,
} from '../wire';
import { DEFAULT_SCHEDULER, schedulerSupports } from '../modes';
import { RateEstimator } from './rate-estimator';
import { Agreement } from './agreement';
import { CheckedDecoder, CheckOutcome } from './check-units';

export interface ReceiverConfig {
  /** Feedback to each source at least this often, so a lost one is soon covered by the next. */
  feedbackIntervalMs: number;
  /** ... and after this many data packets from it. */
  ackEveryPackets: number;
  requestRetryMs: number;
  maxRequestRetryMs: number;
  /** The download fails when no degree of freedom arrives for this long. */
  stallTimeoutMs: number;
  maxObjectBytes: number;
  trainLength: number;
  medianWindow: number;
  /** A source silent this long (after it had sent data) gets no share of the work. */
  inactiveAfterMs: number;
  /** Levels of the quantised weights; coarse, so ownership changes rarely. */
  weightLevels: number;
  /**
   * Weights are republished only when a source's share moves by more than this fraction of
   * itself: every change hands some in-flight slots to another owner, who then sends them again.
   */
  weightHysteresis: number;
  /**
   * Cap each source's packets in flight at its share of what the window still misses. On by
   * default with the partitioned schedulers; off with the paper's ones (random, rarest), so they
   * run the protocol as published.
   */
  inFlightCaps?: boolean;
  /** Extra in-flight allowance per source beyond its share. */
  capSlackPackets: number;
  capLossMargin: number;
  /**
   * A source may exceed its share of the window by this factor: room for its rate estimate to
   * grow when the share underestimates it (a capped source measures only what it was allowed).
   */
  capHeadroom: number;
  /**
   * Sources that must report the same object identity (length, SHA-256, unit root) before any of
   * their data is used; min(quorum, sources that can still answer). 1 trusts the first META.
   */
  quorum: number;
  /**
   * A source that has sent nothing at all this long after the first META stops counting toward
   * the quorum (it may be dead): the download then goes on with the sources that answered.
   */
  agreementWaitMs: number;
  /** Packets of unverified check units kept to identify a polluter (bytes, all units together). */
  maxPacketLogBytes: number;
}

export const DEFAULT_RECEIVER_CONFIG: ReceiverConfig = {
  feedbackIntervalMs: 20,
  ackEveryPackets: 8,
  requestRetryMs: 200,
  maxRequestRetryMs: 2000,
  stallTimeoutMs: 15000,
  maxObjectBytes: 256 * 1024 * 1024,
  trainLength: 16,
  medianWindow: 5,
  inactiveAfterMs: 500,
  weightLevels: 32,
  weightHysteresis: 0.25,
  capSlackPackets: 2,
  capLossMargin: 0.05,
  capHeadroom: 1.5,
  quorum: 2,
  agreementWaitMs: 1000,
  maxPacketLogBytes: 64 * 1024 * 1024,
};

export interface ReceiverOptions {
  transferId: number;
  url: string;
  mode: Mode;
  scheduler?: SchedulerName;
  sourceCount: number;
  /** Strict moving window in packets (paper's w). */
  window: number;
  generationSize: number;
  symbolSize: number;
  codec: Codec;
  now: number;
  config?: Partial<ReceiverConfig>;
  /** SHA-256 used to verify the object; defaults to a portable one, Node hosts pass node:crypto's. */
  sha256?: (data: Uint8Array) => Uint8Array;
}

/** Why a source was excluded as a polluter: its META, its DIGESTS, or its data. */
export type PollutionKind = 'meta' | 'digests' | 'data';

export interface Polluter {
  source: number;
  kind: PollutionKind;
  reason: string;
}

export type ReceiverStatus = 'active' | 'complete' | 'failed';
export type SourceState = 'connecting' | 'active' | 'failed' | 'dropped';

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
  error?: string;
  /** Excluded as a polluter (wrong META or DIGESTS, or a packet that failed a verified unit). */
  polluter: boolean;
}

export interface ReceiverStats {
  startedAt: number;
  completedAt?: number;
  dof: number;
  totalDof: number;
  objectLength?: number;
  feedbackSent: number;
  requestsSent: number;
  sources: SourceStats[];
}

interface Source {
  stats: SourceStats;
  heard: boolean;
  metaOk: boolean;
  requestDueAt: number;
  requestBackoff: number;
  largestSeq: number;
  largestSeqAt: number;
  /** Bit i = seq largestSeq - 1 - i received. */
  ackBits: number;
  lastArrivalAt: number;
  sinceFeedback: number;
  feedbackDue: boolean;
  lastFeedbackAt: number;
  stopDue: StopReasonCode | -1;
  lastStopAt: number;
  /** A REQUEST went to it: it may be fetching or sending even if nothing arrived yet. */
  requested: boolean;
  rate: RateEstimator;
  pollution?: PollutionKind;
}

export interface OutgoingDatagram {
  source: number;
  bytes: Uint8Array;
}

export class Receiver {
  readonly transferId: number;
  status: ReceiverStatus = 'active';
  error?: TransferError;
  private readonly config: ReceiverConfig;
  private readonly sources: Source[];
  private readonly opts: ReceiverOptions;
  private readonly scheduler: SchedulerName;
  private readonly agreement: Agreement;
  private layout?: Layout;
  private decoder?: CheckedDecoder;
  private unitsPerCheck = 1;
  /**
   * Set once a check unit failed or a polluter's packets were discarded: from then on feedback
   * carries the rewind flag, so sources accept ranks lower than what they were told before.
   */
  private rewound = false;
  /**
   * The identity was agreed by fewer sources than the quorum (the others failed or stayed silent
   * for agreementWaitMs): a later META that disagrees then fails the transfer instead of being
   * dropped, so a rogue source cannot win just by answering while the honest ones are slow.
   */
  private provisional = false;
  private windowUnits = 0;
  private wMin = 0;
  private object?: Uint8Array;
  private lastProgressAt: number;
  private readonly startedAt: number;
  private completedAt?: number;
  private feedbackSent = 0;
  private requestsSent = 0;
  private pollCursor = 0;
  private publishedWeights?: Uint8Array;
  /** When the first META from any source arrived. */
  private firstMetaAt = -1;
  private lastAgreementCheckAt = -Infinity;
  /** When the first data packet from any source arrived. */
  private firstDataAt = -1;

  constructor(opts: ReceiverOptions) {
    if (!Number.isInteger(opts.sourceCount) || opts.sourceCount < 1 || opts.sourceCount > MAX_SOURCES) {
      throw new RangeError(`sourceCount must be in [1, ${MAX_SOURCES}]`);
    }
    this.scheduler = opts.scheduler ?? DEFAULT_SCHEDULER[opts.mode];
    if (!schedulerSupports(opts.mode, this.scheduler)) {
      throw new RangeError(`scheduler ${this.scheduler} does not support mode ${opts.mode}`);
    }
    if (opts.codec.mode !== opts.mode) throw new RangeError(`codec ${opts.codec.name} is not for mode ${opts.mode}`);
    this.opts = opts;
    this.transferId = opts.transferId >>> 0;
    this.config = { ...DEFAULT_RECEIVER_CONFIG, ...opts.config };
    this.config.maxObjectBytes = Math.min(this.config.maxObjectBytes, MAX_OBJECT_BYTES);
    this.config.inFlightCaps ??= this.scheduler === 'partitioned';
    this.startedAt = opts.now;
    this.lastProgressAt = opts.now;
    this.sources = Array.from({ length: opts.sourceCount }, () => ({
      stats: {
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
      },
      heard: false,
      metaOk: false,
      requestDueAt: opts.now,
      requestBackoff: this.config.requestRetryMs,
      largestSeq: -1,
      largestSeqAt: 0,
      ackBits: 0,
      lastArrivalAt: 0,
      sinceFeedback: 0,
      feedbackDue: false,
      lastFeedbackAt: opts.now,
      stopDue: -1,
      requested: false,
      lastStopAt: -Infinity,
      rate: new RateEstimator(this.config.trainLength, this.config.medianWindow),
    }));
    const checkCountOf = (length: number) =>
      new CheckLayout(new Layout(opts.mode, length, opts.symbolSize, opts.generationSize)).checkCount;
    this.agreement = new Agreement(opts.sourceCount, checkCountOf, opts.sha256 ?? sha256);
  }

  // ------------------------------------------------------------------ input

  handleDatagram(sourceIndex: number, bytes: Uint8Array, now: number): void {
    const source = this.sources[sourceIndex];
    if (!source) return;
    const decoded = decode(bytes);
    if (!decoded.ok || decoded.value.transferId !== this.transferId) {
      source.stats.malformed++;
      return;
    }
    if (source.stats.state === 'failed' || source.stats.state === 'dropped') return;
    const m = decoded.value;
    switch (m.type) {
      case MessageType.Meta:
        this.onMeta(sourceIndex, m, now);
        break;
      case MessageType.Digests:
        this.onDigests(sourceIndex, m, now);
        break;
      case MessageType.DataUncoded:
        this.onData(sourceIndex, m.seq, m.index, 0, m.payload, bytes.length, now, this.opts.mode === 'uncoded');
        break;
      case MessageType.DataRlnc:
        this.onData(sourceIndex, m.seq, m.generation, m.seed, m.payload, bytes.length, now, this.opts.mode === 'rlnc');
        break;
      case MessageType.DataFountain:
        this.onData(
          sourceIndex,
          m.seq,
          m.block,
          m.blockId,
          m.payload,
          bytes.length,
          now,
          this.opts.mode === 'fountain',
        );
        break;
      case MessageType.Error:
        this.markSource(source, 'failed', `source error, ${describeErrorCode(m.code)}: ${m.message}`);
        this.evaluateAgreement(now);
        this.startIfReady(now);
        break;
      default:
        source.stats.malformed++;
    }
  }

  private hear(source: Source): void {
    source.heard = true;
    if (source.stats.state === 'connecting') source.stats.state = 'active';
  }

  private onMeta(sourceIndex: number, m: MetaMessage, now: number): void {
    const source = this.sources[sourceIndex];
    const o = this.opts;
    this.hear(source);
    if (m.mode !== o.mode || m.symbolSize !== o.symbolSize || m.generationSize !== o.generationSize) {
      this.dropPolluter(sourceIndex, 'meta', 'metadata does not match the request');
      return;
    }
    if (this.firstMetaAt < 0) this.firstMetaAt = now;
    this.agreement.propose(sourceIndex, m);
    if (this.agreement.agreed) this.checkAgainstAgreed(sourceIndex);
    else this.evaluateAgreement(now);
    this.startIfReady(now);
  }

  /**
   * Agreement needs `quorum` sources, or all that can still answer when fewer can: a source that
   * failed before its META does not count, one that sent META and then failed still votes.
   */
  private evaluateAgreement(now: number): void {
    if (this.agreement.agreed || this.status !== 'active') return;
    const counted = (i: number) => this.sources[i].stats.state !== 'dropped';
    const waited = this.firstMetaAt >= 0 && now - this.firstMetaAt >= this.config.agreementWaitMs;
    // Live and not (yet) written off as silent: it may still cast its vote.
    const mayVote = (s: Source, i: number) => isLive(s) && !this.agreement.proposalOf(i) && !(waited && !s.heard);
    const voted = (i: number) => counted(i) && this.agreement.proposalOf(i) !== undefined;
    const able = this.sources.filter((s, i) => mayVote(s, i) || voted(i)).length;
    const undecided = this.sources.filter(mayVote).length;
    const required = Math.max(1, Math.min(this.config.quorum, able));
    const verdict = this.agreement.evaluate(required, counted, undecided);
    if (verdict === 'impossible') {
      this.fail('metadata-conflict', 'the sources disagree on the object (length, digest or unit root)');
      return;
    }
    if (verdict !== 'agreed') return;
    this.provisional = required < Math.min(this.config.quorum, this.sources.length);
    const length = this.agreement.identity()?.objectLength ?? 0;
    if (length > this.config.maxObjectBytes) {
      this.fail('object-too-large', `object of ${length} bytes exceeds the limit of ${this.config.maxObjectBytes}`);
      return;
    }
    for (let i = 0; i < this.sources.length; i++) if (this.agreement.proposalOf(i)) this.checkAgainstAgreed(i);
    this.startIfReady(now);
  }

  private checkAgainstAgreed(sourceIndex: number): void {
    const source = this.sources[sourceIndex];
    if (!isLive(source) && source.stats.state !== 'failed') return;
    if (!this.agreement.agrees(sourceIndex)) {
      if (this.provisional) {
        // Accepted from fewer sources than the quorum (the others were silent or failed): a late
        // answer that disagrees may well be the honest one, so nobody can be believed.
        this.fail(
          'metadata-conflict',
          'a source that answered late disagrees with the identity accepted from fewer sources than the quorum',
        );
        return;
      }
      this.dropPolluter(sourceIndex, 'meta', 'reported a different length, digest or unit root than the agreed one');
      return;
    }
    if (!source.metaOk) {
      source.metaOk = true;
      source.feedbackDue = true;
    }
  }

  private onDigests(sourceIndex: number, m: DigestsMessage, now: number): void {
    this.hear(this.sources[sourceIndex]);
    const proposal = this.agreement.proposalOf(sourceIndex);
    // No list is kept for an identity too large to download (it could never be agreed to).
    if (this.decoder || (proposal && proposal.objectLength > this.config.maxObjectBytes)) return;
    if (this.agreement.addDigests(sourceIndex, m.first, m.digests) === 'bad') {
      this.dropPolluter(sourceIndex, 'digests', 'sent unit digests that do not match its unit root');
      return;
    }
    this.startIfReady(now);
  }

  /** Data is used only once the identity is agreed and its unit digests are known. */
  private startIfReady(now: number): void {
    if (this.decoder || this.status !== 'active') return;
    const agreed = this.agreement.agreed;
    const digests = this.agreement.digests();
    if (!agreed || !digests) return;
    const o = this.opts;
    this.layout = new Layout(o.mode, agreed.objectLength, o.symbolSize, o.generationSize);
    this.decoder = new CheckedDecoder(this.layout, o.codec, digests, o.sha256 ?? sha256, this.config.maxPacketLogBytes);
    this.unitsPerCheck = this.decoder.checks.unitsPerCheck;
    this.windowUnits = this.layout.windowUnits(o.window);
    this.lastProgressAt = now;
    for (const s of this.sources) if (s.metaOk) s.feedbackDue = true;
    if (this.allUnitsComplete) this.finish(now);
  }

  /** Every unit decoded (a fountain block may take a few packets beyond its symbol count). */
  private get allUnitsComplete(): boolean {
    return this.decoder !== undefined && this.decoder.allVerified;
  }

  private onData(
    sourceIndex: number,
    seq: number,
    unit: number,
    key: number,
    payload: Uint8Array,
    bytes: number,
    now: number,
    modeMatches: boolean,
  ): void {
    const source = this.sources[sourceIndex];
    this.hear(source);
    if (this.firstDataAt < 0) this.firstDataAt = now;
    const s = source.stats;
    s.received++;
    s.bytes += bytes;
    source.lastArrivalAt = now;
    source.rate.onPacket(seq, bytes, now);
    s.rateBps = source.rate.bytesPerSecond;
    recordSeq(source, seq, now);
    if (++source.sinceFeedback >= this.config.ackEveryPackets) source.feedbackDue = true;
    if (this.status !== 'active') {
      s.afterComplete++;
      // Tell a source that missed the STOP, but not once per packet.
      if (this.status === 'complete' && now - source.lastStopAt >= this.config.feedbackIntervalMs)
        source.stopDue = StopReason.Complete;
      return;
    }
    if (!modeMatches) {
      s.invalid++;
      return;
    }
    if (!this.decoder || !this.layout || !source.metaOk) {
      s.beforeMeta++;
      return;
    }
    // Sources send only inside the window; beyond it (plus a check unit of slack, as an uncoded
    // source's window runs ahead of a check unit still being verified) a packet would only cost memory.
    if (unit >= this.wMin + this.windowUnits + 2 * this.unitsPerCheck) {
      s.invalid++;
      return;
    }
    const failedBefore = this.decoder.failedChecks;
    const outcome = this.decoder.add(sourceIndex, unit, key, payload);
    const checkFailed = this.decoder.failedChecks !== failedBefore;
    if (checkFailed) this.rewound = true;
    if (outcome.result === 'invalid') s.invalid++;
    else if (outcome.result === 'redundant') s.redundant++;
    else {
      s.useful++;
      this.lastProgressAt = now;
    }
    this.afterCheck([outcome], now, checkFailed);
  }

  private lowestIncomplete(from: number): number {
    const decoder = this.decoder;
    const layout = this.layout;
    if (!decoder || !layout) return from;
    let u = from;
    while (u < layout.unitCount && decoder.rank(u) >= layout.unitSize(u)) u++;
    return u;
  }

  /** Acts on what the checked decoder found: polluters out, verified units slide the window. */
  private afterCheck(outcomes: CheckOutcome[], now: number, checkFailed: boolean): void {
    const decoder = this.decoder;
    const layout = this.layout;
    if (!decoder || !layout) return;
    let verified = false;
    let lowered = checkFailed;
    while (outcomes.length > 0) {
      const o = outcomes.shift() as CheckOutcome;
      if (o.unrecoverable) {
        this.fail('digest-mismatch', o.unrecoverable);
        return;
      }
      verified ||= o.verified;
      for (const p of o.polluters) {
        if (this.sources[p].stats.polluter) continue;
        this.dropPolluter(p, 'data', 'sent data that failed a unit digest');
        if (this.status !== 'active') return;
        this.rewound = true;
        lowered = true;
        outcomes.push(...decoder.exclude(p));
        // Its share goes to the others at once, and they learn what must be sent again.
        for (const other of this.sources) other.feedbackDue = true;
      }
    }
    if (verified && layout.mode !== 'uncoded') {
      // A finished generation must reach every source soon, or they keep sending into it.
      for (const other of this.sources) other.feedbackDue = true;
    }
    // wMin is the lowest unit not complete: received (uncoded, even while its check unit waits
    // for the rest) or decoded and verified (coded). A failed check unit lowers ranks: go back.
    this.wMin = this.lowestIncomplete(lowered ? 0 : this.wMin);
    if (this.allUnitsComplete) this.finish(now);
  }

  private finish(now: number): void {
    const { decoder } = this;
    const meta = this.agreement.agreed;
    if (!decoder || !meta) return;
    const object = decoder.object;
    if (object.length !== meta.objectLength) {
      this.fail('length-mismatch', `reassembled ${object.length} bytes, expected ${meta.objectLength}`);
      return;
    }
    if (!bytesEqual((this.opts.sha256 ?? sha256)(object), meta.digest)) {
      this.fail('digest-mismatch', 'SHA-256 of the reassembled object differs from the digest the sources reported');
      return;
    }
    this.object = object;
    this.status = 'complete';
    this.completedAt = now;
    decoder.free();
    for (const source of this.sources) if (source.heard && isLive(source)) source.stopDue = StopReason.Complete;
  }

  private fail(code: TransferErrorCode, message: string): void {
    if (this.status !== 'active') return;
    this.status = 'failed';
    this.error = new TransferError(code, message);
    this.decoder?.free();
    // Also to sources asked but not heard yet (a cancel before META): they would fetch and send for nothing.
    for (const source of this.sources) {
      if ((source.heard || source.requested) && isLive(source)) source.stopDue = StopReason.Cancelled;
    }
  }

  private markSource(source: Source, state: 'failed' | 'dropped', reason: string): void {
    source.stats.state = state;
    source.stats.error = reason;
    if (this.status === 'active' && this.sources.every((s) => !isLive(s))) {
      const reasons = this.sources.map((s, i) => `#${i}: ${s.stats.error ?? s.stats.state}`).join('; ');
      this.fail('all-sources-failed', `no source can serve the object (${reasons})`);
    }
  }

  private dropSource(source: Source, reason: string): void {
    source.stopDue = StopReason.BadSource;
    this.markSource(source, 'dropped', reason);
  }

  /** Excludes a source for the rest of the download and remembers it as a polluter (to report). */
  private dropPolluter(sourceIndex: number, kind: PollutionKind, reason: string): void {
    const source = this.sources[sourceIndex];
    source.stats.polluter = true;
    source.pollution ??= kind;
    source.metaOk = false;
    if (isLive(source)) this.dropSource(source, reason);
    else source.stats.error = reason;
    if (!this.agreement.agreed) this.evaluateAgreement(this.lastProgressAt);
  }

  /** Sources excluded as polluters, with why: the client reports them to origo. */
  polluters(): Polluter[] {
    const out: Polluter[] = [];
    this.sources.forEach((s, source) => {
      if (s.pollution) out.push({ source, kind: s.pollution, reason: s.stats.error ?? 'polluted' });
    });
    return out;
  }

  /**
   * The host lost its connection to a source (peer closed, channel failed): it gets no more share
   * of the work at once instead of after `inactiveAfterMs` of silence. Coded modes need nothing
   * of what it sent; the download fails only when no source is left.
   */
  sourceLost(sourceIndex: number, reason: string): void {
    const source = this.sources[sourceIndex];
    if (!source || !isLive(source)) return;
    this.markSource(source, 'failed', reason);
    this.evaluateAgreement(this.lastProgressAt);
  }

  /** Give up on the download. */
  cancel(): void {
    this.fail('cancelled', 'cancelled by the caller');
  }

  // ------------------------------------------------------------------ output

  pollDatagram(now: number): OutgoingDatagram | null {
    const n = this.sources.length;
    for (let k = 0; k < n; k++) {
      const index = (this.pollCursor + k) % n;
      const bytes = this.datagramFor(index, now);
      if (bytes) {
        this.pollCursor = (index + 1) % n;
        return { source: index, bytes };
      }
    }
    return null;
  }

  private datagramFor(index: number, now: number): Uint8Array | null {
    const source = this.sources[index];
    if (source.stopDue !== -1) {
      const reason = source.stopDue;
      source.stopDue = -1;
      source.lastStopAt = now;
      return encodeStop({ transferId: this.transferId, reason });
    }
    if (this.status !== 'active' || !isLive(source)) return null;
    // REQUEST again until the source's META arrives, even when its data does: agreement needs
    // its vote, and a repeated REQUEST makes a sender repeat its META at once.
    const noMeta = !this.agreement.proposalOf(index);
    if (noMeta && now >= source.requestDueAt) {
      source.requestDueAt = now + source.requestBackoff;
      source.requestBackoff = Math.min(source.requestBackoff * 2, this.config.maxRequestRetryMs);
      this.requestsSent++;
      source.requested = true;
      return this.request(index);
    }
    if (!source.heard) return null;
    if (!source.feedbackDue && now < source.lastFeedbackAt + this.config.feedbackIntervalMs) return null;
    source.feedbackDue = false;
    source.sinceFeedback = 0;
    source.lastFeedbackAt = now;
    this.feedbackSent++;
    return this.feedback(index, now);
  }

  private request(index: number): Uint8Array {
    const o = this.opts;
    return encodeRequest({
      transferId: this.transferId,
      mode: o.mode,
      scheduler: this.scheduler,
      sourceIndex: index,
      sourceCount: this.sources.length,
      window: o.window,
      generationSize: o.generationSize,
      symbolSize: o.symbolSize,
      url: o.url,
    });
  }

  private feedback(index: number, now: number): Uint8Array {
    const source = this.sources[index];
    const weights = this.weights(now);
    const common: FeedbackCommon = {
      transferId: this.transferId,
      metaKnown: source.metaOk && this.decoder !== undefined,
      rewind: this.rewound,
      complete: false,
      largestSeq: source.largestSeq < 0 ? NO_SEQ : source.largestSeq,
      ackDelay: source.largestSeq < 0 ? 0 : (now - source.largestSeqAt) * 10,
      ackBits: source.ackBits,
      rateBps: source.rate.bytesPerSecond,
      inFlightCap: UNLIMITED_IN_FLIGHT,
      weights,
      wMin: this.wMin,
    };
    const layout = this.layout;
    const decoder = this.decoder;
    if (!layout || !decoder) {
      if (this.opts.mode === 'uncoded')
        return encodeFeedbackUncoded({ ...common, bitmap: new Uint8Array(0), bitCount: 0 });
      if (this.opts.mode === 'rlnc') return encodeFeedbackRlnc({ ...common, ranks: new Uint8Array(0) });
      return encodeFeedbackFountain({ ...common, missing: new Uint16Array(0) });
    }
    // windowUnits never exceeds what one feedback of the mode can report (Layout.windowUnits).
    const count = Math.min(this.windowUnits, layout.unitCount - this.wMin);
    let windowMissing = 0;
    if (this.opts.mode === 'uncoded') {
      const bitmap = new Uint8Array((count + 7) >> 3);
      for (let i = 0; i < count; i++) {
        if (decoder.rank(this.wMin + i) > 0) bitmap[i >> 3] |= 1 << (i & 7);
        else windowMissing++;
      }
      common.inFlightCap = this.inFlightCap(source, weights, index, windowMissing);
      return encodeFeedbackUncoded({ ...common, bitmap, bitCount: count });
    }
    if (this.opts.mode === 'fountain') {
      const missing = new Uint16Array(count);
      for (let i = 0; i < count; i++) {
        const u = this.wMin + i;
        // A fountain decoder may need a block or two beyond the symbol count: never report 0 early.
        missing[i] = decoder.isVerified(u) ? 0 : Math.max(1, layout.unitSize(u) - decoder.rank(u));
        windowMissing += missing[i];
      }
      common.inFlightCap = this.inFlightCap(source, weights, index, windowMissing);
      return encodeFeedbackFountain({ ...common, missing });
    }
    const ranks = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      ranks[i] = decoder.rank(this.wMin + i);
      windowMissing += layout.unitSize(this.wMin + i) - ranks[i];
    }
    common.inFlightCap = this.inFlightCap(source, weights, index, windowMissing);
    return encodeFeedbackRlnc({ ...common, ranks });
  }

  /**
   * Each source's share of the work, quantised to `weightLevels`: proportional to its measured
   * rate; sources without an estimate yet count as average; silent or failed sources get none.
   */
  private weights(now: number): Uint8Array {
    const n = this.sources.length;
    const rates = new Array<number>(n).fill(0);
    let known = 0;
    let knownSum = 0;
    for (let i = 0; i < n; i++) {
      const s = this.sources[i];
      if (!isLive(s)) continue;
      // Silent: stopped sending, or never started while others have been sending for a while.
      const silent =
        s.stats.received > 0
          ? now - s.lastArrivalAt > this.config.inactiveAfterMs
          : this.firstDataAt >= 0 && now - this.firstDataAt > this.config.inactiveAfterMs;
      if (silent) continue;
      const rate = s.rate.bytesPerSecond;
      rates[i] = rate > 0 ? rate : -1;
      if (rate > 0) {
        known++;
        knownSum += rate;
      }
    }
    const average = known > 0 ? knownSum / known : 1;
    let total = 0;
    for (let i = 0; i < n; i++) {
      if (rates[i] < 0) rates[i] = average;
      total += rates[i];
    }
    const weights = new Uint8Array(n);
    if (total === 0) return weights; // all zero = equal shares (see Partition)
    const levels = this.config.weightLevels;
    for (let i = 0; i < n; i++) if (rates[i] > 0) weights[i] = Math.max(1, Math.round((levels * rates[i]) / total));
    if (!this.publishedWeights || this.weightsMoved(this.publishedWeights, weights)) this.publishedWeights = weights;
    return this.publishedWeights;
  }

  private weightsMoved(published: Uint8Array, next: Uint8Array): boolean {
    for (let i = 0; i < next.length; i++) {
      const a = published[i];
      const b = next[i];
      if ((a === 0) !== (b === 0)) return true; // a source died or came back
      if (Math.abs(a - b) > this.config.weightHysteresis * a) return true;
    }
    return false;
  }

  /**
   * What the sources have in flight beyond what the window still misses is the main waste of
   * multi-source coding: it arrives after a generation or the object is complete. Only the client
   * knows every source's share, so it caps each source's packets in flight at its share of the
   * DoF the window misses (plus loss and a little slack). Near the end of the object this shrinks
   * with what is left, so the sources stop together.
   */
  private inFlightCap(source: Source, weights: Uint8Array, index: number, windowMissing: number): number {
    if (!this.config.inFlightCaps) return UNLIMITED_IN_FLIGHT;
    let total = 0;
    for (const w of weights) total += w;
    const share = total === 0 ? 1 / weights.length : weights[index] / total;
    const sent = source.largestSeq + 1;
    const loss = sent > 0 ? Math.max(0, 1 - source.stats.received / sent) : 0;
    const c = this.config;
    const cap =
      Math.ceil(windowMissing * Math.min(1, share * c.capHeadroom) * (1 + loss + c.capLossMargin)) + c.capSlackPackets;
    return Math.min(cap, UNLIMITED_IN_FLIGHT - 1);
  }

  // ------------------------------------------------------------------ timers

  nextDeadline(): number | null {
    if (this.status !== 'active') return null;
    let deadline = this.lastProgressAt + this.config.stallTimeoutMs;
    for (const s of this.sources) {
      if (!isLive(s)) continue;
      deadline = Math.min(deadline, s.heard ? s.lastFeedbackAt + this.config.feedbackIntervalMs : s.requestDueAt);
    }
    this.sources.forEach((s, i) => {
      if (isLive(s) && s.heard && !this.agreement.proposalOf(i)) deadline = Math.min(deadline, s.requestDueAt);
    });
    const wait = this.firstMetaAt + this.config.agreementWaitMs;
    if (!this.agreement.agreed && this.firstMetaAt >= 0 && wait > this.lastAgreementCheckAt)
      deadline = Math.min(deadline, wait);
    return deadline;
  }

  handleTimeout(now: number): void {
    if (this.status !== 'active') return;
    if (!this.agreement.agreed && this.firstMetaAt >= 0) {
      this.lastAgreementCheckAt = now;
      this.evaluateAgreement(now);
      if (this.status !== 'active') return;
    }
    if (now - this.lastProgressAt >= this.config.stallTimeoutMs) {
      this.fail(
        'stalled',
        `no progress for ${this.config.stallTimeoutMs} ms (${this.decoder?.dof ?? 0} of ${this.layout?.totalDof ?? '?'} DoF)`,
      );
    }
  }

  // ------------------------------------------------------------------ results

  /** The verified object, once status is 'complete'. */
  takeObject(): Uint8Array {
    if (!this.object) throw new Error(`transfer is ${this.status}, no object`);
    return this.object;
  }

  get objectLength(): number | undefined {
    return this.agreement.agreed?.objectLength;
  }

  stats(): ReceiverStats {
    return {
      startedAt: this.startedAt,
      completedAt: this.completedAt,
      dof: this.decoder?.dof ?? 0,
      totalDof: this.layout?.totalDof ?? 0,
      objectLength: this.agreement.agreed?.objectLength,
      feedbackSent: this.feedbackSent,
      requestsSent: this.requestsSent,
      sources: this.sources.map((s) => ({ ...s.stats })),
    };
  }
}

/** Tracks the largest data seq from a source and which of the 32 before it arrived. */
function recordSeq(source: Source, seq: number, now: number): void {
  const largest = source.largestSeq;
  if (largest < 0 || seq > largest) {
    const shift = largest < 0 ? 64 : seq - largest;
    if (shift > 32) source.ackBits = 0;
    else if (shift === 32) source.ackBits = 0x80000000;
    else source.ackBits = ((source.ackBits << shift) | (1 << (shift - 1))) >>> 0;
    source.largestSeq = seq;
    source.largestSeqAt = now;
    return;
  }
  const back = largest - 1 - seq;
  if (back >= 0 && back < 32) source.ackBits = (source.ackBits | (1 << back)) >>> 0;
}

function isLive(s: Source): boolean {
  return s.stats.state === 'connecting' || s.stats.state === 'active';
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
