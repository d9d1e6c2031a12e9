/**
 * MUTP receiver: one object downloaded from N sources at once (the client side). Sans-IO: the
 * caller feeds datagrams per source with the time, pulls datagrams to send (requests, feedback,
 * stops) and calls handleTimeout at nextDeadline(). It owns the transfer and ties its parts
 * together, as quinn-proto's Connection owns its streams and congestion state:
 *
 * - `Source` (source.ts): each source's own bookkeeping (counters, timers, acks, rate, exclusion);
 * - `IdentityQuorum` (quorum.ts): the META votes that settle the object's identity;
 * - `Steering` (steering.ts): each source's share (weights) and in-flight cap, sent in FEEDBACK
 *   (feedback.ts);
 * - `Completion` (completion.ts): decoding, per-unit verification, the window, the final object.
 *
 * None of them imports this module; what one part's outcome means for the others (a polluter
 * found while decoding is excluded, which may end the transfer) is decided here.
 */
import { sha256 } from '@noble/hashes/sha256';
import { TransferError, TransferErrorCode } from '../errors';
import { CheckLayout } from '../integrity';
import { Layout } from '../layout';
import { MAX_DATAGRAM_BYTES, UNIT_DIGEST_BYTES } from '../limits';
import { ObjectAttributes, servedRangeProblem } from '../range';
import {
  decode,
  describeErrorCode,
  DigestsMessage,
  encodeRequest,
  encodeStop,
  encodeSymbolDigestsRequest,
  MAX_BLOCK_ROUND,
  MessageType,
  Message,
  MetaMessage,
  RequestMessage,
  RequestResume,
  requestLength,
  SchedulerName,
  StopReason,
  SymbolDigestsMessage,
} from '../wire';
import { CheckOutcome } from './check-units';
import { Completion } from './completion';
import { ReceiverConfig } from './config';
import { checkReceiverOptions, receiverConfig, ReceiverOptions } from './options';
import { EarlyData } from './early-data';
import { encodeSourceFeedback } from './feedback';
import { IdentityQuorum } from './quorum';
import { PollutionKind, Polluter, Source, SourceStats } from './source';
import { Steering } from './steering';
import { SymbolAsks } from './symbol-asks';
import { MetaSignatures } from './meta-signatures';

export { DEFAULT_RECEIVER_CONFIG } from './config';
export type { ReceiverConfig } from './config';
export type { ReceiverOptions } from './options';
export type { Polluter, PollutionKind, SourceState, SourceStats } from './source';

export type ReceiverStatus = 'active' | 'complete' | 'failed';

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

export interface OutgoingDatagram {
  source: number;
  bytes: Uint8Array;
}

export class Receiver {
  readonly transferId: number;
  status: ReceiverStatus = 'active';
  error?: TransferError;
  private readonly config: ReceiverConfig;
  private readonly opts: ReceiverOptions;
  private readonly scheduler: SchedulerName;
  private readonly sources: Source[];
  /** Fountain: per source index, the round after the highest block id it sent (REQUEST resume). */
  private readonly nextBlockRound: Uint32Array;
  private readonly quorum: IdentityQuorum;
  /** Integrity on (always, but for the baseline that measures its cost: ReceiverConfig.integrity). */
  private readonly checked: boolean;
  /** The object is complete and waits for the identities still to come (IdentityQuorum.votesPending). */
  private holding = false;
  private readonly steering: Steering;
  private readonly completion: Completion;
  private readonly early: EarlyData;
  private readonly symbolAsks: SymbolAsks;
  private readonly signatures: MetaSignatures;
  private lastProgressAt: number;
  private readonly startedAt: number;
  private completedAt?: number;
  private feedbackSent = 0;
  private requestsSent = 0;
  private pollCursor = 0;

  constructor(opts: ReceiverOptions) {
    this.scheduler = checkReceiverOptions(opts);
    this.opts = opts;
    this.transferId = opts.transferId >>> 0;
    const config = receiverConfig(opts, this.scheduler);
    this.config = config;
    this.startedAt = opts.now;
    this.lastProgressAt = opts.now;
    this.sources = Array.from({ length: opts.sourceCount }, () => new Source(opts.now, config));
    this.nextBlockRound = new Uint32Array(opts.sourceCount);
    const hash = opts.sha256 ?? sha256;
    const checkCountOf = (length: number) =>
      new CheckLayout(new Layout(opts.mode, length, opts.symbolSize, opts.generationSize)).checkCount;
    this.checked = config.integrity === 'checked';
    const quorum = this.checked ? config.quorum : 1;
    this.quorum = new IdentityQuorum(opts.sourceCount, checkCountOf, hash, quorum, config.agreementWaitMs);
    this.steering = new Steering(config, opts.capacityHints);
    this.completion = new Completion({
      mode: opts.mode,
      symbolSize: opts.symbolSize,
      generationSize: opts.generationSize,
      window: opts.window,
      codec: opts.codec,
      sha256: hash,
      maxPacketLogBytes: config.maxPacketLogBytes,
      checked: this.checked,
    });
    this.symbolAsks = new SymbolAsks(config.symbolDigestRetryMs);
    this.signatures = new MetaSignatures(
      opts.signers ?? [],
      { url: opts.url, ...(opts.range ? { range: opts.range } : {}) },
      opts.verifySignature,
    );
    // A window's worth per source: what a source sends before it hears any feedback.
    this.early = new EarlyData(opts.sourceCount, Math.max(1, opts.window));
  }

  // ------------------------------------------------------------------ input

  handleDatagram(sourceIndex: number, bytes: Uint8Array, now: number): void {
    const source = this.sources[sourceIndex];
    if (!source) return;
    const decoded = decode(bytes);
    if (!decoded.ok) {
      source.stats.malformed++;
      return;
    }
    this.handleMessage(sourceIndex, decoded.value, bytes.length, now);
  }

  /**
   * A message from source `sourceIndex` that the caller already decoded (a link endpoint decodes
   * each datagram once to route it); `size` is its length on the wire. `arrivedAt` (at most `now`)
   * is when it reached the host, where the host reads datagrams in batches: the delivery-rate
   * estimate needs their arrival spacing, which `now` (the batch's reading) has lost.
   */
  handleMessage(sourceIndex: number, m: Message, size: number, now: number, arrivedAt = now): void {
    const source = this.sources[sourceIndex];
    if (!source) return;
    if (m.transferId !== this.transferId) {
      source.stats.malformed++;
      return;
    }
    if (!source.live) return;
    const mode = this.opts.mode;
    switch (m.type) {
      case MessageType.Meta:
        this.onMeta(sourceIndex, m, now);
        break;
      case MessageType.Digests:
        this.onDigests(sourceIndex, m, now);
        break;
      case MessageType.SymbolDigests:
        this.onSymbolDigests(sourceIndex, m, now);
        break;
      case MessageType.DataUncoded:
        this.onData(sourceIndex, m.seq, m.index, 0, m.payload, size, now, mode === 'uncoded', arrivedAt);
        break;
      case MessageType.DataRlnc:
        this.onData(sourceIndex, m.seq, m.generation, m.seed, m.payload, size, now, mode === 'rlnc', arrivedAt);
        break;
      case MessageType.DataFountain:
        this.onData(sourceIndex, m.seq, m.block, m.blockId, m.payload, size, now, mode === 'fountain', arrivedAt);
        break;
      case MessageType.Error:
        this.endSource(source, 'failed', `source error, ${describeErrorCode(m.code)}: ${m.message}`);
        this.evaluateAgreement(now);
        this.startIfReady(now);
        break;
      default:
        source.stats.malformed++;
    }
  }

  private onMeta(sourceIndex: number, m: MetaMessage, now: number): void {
    const o = this.opts;
    const answering = this.sources[sourceIndex];
    // A META while resuming: its sender had lost the transfer and started it again.
    if (answering.resuming) answering.restartTransport(now);
    answering.resuming = false;
    answering.hear(now);
    answering.answered(now);
    const answerMs = answering.stats.answerMs;
    if (answerMs !== undefined) {
      for (let i = 0; i < this.sources.length; i++)
        if (!this.quorum.proposalOf(i)) this.sources[i].paceRequests(answerMs, this.config.minRequestRetryMs);
    }
    if (m.mode !== o.mode || m.symbolSize !== o.symbolSize || m.generationSize !== o.generationSize) {
      this.dropPolluter(sourceIndex, 'meta', 'metadata does not match the request');
      return;
    }
    const rangeMismatch = this.rangeMismatch(m);
    if (rangeMismatch) {
      this.dropPolluter(sourceIndex, 'meta', rangeMismatch);
      return;
    }
    this.signatures.record(sourceIndex, m);
    // Before agreement every META may make or break it: only a signed one counts.
    if (this.checked && !this.quorum.identity() && !this.signatures.signed(sourceIndex)) {
      this.dropUnsigned(sourceIndex);
      return;
    }
    this.quorum.onMeta(sourceIndex, m, now);
    if (this.quorum.identity()) this.checkAgainstAgreed(sourceIndex);
    else this.evaluateAgreement(now);
    this.startIfReady(now);
    this.releaseIfHeld(now);
  }

  /** A held object is released once no identity is still to come (see finish). */
  private releaseIfHeld(now: number): void {
    if (this.holding && this.status === 'active') this.finish(now);
  }

  /**
   * A source whose META its published key did not sign: its word does not count, for or against.
   * Not reported: an unsigned META proves nothing to origo (and an honest proxy that restarted
   * since it was offered has a new key).
   */
  private dropUnsigned(sourceIndex: number): void {
    const source = this.sources[sourceIndex];
    if (source.live) source.stopDue = StopReason.Cancelled;
    this.endSource(source, 'dropped', 'its META is not signed by the key origo published for it');
    this.discardEarly(sourceIndex);
    if (!this.quorum.identity()) this.evaluateAgreement(this.lastProgressAt);
  }

  /** Why a META's bytes are not the range asked for (a ranged answer to an unranged request too). */
  private rangeMismatch(m: MetaMessage): string | undefined {
    const asked = this.opts.range;
    const served = m.attributes?.range;
    if (!asked) return served ? 'served a range of an object asked for whole' : undefined;
    if (!served) return 'served without the range asked for';
    const problem = servedRangeProblem(asked, served, m.objectLength);
    return problem ? `served a different range: ${problem}` : undefined;
  }

  /** What the agreed sources said of the object: Content-Type, position in the resource. */
  get attributes(): ObjectAttributes | undefined {
    return this.quorum.identity()?.attributes;
  }

  private evaluateAgreement(now: number): void {
    if (this.quorum.identity() || this.status !== 'active') return;
    const verdict = this.quorum.evaluate(this.sources, now);
    if (verdict === 'conflict') {
      this.fail('metadata-conflict', 'the sources disagree on the object (length, digest or unit root)');
      return;
    }
    if (verdict === 'unconfirmed') {
      this.fail(
        'metadata-unconfirmed',
        `fewer than ${this.config.quorum} sources could confirm the object (the others failed or stayed silent)`,
      );
      return;
    }
    if (verdict !== 'agreed') return;
    const length = this.quorum.identity()?.objectLength ?? 0;
    if (length > this.config.maxObjectBytes) {
      this.fail('object-too-large', `object of ${length} bytes exceeds the limit of ${this.config.maxObjectBytes}`);
      return;
    }
    for (let i = 0; i < this.sources.length; i++) if (this.quorum.proposalOf(i)) this.checkAgainstAgreed(i);
    this.startIfReady(now);
  }

  private checkAgainstAgreed(sourceIndex: number): void {
    const source = this.sources[sourceIndex];
    if (!source.live && source.stats.state !== 'failed') {
      this.discardEarly(sourceIndex);
      return;
    }
    if (!this.quorum.agrees(sourceIndex)) {
      if (!this.signatures.signed(sourceIndex)) {
        this.dropUnsigned(sourceIndex);
        return;
      }
      // However many agreed, a source that disagrees may be the honest one: only the origin can
      // tell, so the download fails (and falls back) instead of dropping and blaming it.
      this.fail('metadata-conflict', 'a source disagrees with the identity the others agreed on');
      return;
    }
    if (!source.metaOk) {
      source.metaOk = true;
      source.feedbackDue = true;
      this.replayEarly(sourceIndex, this.lastProgressAt);
    }
  }

  /** Uses what the source sent before its data could be used, once it can be (see early-data.ts). */
  private replayEarly(sourceIndex: number, now: number): void {
    if (!this.completion.started || !this.sources[sourceIndex].metaOk) return;
    for (const p of this.early.take(sourceIndex)) {
      if (this.status !== 'active') return;
      this.useData(sourceIndex, p.unit, p.key, p.payload, now);
    }
  }

  /** The source's held data will never be used (it was excluded): counted as arriving too early. */
  private discardEarly(sourceIndex: number): void {
    this.sources[sourceIndex].stats.beforeMeta += this.early.take(sourceIndex).length;
  }

  private onDigests(sourceIndex: number, m: DigestsMessage, now: number): void {
    this.sources[sourceIndex].hear(now);
    const proposal = this.quorum.proposalOf(sourceIndex);
    // No list is kept for an identity too large to download (it could never be agreed to).
    if (this.completion.started || (proposal && proposal.objectLength > this.config.maxObjectBytes)) return;
    if (this.quorum.addDigests(sourceIndex, m.first, m.digests) === 'bad') {
      this.dropPolluter(sourceIndex, 'digests', 'sent unit digests that do not match its unit root');
      return;
    }
    this.startIfReady(now);
  }

  private onSymbolDigests(sourceIndex: number, m: SymbolDigestsMessage, now: number): void {
    const source = this.sources[sourceIndex];
    source.hear(now);
    if (!this.completion.started || !source.metaOk || this.opts.mode !== 'uncoded') {
      source.stats.invalid++;
      return;
    }
    this.afterCheck([this.completion.symbolDigests(sourceIndex, m.check, m.first, m.digests)], now, false);
  }

  /** Data is used only once the identity is agreed and its unit digests are known. */
  private startIfReady(now: number): void {
    if (this.completion.started || this.status !== 'active') return;
    const agreed = this.quorum.identity();
    // The unchecked baseline waits for no digest list (the decoder then compares none).
    const digests = this.checked ? this.quorum.digests() : agreed && this.placeholderDigests(agreed.objectLength);
    if (!agreed || !digests) return;
    this.completion.start(agreed.objectLength, digests);
    this.lastProgressAt = now;
    for (const s of this.sources) if (s.metaOk) s.feedbackDue = true;
    if (this.completion.allUnitsComplete) this.finish(now);
    for (let i = 0; i < this.sources.length && this.status === 'active'; i++) this.replayEarly(i, now);
  }

  /** The unchecked baseline's stand-in for the digest list: the right size, never compared. */
  private placeholderDigests(objectLength: number): Uint8Array {
    const o = this.opts;
    const checks = new CheckLayout(new Layout(o.mode, objectLength, o.symbolSize, o.generationSize)).checkCount;
    return new Uint8Array(checks * UNIT_DIGEST_BYTES);
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
    arrivedAt: number,
  ): void {
    const source = this.sources[sourceIndex];
    this.steering.onData(now);
    source.onData(seq, bytes, now, Math.min(arrivedAt, now));
    const s = source.stats;
    if (this.status !== 'active') {
      s.afterComplete++;
      if (this.status === 'complete') source.remindComplete(now);
      return;
    }
    if (!modeMatches) {
      s.invalid++;
      return;
    }
    if (this.opts.mode === 'fountain') {
      const round = Math.min(Math.floor(key / this.sources.length) + 1, MAX_BLOCK_ROUND);
      if (round > this.nextBlockRound[sourceIndex]) this.nextBlockRound[sourceIndex] = round;
    }
    if (!this.completion.started || !source.metaOk) {
      if (!this.early.hold(sourceIndex, unit, key, payload)) s.beforeMeta++;
      return;
    }
    this.useData(sourceIndex, unit, key, payload, now);
  }

  /** Data from a source whose META matched the agreed identity: into the checked decoder. */
  private useData(sourceIndex: number, unit: number, key: number, payload: Uint8Array, now: number): void {
    const s = this.sources[sourceIndex].stats;
    if (this.completion.beyondWindow(unit)) {
      s.invalid++;
      return;
    }
    const { outcome, checkFailed } = this.completion.add(sourceIndex, unit, key, payload);
    if (outcome.result === 'invalid') s.invalid++;
    else if (outcome.result === 'redundant') s.redundant++;
    else {
      s.useful++;
      this.lastProgressAt = now;
    }
    this.afterCheck([outcome], now, checkFailed);
  }

  /** Acts on what the checked decoder found: polluters out, verified units slide the window. */
  private afterCheck(outcomes: CheckOutcome[], now: number, checkFailed: boolean): void {
    let verified = false;
    let lowered = checkFailed;
    while (outcomes.length > 0) {
      const o = outcomes.shift() as CheckOutcome;
      if (o.unrecoverable) {
        this.fail('digest-mismatch', o.unrecoverable);
        return;
      }
      verified ||= o.verified;
      if (o.askSymbolDigests !== undefined) this.symbolAsks.want(o.askSymbolDigests, now);
      if (o.symbolsKnown !== undefined) this.symbolAsks.settle(o.symbolsKnown);
      for (const p of o.liars ?? []) {
        if (this.sources[p].stats.polluter) continue;
        this.dropPolluter(p, 'digests', 'sent symbol digests that do not hash to the agreed unit digest');
        if (this.status !== 'active') return;
      }
      for (const p of o.polluters) {
        if (this.sources[p].stats.polluter) continue;
        this.dropPolluter(p, 'data', 'sent data that failed a unit digest');
        if (this.status !== 'active') return;
        lowered = true;
        outcomes.push(...this.completion.exclude(p));
        // Its share goes to the others at once, and they learn what must be sent again.
        for (const other of this.sources) other.feedbackDue = true;
      }
    }
    if (verified && this.opts.mode !== 'uncoded') {
      // A finished generation must reach every source soon, or they keep sending into it.
      for (const other of this.sources) other.feedbackDue = true;
    }
    // A failed check unit or a polluter's discarded packets lower ranks: search from 0 again.
    this.completion.slideWindow(lowered);
    if (this.completion.allUnitsComplete) this.finish(now);
  }

  private finish(now: number): void {
    const identity = this.quorum.identity();
    if (!this.completion.started || !identity) return;
    // Every live source states its identity first (or the wait for it ends): a late one that
    // disagrees still fails the download instead of arriving after the rogues' object was taken.
    this.holding = this.checked && this.quorum.votesPending(this.sources, now);
    if (this.holding) return;
    const failure = this.completion.verify(identity);
    if (failure) {
      this.fail(failure.code, failure.message);
      return;
    }
    this.status = 'complete';
    this.completedAt = now;
    this.completion.free();
    for (const source of this.sources) if (source.heard && source.live) source.stopDue = StopReason.Complete;
  }

  private fail(code: TransferErrorCode, message: string): void {
    if (this.status !== 'active') return;
    this.status = 'failed';
    this.error = new TransferError(code, message);
    this.completion.free();
    // Also to sources asked but not heard yet (a cancel before META): they would fetch and send for nothing.
    for (const source of this.sources) {
      if ((source.heard || source.requested) && source.live) source.stopDue = StopReason.Cancelled;
    }
  }

  /** A source can no longer serve; the download fails when none can. */
  private endSource(source: Source, state: 'failed' | 'dropped', reason: string): void {
    source.end(state, reason);
    this.failIfNoSourceLeft();
    this.releaseIfHeld(this.lastProgressAt);
  }

  private failIfNoSourceLeft(): void {
    if (this.status === 'active' && this.sources.every((s) => !s.live)) {
      const reasons = this.sources
        .map((s, i) => `${this.opts.sourceNames?.[i] ?? `#${i}`}: ${s.stats.error ?? s.stats.state}`)
        .join('; ');
      this.fail('all-sources-failed', `no source can serve the object (${reasons})`);
    }
  }

  /** Excludes a source for the rest of the download and remembers it as a polluter (to report). */
  private dropPolluter(sourceIndex: number, kind: PollutionKind, reason: string): void {
    this.sources[sourceIndex].exclude(kind, reason);
    this.discardEarly(sourceIndex);
    this.failIfNoSourceLeft();
    if (!this.quorum.identity()) this.evaluateAgreement(this.lastProgressAt);
  }

  /**
   * After a `metadata-conflict`: each source's META that its published key signed (encoded as it
   * was sent), when they state at least two identities. Evidence a third party can judge against
   * the origin (origo's `conflict`); empty without keys or without two signed sides.
   */
  conflictEvidence(): { source: number; meta: Uint8Array }[] {
    if (this.error?.code !== 'metadata-conflict') return [];
    return this.signatures.conflictEvidence((source) => this.quorum.proposalOf(source));
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
    if (!source || !source.live) return;
    this.endSource(source, 'failed', reason);
    this.evaluateAgreement(this.lastProgressAt);
  }

  /**
   * The host connected the source again after its connection was lost (a new peer connection,
   * possibly after a disconnection): it is asked again at once, as in a resume, and what it
   * decoded so far stays. Its sender on the new connection starts the transfer over.
   */
  /** Whether source `sourceIndex` is still part of the transfer (asked, or sending): its link is expected to speak. */
  sourceLive(sourceIndex: number): boolean {
    return this.sources[sourceIndex]?.live === true;
  }

  sourceReconnected(sourceIndex: number, now: number): void {
    const source = this.sources[sourceIndex];
    if (!source || !source.live || !source.heard) return;
    source.beginResume(now);
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
    const stop = source.takeStop(now);
    if (stop !== -1) return encodeStop({ transferId: this.transferId, reason: stop });
    if (this.status !== 'active' || !source.live) return null;
    // REQUEST again until the source's META arrives, even when its data does: agreement needs
    // its vote, and a repeated REQUEST makes a sender repeat its META at once.
    if (!this.quorum.proposalOf(index) && source.takeRequest(now)) {
      this.requestsSent++;
      return this.request(index);
    }
    if (this.quorum.proposalOf(index) && source.takeResumeRequest(now, this.config.resumeAfterMs)) {
      this.requestsSent++;
      return this.request(index);
    }
    if (source.metaOk && !source.stats.polluter && this.symbolAsks.size > 0) {
      const check = this.symbolAsks.takeFor(index, now);
      if (check >= 0) return encodeSymbolDigestsRequest({ transferId: this.transferId, check });
    }
    if (!source.heard || !source.takeFeedback(now)) return null;
    this.feedbackSent++;
    return this.feedback(index, now);
  }

  private request(index: number): Uint8Array {
    const o = this.opts;
    const weights = this.steering.initialWeights(this.sources.length);
    const m: Omit<RequestMessage, 'type'> = {
      transferId: this.transferId,
      mode: o.mode,
      scheduler: this.scheduler,
      sourceIndex: index,
      sourceCount: this.sources.length,
      window: o.window,
      generationSize: o.generationSize,
      symbolSize: o.symbolSize,
      url: o.url,
      ...(o.range ? { range: o.range } : {}),
      ...(weights ? { weights } : {}),
    };
    // What is decoded already, for a source that starts the transfer again (a new connection,
    // a replacement): it sends none of it.
    const resume = this.resumePoint(index);
    if (resume) m.resume = resume;
    // Both parts are optional: where a long URL leaves no room, the resume part goes first, then
    // the weights (published ones come with every REQUEST after the first FEEDBACK).
    if (requestLength(m) > MAX_DATAGRAM_BYTES) delete m.resume;
    if (requestLength(m) > MAX_DATAGRAM_BYTES) delete m.weights;
    return encodeRequest(m);
  }

  private resumePoint(index: number): RequestResume | undefined {
    const fromUnit = this.completion.started ? this.completion.wMin : 0;
    const blockRound = this.nextBlockRound[index];
    return fromUnit > 0 || blockRound > 0 ? { fromUnit, blockRound } : undefined;
  }

  private feedback(index: number, now: number): Uint8Array {
    const source = this.sources[index];
    const weights = this.steering.weights(this.sources, now);
    return encodeSourceFeedback({
      transferId: this.transferId,
      mode: this.opts.mode,
      source,
      metaKnown: source.metaOk && this.completion.started,
      rewind: this.completion.rewound,
      wMin: this.completion.wMin,
      weights,
      report: this.completion.windowReport(),
      capFor: (windowMissing) => this.steering.inFlightCap(source, weights, index, windowMissing),
      now,
    });
  }

  // ------------------------------------------------------------------ timers

  nextDeadline(): number | null {
    if (this.status !== 'active') return null;
    let deadline = this.lastProgressAt + this.config.stallTimeoutMs;
    for (const s of this.sources) {
      if (!s.live) continue;
      deadline = Math.min(deadline, s.heard ? s.feedbackDeadline : s.requestDueAt);
    }
    this.sources.forEach((s, i) => {
      if (s.live && s.heard && !this.quorum.proposalOf(i)) deadline = Math.min(deadline, s.requestDueAt);
      if (s.live && s.heard)
        deadline = Math.min(deadline, Math.max(s.resumeDeadline, s.lastHeardAt + this.config.resumeAfterMs));
    });
    const wait = this.quorum.nextDeadline();
    if (wait !== null) deadline = Math.min(deadline, wait);
    if (this.holding) deadline = Math.min(deadline, this.quorum.holdDeadline);
    const ask = this.symbolAsks.nextDeadline();
    if (ask !== null) deadline = Math.min(deadline, ask);
    return deadline;
  }

  handleTimeout(now: number): void {
    if (this.status !== 'active') return;
    if (this.quorum.waiting) {
      this.quorum.noteTimedCheck(now);
      this.evaluateAgreement(now);
      if (this.status !== 'active') return;
    }
    this.releaseIfHeld(now);
    if (this.status !== 'active') return;
    if (now - this.lastProgressAt >= this.config.stallTimeoutMs) {
      this.fail('stalled', `no progress for ${this.config.stallTimeoutMs} ms (${this.completion.describeProgress()})`);
    }
  }

  // ------------------------------------------------------------------ results

  /** The verified object, once status is 'complete'; it can be taken once (the receiver keeps no reference). */
  takeObject(): Uint8Array {
    const object = this.completion.takeObject();
    if (!object)
      throw new Error(
        `transfer is ${this.status}, no object${this.status === 'complete' ? ' left: already taken' : ''}`,
      );
    return object;
  }

  get objectLength(): number | undefined {
    return this.quorum.identity()?.objectLength;
  }

  /** Degrees of freedom received and needed (0 before the layout is known): cheap, for per-datagram progress. */
  progress(): { dof: number; totalDof: number } {
    return { dof: this.completion.dof, totalDof: this.completion.totalDof };
  }

  stats(): ReceiverStats {
    return {
      startedAt: this.startedAt,
      completedAt: this.completedAt,
      dof: this.completion.dof,
      totalDof: this.completion.totalDof,
      objectLength: this.quorum.identity()?.objectLength,
      feedbackSent: this.feedbackSent,
      requestsSent: this.requestsSent,
      sources: this.sources.map((s) => ({ ...s.stats })),
    };
  }
}
