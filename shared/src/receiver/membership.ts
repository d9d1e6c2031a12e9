/**
 * The sources of a Receiver and the identity they agree on: each source's META and DIGESTS until
 * a quorum agreed on the object (quorum.ts) and its unit digests are known, each source checked
 * against the agreed identity, what a source sent before its data could be used (early-data.ts)
 * used once it can be, sources leaving (failed, unsigned, excluded as polluters), and how the
 * transfer ends, which a vote still to come can hold up. The datagram dispatch, what happens per
 * data packet, the sources' turns to send (outgoing.ts) and the API are Receiver's (receiver.ts),
 * which extends this class: one object, so the per-packet path reaches this state without an
 * indirection, and these decisions need no callbacks into it but `useData`.
 */
import { sha256 } from '@noble/hashes/sha256';
import { TransferError, TransferErrorCode } from '../errors';
import { CheckLayout } from '../integrity';
import { Layout } from '../layout';
import { UNIT_DIGEST_BYTES } from '../limits';
import { ObjectAttributes } from '../range';
import {
  ALL_CAPABILITIES,
  DigestsMessage,
  FetchingMessage,
  hasFeature,
  MetaMessage,
  SchedulerName,
  StopReason,
} from '../wire';
import { Completion } from './completion';
import { ReceiverConfig } from './config';
import { EarlyData } from './early-data';
import { MetaSignatures } from './meta-signatures';
import { checkReceiverOptions, metaMismatch, receiverConfig, ReceiverOptions } from './options';
import { IdentityQuorum } from './quorum';
import { PollutionKind, Source } from './source';
import { SourceFeatures } from './source-features';

export type ReceiverStatus = 'active' | 'complete' | 'failed';

export abstract class SourceMembership {
  readonly transferId: number;
  status: ReceiverStatus = 'active';
  error?: TransferError;
  protected readonly config: ReceiverConfig;
  protected readonly opts: ReceiverOptions;
  protected readonly scheduler: SchedulerName;
  protected readonly sources: Source[];
  protected readonly quorum: IdentityQuorum;
  /** Integrity on (always, but for the baseline that measures its cost: ReceiverConfig.integrity). */
  protected readonly checked: boolean;
  /** The object is complete and waits for the identities still to come (IdentityQuorum.votesPending). */
  protected holding = false;
  protected readonly completion: Completion;
  protected readonly early: EarlyData;
  private readonly signatures: MetaSignatures;
  /** What each source may be sent (source-features.ts). */
  protected readonly features: SourceFeatures;
  /** This client reads FETCHING (a client with `fetching` switched off drops it, as the release before). */
  private readonly readsFetching: boolean;
  protected lastProgressAt: number;
  protected readonly startedAt: number;
  protected completedAt?: number;

  constructor(opts: ReceiverOptions) {
    this.scheduler = checkReceiverOptions(opts);
    this.opts = opts;
    this.transferId = opts.transferId >>> 0;
    const config = receiverConfig(opts, this.scheduler);
    this.config = config;
    this.startedAt = opts.now;
    this.lastProgressAt = opts.now;
    this.sources = Array.from({ length: opts.sourceCount }, () => new Source(opts.now, config));
    const hash = opts.sha256 ?? sha256;
    const checkCountOf = (length: number) =>
      new CheckLayout(new Layout(opts.mode, length, opts.symbolSize, opts.generationSize)).checkCount;
    this.checked = config.integrity === 'checked';
    const quorum = this.checked ? config.quorum : 1;
    this.quorum = new IdentityQuorum(
      opts.sourceCount,
      checkCountOf,
      hash,
      quorum,
      config.agreementWaitMs,
      config.fetchingWaitMs,
      opts.sourceOperators,
    );
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
    this.signatures = new MetaSignatures(
      opts.signers ?? [],
      { url: opts.url, ...(opts.range ? { range: opts.range } : {}) },
      opts.verifySignature,
    );
    this.features = new SourceFeatures(opts.capabilities, opts.sourceCapabilities, opts.sourceCount);
    this.readsFetching = hasFeature(opts.capabilities ?? ALL_CAPABILITIES, 'fetching');
    // A window's worth per source: what a source sends before it hears any feedback.
    this.early = new EarlyData(opts.sourceCount, Math.max(1, opts.window));
  }

  /** Data from a source whose META matched the agreed identity: into the checked decoder (Receiver). */
  protected abstract useData(sourceIndex: number, unit: number, key: number, payload: Uint8Array, now: number): void;

  protected onMeta(sourceIndex: number, m: MetaMessage, now: number): void {
    const answering = this.sources[sourceIndex];
    // A feature switched off on this client: the META is unreadable, as to the release before it.
    if (this.features.unreadable(m) !== undefined) {
      answering.stats.malformed++;
      return;
    }
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
    const mismatch = metaMismatch(this.opts, m);
    if (mismatch) {
      this.dropPolluter(sourceIndex, 'meta', mismatch);
      return;
    }
    this.features.onMeta(sourceIndex, m);
    this.signatures.record(sourceIndex, m);
    // Before agreement every META may make or break it: only a signed one counts.
    if (this.checked && !this.quorum.identity() && !this.signatures.signed(sourceIndex)) {
      this.dropUnsigned(sourceIndex);
      return;
    }
    this.quorum.onMeta(sourceIndex, this.features.forAgreement(m), now);
    if (this.quorum.identity()) this.checkAgainstAgreed(sourceIndex);
    else this.evaluateAgreement(now);
    this.startIfReady(now);
    this.releaseIfHeld(now);
  }

  /**
   * A source that took the REQUEST and is still getting the object from the origin (FETCHING):
   * its META is waited for past agreementWaitMs, within the bound (quorum.ts), when its key
   * signed the statement. It does not count as hearing the source: the REQUESTs go on until its
   * META (each answered with a FETCHING), and no feedback goes to a transfer that has no data.
   */
  protected onFetching(sourceIndex: number, m: FetchingMessage, now: number): void {
    const source = this.sources[sourceIndex];
    if (!this.readsFetching) {
      source.stats.malformed++;
      return;
    }
    // The unchecked baseline believes the first META and waits for nobody.
    if (!this.checked || this.status !== 'active' || !this.quorum.takesFetching(sourceIndex)) return;
    if (!this.signatures.fetchingCounts(sourceIndex, m)) {
      source.stats.invalid++;
      return;
    }
    this.quorum.onFetching(sourceIndex, m.answerWithinMs, now);
  }

  /** A held object is released once no identity is still to come (see finish). */
  protected releaseIfHeld(now: number): void {
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

  /** What the agreed sources said of the object: Content-Type, position in the resource. */
  get attributes(): ObjectAttributes | undefined {
    return this.quorum.identity()?.attributes;
  }

  protected evaluateAgreement(now: number): void {
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

  protected onDigests(sourceIndex: number, m: DigestsMessage, now: number): void {
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

  /** Data is used only once the identity is agreed and its unit digests are known. */
  protected startIfReady(now: number): void {
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

  protected finish(now: number): void {
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

  protected fail(code: TransferErrorCode, message: string): void {
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
  protected endSource(source: Source, state: 'failed' | 'dropped', reason: string): void {
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
  protected dropPolluter(sourceIndex: number, kind: PollutionKind, reason: string): void {
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
}
