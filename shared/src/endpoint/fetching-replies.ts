/**
 * FETCHING (docs/protocol.md §4.2c): what a source answers a client that asks again for a
 * transfer whose object it is still getting from the origin. Without it an honest source on a
 * cold cache is as silent as a dead one, and two rogues answering from memory meet the client's
 * quorum alone once its agreement wait is over; with it the client waits for this source's META
 * (within its own bound). Only to a client that declared `fetching`, signed like a META where the
 * client reads signatures (an unsigned "wait for me" from a source whose key the client holds
 * counts for nothing), made once per transfer and resent as it is: one signature per transfer,
 * and at most one datagram per `minIntervalMs` however often the client asks.
 */
import { fetchingAssertionMessage } from '../assertion';
import { MetaSigner } from '../sender/sender';
import { Capabilities, encodeFetching, hasFeature, RequestMessage } from '../wire';
import { clientCapabilities } from './capability-rules';

export interface FetchingReplyLimits {
  /** The longest the source says it takes to answer (its origin fetch's bound), ms. */
  fetchingAnswerWithinMs: number;
  /** At most one FETCHING per transfer this often, however often the client repeats its REQUEST. */
  fetchingMinIntervalMs: number;
}

/** One pending transfer's FETCHING: the datagram (made at the first repeat) and when it last went. */
export class FetchingReply {
  private datagram?: Uint8Array;
  private lastSentAt = -Infinity;

  constructor(
    private readonly request: RequestMessage,
    private readonly own: Capabilities,
    private readonly limits: FetchingReplyLimits,
    private readonly signer: MetaSigner | undefined,
  ) {}

  /** The datagram to send for a repeated REQUEST now, or undefined (the client cannot read one, or too soon). */
  answer(now: number): Uint8Array | undefined {
    const both = this.own & clientCapabilities(this.request);
    if (!hasFeature(both, 'fetching')) return undefined;
    if (now - this.lastSentAt < this.limits.fetchingMinIntervalMs) return undefined;
    this.lastSentAt = now;
    this.datagram ??= this.make(hasFeature(both, 'signatures') ? this.signer : undefined);
    return this.datagram;
  }

  private make(signer: MetaSigner | undefined): Uint8Array {
    const { transferId, url, range } = this.request;
    const answerWithinMs = this.limits.fetchingAnswerWithinMs;
    const signature = signer?.sign(
      fetchingAssertionMessage(answerWithinMs, { url, ...(range ? { range } : {}) }, signer.proxyId),
    );
    return encodeFetching({ transferId, answerWithinMs, ...(signature ? { signature } : {}) });
  }
}
