/**
 * When the sources' META votes settle the object's identity. Agreement counts votes; this decides
 * who may still vote: a source that failed before its META does not count, one that sent META and
 * then failed still votes, and one that stayed silent `agreementWaitMs` after the first META is
 * written off, so the download goes on with the sources that answered. An identity agreed by
 * fewer sources than the quorum that way is provisional (see `provisional`).
 */
import { Sha256 } from '../integrity';
import { Agreement, Identity } from './agreement';
import { Source } from './source';

export class IdentityQuorum {
  private readonly agreement: Agreement;
  /** When the first META from any source arrived (-1: none yet). */
  private firstMetaAt = -1;
  private lastTimedCheckAt = -Infinity;
  /**
   * The identity was agreed by fewer sources than the quorum (the others failed or stayed silent
   * for agreementWaitMs): a later META that disagrees then fails the transfer instead of being
   * dropped, so a rogue source cannot win just by answering while the honest ones are slow.
   */
  provisional = false;

  constructor(
    sourceCount: number,
    checkCountOf: (objectLength: number) => number,
    sha256: Sha256,
    private readonly quorum: number,
    private readonly waitMs: number,
  ) {
    this.agreement = new Agreement(sourceCount, checkCountOf, sha256);
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
   * Agreement needs `quorum` sources, or all that can still answer when fewer can. 'agreed' only
   * when this call agreed (the caller then checks every source against the identity).
   */
  evaluate(sources: readonly Source[], now: number): 'agreed' | 'waiting' | 'impossible' {
    if (this.agreement.agreed) return 'waiting';
    const counted = (i: number) => sources[i].stats.state !== 'dropped';
    const waited = this.firstMetaAt >= 0 && now - this.firstMetaAt >= this.waitMs;
    // Live and not (yet) written off as silent: it may still cast its vote.
    const mayVote = (s: Source, i: number) => s.live && !this.agreement.proposalOf(i) && !(waited && !s.heard);
    const voted = (i: number) => counted(i) && this.agreement.proposalOf(i) !== undefined;
    const able = sources.filter((s, i) => mayVote(s, i) || voted(i)).length;
    const undecided = sources.filter(mayVote).length;
    const required = Math.max(1, Math.min(this.quorum, able));
    const verdict = this.agreement.evaluate(required, counted, undecided);
    if (verdict === 'agreed') this.provisional = required < Math.min(this.quorum, sources.length);
    return verdict;
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
