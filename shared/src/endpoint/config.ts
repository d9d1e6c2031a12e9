/**
 * How a source endpoint is set up: whom it serves, with which codecs and admission, and its
 * limits against a misbehaving or silent client.
 */
import { Codec } from '../codec/types';
import { Sha256 } from '../integrity';
import { MetaSigner, SenderConfig } from '../sender/sender';
import { Feature, Mode } from '../wire';
import { Admission } from './admission';
import { ErrorReplyLimits } from './error-replies';
import { FetchingReplyLimits } from './fetching-replies';

export interface EndpointLimits extends ErrorReplyLimits, FetchingReplyLimits {
  /**
   * Smallest symbol a client may ask for. Per-unit bookkeeping scales with object / symbol, so a
   * 16-byte symbol would make a 64 MiB object cost 4 M units of state.
   */
  minSymbolSize: number;
  /** A peer with no transfer and no datagram for this long is reported idle (the caller closes it). */
  idleTimeoutMs: number;
  /**
   * A transfer that starts within this long of the previous one's end on the same connection
   * starts from that transfer's path estimate (Sender `warmStart`). Players ask for a segment
   * every few seconds; longer gaps fall back to the cautious initial window.
   */
  pathMemoryMs: number;
}

export const DEFAULT_ENDPOINT_LIMITS: EndpointLimits = {
  minSymbolSize: 256,
  idleTimeoutMs: 30_000,
  maxControlQueue: 64,
  maxRecentErrors: 64,
  recentErrorMs: 5000,
  pathMemoryMs: 10_000,
  // The reference proxy's whole origin fetch timeout (--origin-total-timeout-ms); clients cap it.
  fetchingAnswerWithinMs: 60_000,
  fetchingMinIntervalMs: 50,
};

export interface SourceEndpointOptions {
  /** Whom per-client limits count against (a token subject, a peer id). */
  clientKey: string;
  /** The client's network, whom per-network shares count against (default: clientKey). */
  networkKey?: string;
  codecs: Partial<Record<Mode, Codec>>;
  admission: Admission;
  /** Seeds of the per-transfer coefficient generators. */
  seed: () => number;
  now: number;
  senderConfig?: Partial<SenderConfig>;
  /**
   * The source's own upload capacity in bytes/s, when it knows it (a proxy's upload limit). A
   * transfer with no recent path estimate starts sending at this rate instead of growing from
   * `initialWindowPackets`: the first round trip is otherwise spent at a fraction of the link,
   * which costs most at the start of short downloads. The client's rate reports take over after
   * the first round trip, so a source shared by several clients settles at its share.
   */
  uploadCapBps?: number;
  limits?: Partial<EndpointLimits>;
  /** SHA-256 for integrity digests (Node hosts pass node:crypto's; default a portable one). */
  sha256?: Sha256;
  /** Signs every META's assertion (a proxy's key, published by origo); unsigned without it. */
  signer?: MetaSigner;
  /**
   * Optional features this source leaves off (docs/protocol.md §13), as a source one release
   * behind: for tests of a mixed fleet and rolling upgrades. It declares none of them, sends none,
   * and drops a datagram that uses one unanswered, as that older release would.
   */
  disabledFeatures?: readonly Feature[];
}
