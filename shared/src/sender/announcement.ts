/**
 * META, what this source says the object is (length, layout, digest, unit root, attributes;
 * signed when the source has a key), and the DIGESTS datagrams with the unit digests that follow
 * it: sent first, and again until a feedback says the client has them.
 */
import { assertionMessage } from '../assertion';
import { Layout } from '../layout';
import { unitDigests, unitRoot } from '../integrity';
import { UNIT_DIGEST_BYTES } from '../limits';
import { encodeDigests, encodeMeta, MAX_DIGESTS_PER_MESSAGE } from '../wire';
import { SenderOptions } from './options';
import { RttEstimator } from './rtt';

export type AnnouncedObject = Pick<
  SenderOptions,
  | 'request'
  | 'object'
  | 'digest'
  | 'unitDigests'
  | 'attributes'
  | 'sha256'
  | 'signer'
  | 'provenance'
  | 'metaExtensions'
  | 'now'
>;

export class MetaAnnouncement {
  private readonly meta: Uint8Array;
  /** DIGESTS datagrams, sent right after every META until the client acknowledges both. */
  private readonly digests: Uint8Array[];
  private digestCursor: number;
  private acked = false;
  /** META goes out first and again each timeout until a feedback says the client has it. */
  private pending = true;
  private dueAt: number;
  /** When the last META went out, and the first DATA seq sent after it. */
  private sentAt = -Infinity;
  private firstSeqAfterMeta = 0;

  constructor(
    opts: AnnouncedObject,
    layout: Layout,
    private readonly rtt: RttEstimator,
    private readonly ackDelaySlackMs: number,
    private readonly stats: { metaSent: number },
  ) {
    const r = opts.request;
    const digests = opts.unitDigests ?? unitDigests(opts.object, layout, opts.sha256);
    const identity = {
      objectLength: opts.object.length,
      symbolSize: r.symbolSize,
      generationSize: r.generationSize,
      mode: r.mode,
      digest: opts.digest,
      unitRoot: unitRoot(digests, opts.sha256),
      attributes: opts.attributes,
      // Part of what a signature covers, byte for byte (verifyMeta re-encodes what it received).
      ...(opts.metaExtensions ? { extensions: opts.metaExtensions } : {}),
    };
    const provenance = opts.provenance ?? { fetchedAt: 0 };
    const signed = opts.signer && {
      ...provenance,
      signature: opts.signer.sign(assertionMessage(identity, provenance, r, opts.signer.proxyId)),
    };
    this.meta = encodeMeta({ transferId: r.transferId, ...identity, ...(signed ? { signed } : {}) });
    this.digests = [];
    const perMessage = MAX_DIGESTS_PER_MESSAGE * UNIT_DIGEST_BYTES;
    for (let at = 0; at < digests.length; at += perMessage) {
      const chunk = digests.subarray(at, at + perMessage);
      this.digests.push(encodeDigests({ transferId: r.transferId, first: at / UNIT_DIGEST_BYTES, digests: chunk }));
    }
    this.digestCursor = this.digests.length;
    this.dueAt = opts.now;
  }

  /** The META or DIGESTS datagram due now, if any; `nextSeq` is the seq the next DATA gets. */
  poll(now: number, nextSeq: number): Uint8Array | undefined {
    if (this.acked) return undefined;
    if (this.pending) {
      this.pending = false;
      this.dueAt = now + this.rtt.timeout(this.ackDelaySlackMs);
      this.sentAt = now;
      this.firstSeqAfterMeta = nextSeq;
      this.stats.metaSent++;
      this.digestCursor = 0;
      return this.meta;
    }
    if (this.digestCursor < this.digests.length) return this.digests[this.digestCursor++];
    return undefined;
  }

  /** The client repeated its REQUEST: it has not seen our META yet. */
  onRequest(now: number): void {
    // Repeat it, but at most once per round trip (META brings every DIGESTS datagram along: one
    // small REQUEST must not buy that each time).
    if (!this.acked && now - this.sentAt >= this.rtt.smoothed) this.pending = true;
  }

  /**
   * A feedback: whether the client has our META, and the largest seq it acknowledges (-1 if none
   * this source can place). Call after the feedback's RTT sample.
   */
  onFeedback(metaKnown: boolean, largestSeq: number, now: number): void {
    if (metaKnown) this.acked = true;
    if (!this.acked && largestSeq >= this.firstSeqAfterMeta && now - this.sentAt >= this.rtt.smoothed) {
      // Data sent after our META arrived, yet the client has not accepted the META: it was lost
      // (or the client still waits for the other sources to agree). Until it is accepted the
      // client can only hold our data, so repeat it now rather than after a timeout (the first
      // one is taken before any RTT sample), at most once per round trip.
      this.pending = true;
    }
  }

  onTimeout(now: number): void {
    if (!this.acked && !this.pending && now >= this.dueAt) this.pending = true;
  }

  /** When the META sent last times out unacknowledged; Infinity if none waits. */
  get deadline(): number {
    return !this.acked && !this.pending ? this.dueAt : Infinity;
  }
}
