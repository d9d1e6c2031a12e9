/**
 * Which sources signed their META with the key origo published for them (assertion.ts). A
 * source whose key the client holds counts toward agreement, or can cause a conflict, only with
 * a META its key signed: a lie that makes a download fall back is then a signed statement,
 * evidence anyone can check against the origin, not a word against a word. Sources without a
 * known key (a client without origo; origo refuses proxies that register none) count as before.
 *
 * Verification costs about 1 ms in portable JavaScript (50 µs with node:crypto), so a META is
 * verified only when it matters: each one that arrives before agreement (it may make or break
 * it), and after agreement only one that disagrees.
 */
import { AssertedRequest, verifyEd25519, verifyFetching, verifyMeta, VerifySignature } from '../assertion';
import { decode, encodeMeta, FetchingMessage, MessageType, MetaMessage } from '../wire';
import { Identity, sameIdentity } from './agreement';

/** A source's signing identity, as origo handed it out. */
export interface SourceSigner {
  proxyId: string;
  /** Ed25519 public key, 32 bytes. */
  publicKey: Uint8Array;
}

export class MetaSignatures {
  /** Each signed source's first META, re-encoded (its own buffer: the datagram's may be reused). */
  private readonly metas: (Uint8Array | undefined)[];
  /** 1 signed by its key, -1 not, 0 not checked yet. */
  private readonly verdicts: Int8Array;
  /** Each source's FETCHING: 1 counted, -1 refused, 0 none yet (one verification per source at most). */
  private readonly fetchingVerdicts: Int8Array;

  constructor(
    private readonly signers: readonly (SourceSigner | undefined)[],
    private readonly request: AssertedRequest,
    private readonly verify: VerifySignature = verifyEd25519,
  ) {
    this.metas = new Array<Uint8Array | undefined>(signers.length);
    this.verdicts = new Int8Array(signers.length);
    this.fetchingVerdicts = new Int8Array(signers.length);
  }

  /**
   * Whether a source's FETCHING counts: signed by its key when the client holds one (an unsigned
   * or forged "wait for me" is worth nothing), any for a source without a known key. Decided on
   * the first FETCHING and kept, so a source sending many costs one verification.
   */
  fetchingCounts(source: number, m: FetchingMessage): boolean {
    if (this.fetchingVerdicts[source] === 0) {
      const signer = this.signers[source];
      const ok = !signer || verifyFetching(m, this.request, signer.proxyId, signer.publicKey, this.verify);
      this.fetchingVerdicts[source] = ok ? 1 : -1;
    }
    return this.fetchingVerdicts[source] === 1;
  }

  /** Whether the source must sign its META (origo gave its key). */
  required(source: number): boolean {
    return this.signers[source] !== undefined;
  }

  /** Keeps a source's first META for checking (and as evidence); later ones change nothing. */
  record(source: number, meta: MetaMessage): void {
    if (!this.required(source) || this.metas[source]) return;
    this.metas[source] = encodeMeta(meta);
  }

  /** Whether the source's recorded META is signed by its key (true for a source with no key). */
  signed(source: number): boolean {
    const signer = this.signers[source];
    if (!signer) return true;
    if (this.verdicts[source] === 0) {
      const bytes = this.metas[source];
      const m = bytes && decode(bytes);
      const ok =
        m !== undefined &&
        m.ok &&
        m.value.type === MessageType.Meta &&
        verifyMeta(m.value, this.request, signer.proxyId, signer.publicKey, this.verify);
      this.verdicts[source] = ok ? 1 : -1;
    }
    return this.verdicts[source] === 1;
  }

  /** The source's META as it sent it (signed), when it was verified: what a report can carry. */
  evidence(source: number): Uint8Array | undefined {
    return this.verdicts[source] === 1 ? this.metas[source] : undefined;
  }

  /**
   * Each source's META that its published key signed (encoded as it was sent), when they state at
   * least two identities (`proposalOf`: the identity a source's META stated). Evidence a third
   * party can judge against the origin (origo's `conflict`); empty without keys or without two
   * signed sides.
   */
  conflictEvidence(proposalOf: (source: number) => Identity | undefined): { source: number; meta: Uint8Array }[] {
    // One statement per identity first, so a caller keeping only a few keeps both sides.
    const firsts: { source: number; meta: Uint8Array }[] = [];
    const rest: { source: number; meta: Uint8Array }[] = [];
    const identities: Identity[] = [];
    for (let i = 0; i < this.signers.length; i++) {
      const meta = this.evidence(i);
      const identity = proposalOf(i);
      if (!meta || !identity) continue;
      const known = identities.some((other) => sameIdentity(other, identity));
      if (!known) identities.push(identity);
      (known ? rest : firsts).push({ source: i, meta });
    }
    return identities.length >= 2 ? [...firsts, ...rest] : [];
  }
}
