/**
 * When the sources' META votes settle the object's identity. The bar is fixed when the download
 * starts: `min(quorum, sources)` agreeing sources and none disagreeing. Sources that fail before
 * their META, or stay silent `agreementWaitMs` after the first one, stop being waited for, but
 * they never lower the bar: a source that gets the honest ones refused (an overloaded proxy) or
 * that answers while they are slow must still find a second source to agree with it. When the
 * bar cannot be met ('unconfirmed') or two sources disagree ('conflict'), the client does not
 * pick a side: it fails, and the caller falls back to the origin.
 *
 * A source that said it is still fetching the object (FETCHING, verified by the caller) is waited
 * for past `agreementWaitMs`: until the time it gave, and never more than `fetchingWaitMs` after
 * the first META. Otherwise an honest proxy on a cold cache is as silent as a dead one, and two
 * rogues answering from memory meet the bar alone once the wait is over. A rogue that says it is
 * fetching and never answers only delays the decision, by that bound at most.
 *
 * Independence (issue 31): origo names each offered proxy's operator, and the agreeing sources
 * must span `min(quorum, distinct operators among the sources)` operators, so an operator running
 * several of a download's proxies does not meet the quorum alone while another operator's source
 * may still vote; with one operator only (origo could offer no other), agreement by count alone
 * is all there is. A source of no named operator (an origo before operators) is its own.
 */
import { Sha256 } from '../integrity';
import { Agreement, Identity, OperatorBar } from './agreement';
import { DEFAULT_FETCHING_WAIT_MS } from './config';
import { Source } from './source';

export class IdentityQuorum {
  private readonly agreement: Agreement;
  /** When the first META from any source arrived (-1: none yet). */
  private firstMetaAt = -1;
  private lastTimedCheckAt = -Infinity;
  /** Per source, when the wait its FETCHING bought ends (before the first-META cap; -Infinity: none). */
  private readonly fetchingUntil: Float64Array;
  /** The latest end of a vote votesPending last found pending (its hold's deadline). */
  private pendingUntil = -Infinity;

  /** Agreeing sources needed: the quorum, or every source when fewer were asked. */
  private readonly required: number;
  /** The operators agreeing sources must span, and each source's operator. */
  private readonly operators: OperatorBar;

  constructor(
    sourceCount: number,
    checkCountOf: (objectLength: number) => number,
    sha256: Sha256,
    private readonly quorum: number,
    private readonly waitMs: number,
    private readonly fetchingWaitMs = DEFAULT_FETCHING_WAIT_MS,
    operators: readonly (string | undefined)[] = [],
  ) {
    this.agreement = new Agreement(sourceCount, checkCountOf, sha256);
    this.required = Math.max(1, Math.min(quorum, sourceCount));
    this.operators = operatorBar(sourceCount, operators, this.required);
    this.fetchingUntil = new Float64Array(sourceCount).fill(-Infinity);
  }

  /** The agreed identity (a method, so a caller's narrowing does not stick across calls). */
  identity(): Identity | undefined {
    return this.agreement.agreed;
  }

  proposalOf(source: number): Identity | undefined {
    return this.agreement.proposalOf(source);
  }

  /** Whether a source's META is the agreed identity (false before agreement). */
  agrees(source: number): boolean {
    return this.agreement.agrees(source);
  }

  onMeta(source: number, identity: Identity, now: number): void {
    if (this.firstMetaAt < 0) this.firstMetaAt = now;
    this.agreement.propose(source, identity);
  }

  /**
   * Whether a FETCHING from this source would still count: it stated no identity and said nothing
   * of a fetch before (only its first FETCHING counts, so a source cannot push its wait further
   * by repeating it, and the caller verifies at most one signature per source).
   */
  takesFetching(source: number): boolean {
    return !this.agreement.proposalOf(source) && this.fetchingUntil[source] === -Infinity;
  }

  /** The source is fetching and will answer within `answerWithinMs` (capped): its vote is waited for. */
  onFetching(source: number, answerWithinMs: number, now: number): void {
    if (!this.takesFetching(source)) return;
    this.fetchingUntil[source] = now + Math.min(answerWithinMs, this.fetchingWaitMs);
  }

  /** When the wait for source `i`'s vote ends: the agreement wait, or later what its FETCHING bought. */
  private voteDueBy(i: number): number {
    const wait = this.firstMetaAt + this.waitMs;
    const fetching = this.fetchingUntil[i];
    if (fetching === -Infinity) return wait;
    return Math.max(wait, Math.min(fetching, this.firstMetaAt + this.fetchingWaitMs));
  }

  addDigests(source: number, first: number, digests: Uint8Array): 'ok' | 'bad' | 'early' {
    return this.agreement.addDigests(source, first, digests);
  }

  /** The agreed digest list, once some agreeing source delivered all of it. */
  digests(): Uint8Array | undefined {
    return this.agreement.digests();
  }

  /**
   * 'agreed' only when this call agreed (the caller then checks every source against the
   * identity); 'conflict' when two counted sources disagree; 'unconfirmed' when the sources that
   * voted or may still vote are too few to meet the bar.
   */
  evaluate(sources: readonly Source[], now: number): 'agreed' | 'waiting' | 'conflict' | 'unconfirmed' {
    // Before any META there is nothing to confirm: sources failing then fail the download as such.
    if (this.agreement.agreed || this.firstMetaAt < 0) return 'waiting';
    // A dropped source proved itself wrong (a range it was not asked for, a digest list that
    // does not hash to its own root): its META is no vote.
    const counted = (i: number) => sources[i].stats.state !== 'dropped';
    if (this.agreement.disagreement(counted)) return 'conflict';
    // Live and not (yet) written off as silent (a source fetching is not silent): it may still vote.
    const mayVote = (s: Source, i: number) =>
      s.live && !this.agreement.proposalOf(i) && !(now >= this.voteDueBy(i) && !s.heard);
    const undecided: number[] = [];
    sources.forEach((s, i) => {
      if (mayVote(s, i)) undecided.push(i);
    });
    const verdict = this.agreement.evaluate(this.required, counted, undecided, this.operators);
    return verdict === 'impossible' ? 'unconfirmed' : verdict;
  }

  /**
   * Whether a source may still state an identity, so a complete object is not released yet: one
   * that is live and has not, while the wait since the first META runs. Agreement needs only the
   * quorum, so without this hold a small object could complete from agreeing rogues before an
   * honest source's META (slower, not silent) contradicts them; with it a rogue pair must outlast
   * every live honest source by the whole wait, as before agreement, and a source that said it
   * is fetching by the wait its FETCHING bought.
   */
  votesPending(sources: readonly Source[], now: number): boolean {
    // Against the deadline itself (not now - first >= wait): a timer firing at holdDeadline must
    // end the hold whatever the floating-point rounding.
    if (this.firstMetaAt < 0) return false;
    let until = -Infinity;
    sources.forEach((s, i) => {
      if (!s.live || this.agreement.proposalOf(i)) return;
      const due = this.voteDueBy(i);
      if (now < due) until = Math.max(until, due);
    });
    this.pendingUntil = until;
    return until > -Infinity;
  }

  /**
   * When votesPending turns false at the latest, as of its last call (a FETCHING that arrived
   * since can make it later: the hold is checked again at this time and follows it).
   */
  get holdDeadline(): number {
    return Math.max(this.pendingUntil, this.firstMetaAt + this.waitMs);
  }

  /** Votes are outstanding: the wait for silent sources runs. */
  get waiting(): boolean {
    return !this.agreement.agreed && this.firstMetaAt >= 0;
  }

  /**
   * When the next silent source is written off (the agreement wait, or the end of a wait a
   * FETCHING bought), unless that was checked already (null: no such time).
   */
  nextDeadline(): number | null {
    if (!this.waiting) return null;
    const wait = this.firstMetaAt + this.waitMs;
    let next = wait > this.lastTimedCheckAt ? wait : Infinity;
    for (let i = 0; i < this.fetchingUntil.length; i++) {
      if (this.agreement.proposalOf(i)) continue;
      const due = this.voteDueBy(i);
      if (due > this.lastTimedCheckAt && due < next) next = due;
    }
    return next === Infinity ? null : next;
  }

  /** The caller evaluates at a timeout; remembered so the same wait is not armed again. */
  noteTimedCheck(now: number): void {
    this.lastTimedCheckAt = now;
  }
}

/** Receiver options naming each source's operator (ReceiverOptions extends it). */
export interface SourceOperatorOptions {
  /**
   * Each source's operator as origo named it in its offer (undefined: its own operator). Sources
   * that agree must span min(quorum, distinct operators) of them.
   */
  sourceOperators?: readonly (string | undefined)[];
}

/**
 * The operator bar of a download: each source's operator (an unnamed one its own, under a key no
 * operator name can take) and how many the agreeing sources must span, fixed at the start like
 * the quorum.
 */
export function operatorBar(
  sourceCount: number,
  operators: readonly (string | undefined)[],
  required: number,
): OperatorBar {
  const names = Array.from({ length: sourceCount }, (_, i) => operators[i] ?? `#source ${i}`);
  return { required: Math.min(required, new Set(names).size), of: (i) => names[i] };
}
