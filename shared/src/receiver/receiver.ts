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
 * - `Completion` (completion.ts): decoding, per-unit verification, the window, the final object;
 * - `Outgoing` (outgoing.ts): the datagram due to each source (STOP, REQUEST, asks for symbol
 *   digests, FEEDBACK) and when the next is due.
 *
 * None of them imports this module; what one part's outcome means for the others (a polluter
 * found while decoding is excluded, which may end the transfer) is decided here and in
 * `SourceMembership` (membership.ts), which this class extends: the sources' META and DIGESTS,
 * agreement, sources leaving, and the transfer's end are there; the datagram dispatch, the data
 * path, the sources' turns to send, the timers and the API are here.
 */
import { decode, describeErrorCode, MAX_BLOCK_ROUND, MessageType, Message, SymbolDigestsMessage } from '../wire';
import { CheckOutcome } from './check-units';
import { HandledRates } from './handled-rate';
import { SourceMembership } from './membership';
import { ReceiverOptions } from './options';
import { Outgoing } from './outgoing';
import { Polluter, SourceStats } from './source';
import { Steering } from './steering';
import { SymbolAsks } from './symbol-asks';

export { DEFAULT_RECEIVER_CONFIG } from './config';
export type { ReceiverConfig } from './config';
export type { ReceiverStatus } from './membership';
export type { ReceiverOptions } from './options';
export type { Polluter, PollutionKind, SourceState, SourceStats } from './source';

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

export class Receiver extends SourceMembership {
  /** Fountain: per source index, the round after the highest block id it sent (REQUEST resume). */
  private readonly nextBlockRound: Uint32Array;
  private readonly steering: Steering;
  private readonly handledRates: HandledRates;
  private readonly symbolAsks: SymbolAsks;
  private readonly outgoing: Outgoing;
  private pollCursor = 0;

  constructor(opts: ReceiverOptions) {
    super(opts);
    this.nextBlockRound = new Uint32Array(opts.sourceCount);
    this.steering = new Steering(this.config, opts.capacityHints);
    this.handledRates = new HandledRates(
      opts.sourceCount,
      { windowMs: this.config.handledRateWindowMs, holdMs: this.config.receiveDropHoldMs },
      opts.receiveDrops,
    );
    this.symbolAsks = new SymbolAsks(this.config.symbolDigestRetryMs);
    this.outgoing = new Outgoing({
      transferId: this.transferId,
      opts,
      scheduler: this.scheduler,
      config: this.config,
      sources: this.sources,
      quorum: this.quorum,
      steering: this.steering,
      handledRates: this.handledRates,
      completion: this.completion,
      symbolAsks: this.symbolAsks,
      nextBlockRound: this.nextBlockRound,
      features: this.features,
    });
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
      case MessageType.Fetching:
        this.onFetching(sourceIndex, m, now);
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

  private onSymbolDigests(sourceIndex: number, m: SymbolDigestsMessage, now: number): void {
    const source = this.sources[sourceIndex];
    source.hear(now);
    if (!this.completion.started || !source.metaOk || this.opts.mode !== 'uncoded') {
      source.stats.invalid++;
      return;
    }
    this.afterCheck([this.completion.symbolDigests(sourceIndex, m.check, m.first, m.digests)], now, false);
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
    this.handledRates.onData(sourceIndex, bytes, now);
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
  protected useData(sourceIndex: number, unit: number, key: number, payload: Uint8Array, now: number): void {
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
      const bytes = this.outgoing.datagramFor(index, now, this.status === 'active');
      if (bytes) {
        this.pollCursor = (index + 1) % n;
        return { source: index, bytes };
      }
    }
    return null;
  }

  // ------------------------------------------------------------------ timers

  nextDeadline(): number | null {
    if (this.status !== 'active') return null;
    let deadline = Math.min(this.lastProgressAt + this.config.stallTimeoutMs, this.outgoing.nextDeadline());
    const wait = this.quorum.nextDeadline();
    if (wait !== null) deadline = Math.min(deadline, wait);
    if (this.holding) deadline = Math.min(deadline, this.quorum.holdDeadline);
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
      feedbackSent: this.outgoing.feedbackSent,
      requestsSent: this.outgoing.requestsSent,
      sources: this.sources.map((s) => ({ ...s.stats })),
    };
  }
}
