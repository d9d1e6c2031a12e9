/** The receiver's tunables and their defaults (see Receiver). */

/**
 * Default bound of the wait a FETCHING buys, from the first META: about what a cold origin fetch
 * of a segment takes, and well inside the stall timeout (15 s) and the 10 s after which the
 * client orchestration gives up on a source that has not answered.
 */
export const DEFAULT_FETCHING_WAIT_MS = 5000;

export interface ReceiverConfig {
  /** Feedback to each source at least this often, so a lost one is soon covered by the next. */
  feedbackIntervalMs: number;
  /**
   * ... and after this many data packets from it. Each FEEDBACK costs the client an encode and a
   * send (issue 33: a fifth of a Node QUIC client's JS thread at 8). At most 12: a FEEDBACK's acks
   * reach 33 packets back, which must cover what arrives between two that one lost FEEDBACK
   * separates, batches of 8 included (feedback-cadence.test.ts); and below the Sender's
   * inFlightHeadroomPackets (16), so a short path's few packets in flight still trigger one.
   */
  ackEveryPackets: number;
  requestRetryMs: number;
  maxRequestRetryMs: number;
  /** Once another source has answered, a silent one is asked again after twice its answer time, but no sooner than this. */
  minRequestRetryMs: number;
  /**
   * The download fails when no degree of freedom arrives for this long: the longest disconnection
   * a download survives (its state, decoded units included, is kept meanwhile).
   */
  stallTimeoutMs: number;
  /**
   * A source heard before and silent this long is asked again (REQUEST, backing off): after a
   * disconnection its sender may have dropped the transfer, and then starts it again.
   */
  resumeAfterMs: number;
  maxObjectBytes: number;
  trainLength: number;
  medianWindow: number;
  /**
   * While the host drops received messages unread (ReceiverOptions.receiveDrops), each source is
   * told at most the rate this receiver handled its data at over this window (handled-rate.ts).
   */
  handledRateWindowMs: number;
  /** ... and for this long after the last drop; then that cap doubles every as long until it lifts. */
  receiveDropHoldMs: number;
  /** A source silent this long (after it had sent data) gets no share of the work. */
  inactiveAfterMs: number;
  /** Levels of the quantised weights; coarse, so ownership changes rarely. */
  weightLevels: number;
  /**
   * Weights are republished only when a source's share moves by more than this fraction of
   * itself: every change hands some in-flight slots to another owner, who then sends them again.
   */
  weightHysteresis: number;
  /**
   * Cap each source's packets in flight at its share of what the window still misses. On by
   * default with the partitioned schedulers; off with the paper's ones (random, rarest), so they
   * run the protocol as published.
   */
  inFlightCaps?: boolean;
  /** Extra in-flight allowance per source beyond its share. */
  capSlackPackets: number;
  capLossMargin: number;
  /**
   * A source may exceed its share of the window by this factor: room for its rate estimate to
   * grow when the share underestimates it (a capped source measures only what it was allowed).
   */
  capHeadroom: number;
  /**
   * Sources that must report the same object identity (length, SHA-256, unit root) before any of
   * their data is used: min(quorum, sources asked), however many of them fail or stay silent, and
   * none may report another identity. 1 trusts the first META.
   */
  quorum: number;
  /**
   * A source that has sent nothing at all this long after the first META is no longer waited for
   * (it may be dead): the download goes on when the others meet the quorum, else fails.
   */
  agreementWaitMs: number;
  /**
   * A source that said it is still fetching (a FETCHING that counts, protocol.md §4.2c) is waited
   * for past agreementWaitMs, never longer than this after the first META: the most a rogue's
   * FETCHING can delay a download.
   */
  fetchingWaitMs: number;
  /** Packets of unverified check units kept to identify a polluter (bytes, all units together). */
  maxPacketLogBytes: number;
  /** Uncoded: a failed check unit asks the sources for its symbol digests again after this long. */
  symbolDigestRetryMs: number;
  /**
   * 'unchecked' is the baseline that measures what integrity costs (bench:e2e --integrity-baseline),
   * never a way to download: the first META is believed (quorum 1, signed or not), no unit digest
   * is waited for or checked, no packet is kept to find a polluter and the object's SHA-256 is not
   * compared. Only the caller's own config can set it; nothing on the wire can.
   */
  integrity: 'checked' | 'unchecked';
}

export const DEFAULT_RECEIVER_CONFIG: ReceiverConfig = {
  feedbackIntervalMs: 20,
  // 8 before issue 33: 12 sends a third fewer (fountain, uncoded; rlnc's generation-complete
  // FEEDBACKs stay), with the same efficiency in bench:e2e and the simulator.
  ackEveryPackets: 12,
  requestRetryMs: 200,
  maxRequestRetryMs: 2000,
  minRequestRetryMs: 20,
  stallTimeoutMs: 15000,
  resumeAfterMs: 1000,
  maxObjectBytes: 256 * 1024 * 1024,
  trainLength: 16,
  medianWindow: 5,
  handledRateWindowMs: 500,
  receiveDropHoldMs: 1000,
  inactiveAfterMs: 500,
  // Fine enough for a 1:2 cap mix (32 levels gave 4:7, and the slower sources a fifth more work).
  weightLevels: 255,
  weightHysteresis: 0.25,
  capSlackPackets: 2,
  capLossMargin: 0.05,
  capHeadroom: 1.5,
  quorum: 2,
  agreementWaitMs: 1000,
  fetchingWaitMs: DEFAULT_FETCHING_WAIT_MS,
  maxPacketLogBytes: 64 * 1024 * 1024,
  symbolDigestRetryMs: 250,
  integrity: 'checked',
};
