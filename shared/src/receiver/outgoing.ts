/**
 * What the receiver sends each source, one datagram at a time: a STOP when one is due; REQUESTs
 * until its META arrives, and again to a source that went silent (a resume); asks for symbol
 * digests (symbol-asks.ts); and FEEDBACK (feedback.ts). Also when the next of them is due. It
 * reads the receiver's parts and changes none but the sources' timers and the asks' rounds; the
 * Receiver takes the sources in turn.
 */
import { MAX_DATAGRAM_BYTES } from '../limits';
import {
  encodeRequest,
  encodeStop,
  encodeSymbolDigestsRequest,
  RequestMessage,
  RequestResume,
  requestLength,
  SchedulerName,
} from '../wire';
import { Completion } from './completion';
import { ReceiverConfig } from './config';
import { encodeSourceFeedback } from './feedback';
import { HandledRates } from './handled-rate';
import { ReceiverOptions } from './options';
import { IdentityQuorum } from './quorum';
import { Source } from './source';
import { SourceFeatures } from './source-features';
import { Steering } from './steering';
import { SymbolAsks } from './symbol-asks';

/** The receiver's parts what it sends is made of (shared, not copied). */
export interface OutgoingParts {
  transferId: number;
  opts: ReceiverOptions;
  scheduler: SchedulerName;
  config: ReceiverConfig;
  sources: readonly Source[];
  quorum: IdentityQuorum;
  steering: Steering;
  /** What the client handles of each source, which the reported rate may not exceed (handled-rate.ts). */
  handledRates: HandledRates;
  completion: Completion;
  symbolAsks: SymbolAsks;
  /** Fountain: per source index, the round after the highest block id it sent (REQUEST resume). */
  nextBlockRound: Uint32Array;
  /** What each source may be sent (source-features.ts). */
  features: SourceFeatures;
}

export class Outgoing {
  feedbackSent = 0;
  requestsSent = 0;
  private readonly transferId: number;
  private readonly opts: ReceiverOptions;
  private readonly scheduler: SchedulerName;
  private readonly config: ReceiverConfig;
  private readonly sources: readonly Source[];
  private readonly quorum: IdentityQuorum;
  private readonly steering: Steering;
  private readonly handledRates: HandledRates;
  private readonly completion: Completion;
  private readonly symbolAsks: SymbolAsks;
  private readonly nextBlockRound: Uint32Array;
  private readonly features: SourceFeatures;

  constructor(parts: OutgoingParts) {
    this.transferId = parts.transferId;
    this.opts = parts.opts;
    this.scheduler = parts.scheduler;
    this.config = parts.config;
    this.sources = parts.sources;
    this.quorum = parts.quorum;
    this.steering = parts.steering;
    this.handledRates = parts.handledRates;
    this.completion = parts.completion;
    this.symbolAsks = parts.symbolAsks;
    this.nextBlockRound = parts.nextBlockRound;
    this.features = parts.features;
  }

  /** The datagram due to source `index` now, if any; `active`: the transfer still runs (else only a STOP). */
  datagramFor(index: number, now: number, active: boolean): Uint8Array | null {
    const source = this.sources[index];
    const stop = source.takeStop(now);
    if (stop !== -1) return encodeStop({ transferId: this.transferId, reason: stop });
    if (!active || !source.live) return null;
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
    if (source.metaOk && !source.stats.polluter && this.symbolAsks.size > 0 && this.canAskSymbols(index)) {
      const check = this.symbolAsks.takeFor(index, now);
      if (check >= 0) return encodeSymbolDigestsRequest({ transferId: this.transferId, check });
    }
    if (!source.heard || !source.takeFeedback(now)) return null;
    this.feedbackSent++;
    return this.feedback(index, now);
  }

  /** Whether source `index` reads SYMBOL_DIGESTS_REQUEST (an older one drops it unanswered). */
  private canAskSymbols(index: number): boolean {
    return this.features.shared(index, 'symbol-digests');
  }

  /**
   * The REQUEST to source `index`, with only the parts it declared it reads: without `weights` it
   * starts from equal shares, without `resume` a source that lost the transfer starts it afresh
   * (the first FEEDBACK then says what is done), without `partitioned` it runs the mode's other
   * scheduler. (A range it cannot read makes it unusable: download.ts leaves it out.)
   */
  private request(index: number): Uint8Array {
    const o = this.opts;
    const features = this.features;
    const weights = features.shared(index, 'weights') ? this.steering.initialWeights(this.sources.length) : undefined;
    const extensions = features.requestExtensions(index);
    const m: Omit<RequestMessage, 'type'> = {
      transferId: this.transferId,
      mode: o.mode,
      scheduler: features.schedulerFor(index, this.scheduler, o.mode) ?? this.scheduler,
      sourceIndex: index,
      sourceCount: this.sources.length,
      window: o.window,
      generationSize: o.generationSize,
      symbolSize: o.symbolSize,
      url: o.url,
      ...(o.range ? { range: o.range } : {}),
      ...(weights ? { weights } : {}),
      ...(extensions ? { extensions } : {}),
    };
    // What is decoded already, for a source that starts the transfer again (a new connection,
    // a replacement): it sends none of it.
    const resume = features.shared(index, 'resume') ? this.resumePoint(index) : undefined;
    if (resume) m.resume = resume;
    // These parts are optional: where a long URL leaves no room, the resume part goes first, then
    // the weights (published ones come with every REQUEST after the first FEEDBACK), then the
    // extensions (the source then takes this client for a legacy one).
    if (requestLength(m) > MAX_DATAGRAM_BYTES) delete m.resume;
    if (requestLength(m) > MAX_DATAGRAM_BYTES) delete m.weights;
    if (requestLength(m) > MAX_DATAGRAM_BYTES) delete m.extensions;
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
      rateBps: this.handledRates.reportedRate(index, source.rate.bytesPerSecond, now),
      metaKnown: source.metaOk && this.completion.started,
      rewind: this.completion.rewound,
      wMin: this.completion.wMin,
      weights,
      report: this.completion.windowReport(),
      capFor: (windowMissing) => this.steering.inFlightCap(source, weights, index, windowMissing),
      now,
    });
  }

  /** When the next REQUEST, FEEDBACK or ask for symbol digests is due (Infinity: none). */
  nextDeadline(): number {
    let deadline = Infinity;
    for (const s of this.sources) {
      if (!s.live) continue;
      deadline = Math.min(deadline, s.heard ? s.feedbackDeadline : s.requestDueAt);
    }
    this.sources.forEach((s, i) => {
      if (s.live && s.heard && !this.quorum.proposalOf(i)) deadline = Math.min(deadline, s.requestDueAt);
      if (s.live && s.heard)
        deadline = Math.min(deadline, Math.max(s.resumeDeadline, s.lastHeardAt + this.config.resumeAfterMs));
    });
    // Only where someone can be asked: no source that reads the ask, no round to time.
    const ask = this.symbolAsks.nextDeadline();
    if (ask !== null && this.sources.some((s, i) => s.live && this.canAskSymbols(i)))
      deadline = Math.min(deadline, ask);
    return deadline;
  }
}
