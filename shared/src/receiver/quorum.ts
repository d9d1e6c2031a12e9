/**
 * When the sources' META votes settle the object's identity. The bar is fixed when the download
 * starts: `min(quorum, sources)` agreeing sources and none disagreeing. Sources that fail before
 * their META, or stay silent `agreementWaitMs` after the first one, stop being waited for, but
 * they never lower the bar: a source that gets the honest ones refused (an overloaded proxy) or
 * that answers while they are slow must still find a second source to agree with it. When the
 * bar cannot be met ('unconfirmed') or two sources disagree ('conflict'), the client does not
 * pick a side: it fails, and the caller falls back to the origin.
 */
import { Sha256 } from '../integrity';
import { Agreement, Identity } from './agreement';
import { Source } from './source';

export class IdentityQuorum {
  private readonly agreement: Agreement;
  /** When the first META from any source arrived (-1: none yet). */
  private firstMetaAt = -1;
  private lastTimedCheckAt = -Infinity;

  /** Agreeing sources needed: the quorum, or every source when fewer were asked. */
  private readonly required: number;

  constructor(
    sourceCount: number,
    checkCountOf: (objectLength: number) => number,
    sha256: Sha256,
    private readonly quorum: number,
    private readonly waitMs: number,
  ) {
    this.agreement = new Agreement(sourceCount, checkCountOf, sha256);
    this.required = Math.max(1, Math.min(quorum, sourceCount));
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
    const waited = this.firstMetaAt >= 0 && now - this.firstMetaAt >= this.waitMs;
    // Live and not (yet) written off as silent: it may still cast its vote.
    const mayVote = (s: Source, i: number) => s.live && !this.agreement.proposalOf(i) && !(waited && !s.heard);
    const undecided = sources.filter(mayVote).length;
    const verdict = this.agreement.evaluate(this.required, counted, undecided);
    return verdict === 'impossible' ? 'unconfirmed' : verdict;
  }

  /**
   * Whether a source may still state an identity, so a complete object is not released yet: one
   * that is live and has not, while the wait since the first META runs. Agreement needs only the
   * quorum, so without this hold a small object could complete from agreeing rogues before an
   * honest source's META (slower, not silent) contradicts them; with it a rogue pair must outlast
   * every live honest source by the whole wait, as before agreement.
   */
  votesPending(sources: readonly Source[], now: number): boolean {
    // Against the deadline itself (not now - first >= wait): a timer firing at holdDeadline must
    // end the hold whatever the floating-point rounding.
    if (this.firstMetaAt < 0 || now >= this.holdDeadline) return false;
    return sources.some((s, i) => s.live && !this.agreement.proposalOf(i));
  }

  /** When votesPending turns false at the latest. */
  get holdDeadline(): number {
    return this.firstMetaAt + this.waitMs;
  }

  /** Votes are outstanding: the wait for silent sources runs. */
  get waiting(): boolean {
    return !this.agreement.agreed && this.firstMetaAt >= 0;
  }

  /** When the silent sources are written off, unless that was checked already (null: no such time). */
  nextDeadline(): number | null {
    const wait = this.firstMetaAt + this.waitMs;
    return this.waiting && wait > this.lastTimedCheckAt ? wait : null;
  }

  /** The caller evaluates at a timeout; remembered so the same wait is not armed again. */
  noteTimedCheck(now: number): void {
    this.lastTimedCheckAt = now;
  }
}
