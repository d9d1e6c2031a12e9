/**
 * Which object the sources serve, decided by agreement: the client uses nothing until `required`
 * sources reported the same identity (length, SHA-256, unit root) in META and no counted source
 * reported another, so no source decides what the page plays by answering first and no number of
 * agreeing sources outvotes one that disagrees (only the origin can settle that). Also assembles
 * each source's DIGESTS list and accepts it only when it hashes to that source's own unit root.
 */
import { bytesEqual } from '../bytes';
import { Sha256, unitRoot } from '../integrity';
import { UNIT_DIGEST_BYTES } from '../limits';
import { ObjectAttributes } from '../range';

export interface Identity {
  objectLength: number;
  digest: Uint8Array;
  unitRoot: Uint8Array;
  /** Content-Type and range position: a source may not relabel bytes the others agree on. */
  attributes?: ObjectAttributes;
}

/** Operators the agreeing sources must span, and each source's operator (by index). */
export interface OperatorBar {
  required: number;
  of: (source: number) => string;
}

interface DigestList {
  bytes: Uint8Array;
  have: Uint8Array;
  missing: number;
}

export class Agreement {
  private readonly proposals: (Identity | undefined)[];
  private readonly lists: (DigestList | undefined)[];
  /** Each source's complete digest list, once it hashed to its own unit root. */
  private readonly complete: (Uint8Array | undefined)[];
  agreed?: Identity;

  constructor(
    sourceCount: number,
    private readonly checkCountOf: (objectLength: number) => number,
    private readonly sha256: Sha256,
  ) {
    this.proposals = new Array<Identity | undefined>(sourceCount);
    this.lists = new Array<DigestList | undefined>(sourceCount);
    this.complete = new Array<Uint8Array | undefined>(sourceCount);
  }

  /** The agreed identity (a method, so a caller's narrowing of `agreed` does not stick across calls). */
  identity(): Identity | undefined {
    return this.agreed;
  }

  proposalOf(source: number): Identity | undefined {
    return this.proposals[source];
  }

  /** Records a source's META; a source keeps its first identity (a repeated META changes nothing). */
  propose(source: number, id: Identity): void {
    if (this.proposals[source]) return;
    this.proposals[source] = {
      objectLength: id.objectLength,
      digest: id.digest.slice(),
      unitRoot: id.unitRoot.slice(),
      attributes: copyAttributes(id.attributes),
    };
  }

  /** Whether a source's META is the agreed identity (false before agreement). */
  agrees(source: number): boolean {
    const p = this.proposals[source];
    return this.agreed !== undefined && p !== undefined && sameIdentity(p, this.agreed);
  }

  /** Two counted sources reported different identities: counting votes cannot settle it. */
  disagreement(counted: (source: number) => boolean): boolean {
    let first: Identity | undefined;
    for (let i = 0; i < this.proposals.length; i++) {
      const p = this.proposals[i];
      if (!p || !counted(i)) continue;
      if (!first) first = p;
      else if (!sameIdentity(first, p)) return true;
    }
    return false;
  }

  /**
   * Agrees once `required` of the counted sources report one identity and, with `operators`,
   * those sources span `operators.required` operators (so one operator's proxies cannot make the
   * quorum alone). Returns 'agreed', 'waiting', or 'impossible' when no identity can reach the bar
   * with the sources still able to vote (`undecided`: their indexes).
   */
  evaluate(
    required: number,
    counted: (source: number) => boolean,
    undecided: readonly number[],
    operators?: OperatorBar,
  ): 'agreed' | 'waiting' | 'impossible' {
    if (this.agreed) return 'agreed';
    // Whether an identity backed by these votes could still meet the bar with the undecided.
    const reachable = (votes: number, agreeing: Set<string>) => {
      if (votes + undecided.length < required) return false;
      if (!operators) return true;
      for (const j of undecided) agreeing.add(operators.of(j));
      return agreeing.size >= operators.required;
    };
    let possible = reachable(0, new Set()); // an identity no counted source stated yet
    for (let i = 0; i < this.proposals.length; i++) {
      const p = this.proposals[i];
      if (!p || !counted(i)) continue;
      let votes = 0;
      const agreeing = new Set<string>();
      for (let j = 0; j < this.proposals.length; j++) {
        const q = this.proposals[j];
        if (!q || !counted(j) || !sameIdentity(p, q)) continue;
        votes++;
        if (operators) agreeing.add(operators.of(j));
      }
      if (votes >= required && (!operators || agreeing.size >= operators.required)) {
        this.agreed = p;
        return 'agreed';
      }
      if (reachable(votes, agreeing)) possible = true;
    }
    return possible ? 'waiting' : 'impossible';
  }

  /**
   * A run of a source's unit digests. Returns 'bad' when the source's list is complete and does
   * not hash to its own unit root (or does not fit its own META), else 'ok'.
   */
  addDigests(source: number, first: number, digests: Uint8Array): 'ok' | 'bad' | 'early' {
    const p = this.proposals[source];
    if (!p) return 'early';
    if (this.complete[source]) return 'ok';
    const count = this.checkCountOf(p.objectLength);
    const n = digests.length / UNIT_DIGEST_BYTES;
    if (first + n > count) return 'bad';
    let list = this.lists[source];
    if (!list) {
      list = { bytes: new Uint8Array(count * UNIT_DIGEST_BYTES), have: new Uint8Array(count), missing: count };
      this.lists[source] = list;
    }
    for (let i = 0; i < n; i++) {
      if (list.have[first + i]) continue;
      list.have[first + i] = 1;
      list.missing--;
      list.bytes.set(
        digests.subarray(i * UNIT_DIGEST_BYTES, (i + 1) * UNIT_DIGEST_BYTES),
        (first + i) * UNIT_DIGEST_BYTES,
      );
    }
    if (list.missing > 0) return 'ok';
    this.lists[source] = undefined;
    if (!bytesEqual(unitRoot(list.bytes, this.sha256), p.unitRoot)) return 'bad';
    this.complete[source] = list.bytes;
    return 'ok';
  }

  /** The agreed digest list, once some agreeing source delivered all of it. */
  digests(): Uint8Array | undefined {
    if (!this.agreed) return undefined;
    if (this.checkCountOf(this.agreed.objectLength) === 0) return new Uint8Array(0);
    for (let i = 0; i < this.complete.length; i++) if (this.complete[i] && this.agrees(i)) return this.complete[i];
    return undefined;
  }
}

/** Whether two sources state the same object (what agreement and a conflict verdict compare). */
export function sameIdentity(a: Identity, b: Identity): boolean {
  return (
    a.objectLength === b.objectLength &&
    bytesEqual(a.digest, b.digest) &&
    bytesEqual(a.unitRoot, b.unitRoot) &&
    a.attributes?.contentType === b.attributes?.contentType &&
    a.attributes?.range?.start === b.attributes?.range?.start &&
    a.attributes?.range?.completeLength === b.attributes?.range?.completeLength
  );
}

function copyAttributes(a: ObjectAttributes | undefined): ObjectAttributes | undefined {
  if (!a) return undefined;
  const copy: ObjectAttributes = {};
  if (a.contentType !== undefined) copy.contentType = a.contentType;
  if (a.range) copy.range = { ...a.range };
  return copy;
}

export { bytesEqual };
