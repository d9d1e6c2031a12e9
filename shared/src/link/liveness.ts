/**
 * Whether a proxy link is dead, judged once per link from what its transfers expect (not once per
 * download, as each download once judged each of its sources): a link whose proxy was streaming
 * and went quiet, or that never answered a request, is lost long before any transfer's stall
 * timeout would say so. Pure: the link endpoint feeds it its state and acts on the verdict.
 */

export interface LivenessLimits {
  /**
   * A link whose proxy was heard by a transfer still waiting for data, then silent this long, is
   * dead. After a disconnection a surviving connection may sit in retransmission back-off for many
   * seconds more; a new one is up in one handshake.
   */
  silentMs: number;
  /**
   * A transfer never heard gets this long from its first datagram on the link before the link is
   * judged dead: its proxy may be fetching the object from the origin, which a new connection
   * withdraws, so this is well above a segment's origin fetch.
   */
  unansweredMs: number;
}

export const DEFAULT_LIVENESS_LIMITS: LivenessLimits = { silentMs: 3000, unansweredMs: 10_000 };

/** One transfer's view of the link, on its current transport. */
export interface TransferLiveness {
  /** Still expects data from this proxy. */
  awaiting: boolean;
  /** Heard from this proxy in the transfer (on any transport): it was streaming. */
  heard: boolean;
  /** When it first sent on the current transport (undefined: not yet). */
  firstSentAt?: number;
}

export type LivenessVerdict =
  | { kind: 'alive' }
  /** Dead: close the transport (and reconnect). */
  | { kind: 'dead'; reason: string }
  /**
   * Unanswered for `silentMs`: ask whether the network answers at all (once per transport). A
   * network that does not answer means the requests went into a disconnection, and the link is
   * made anew at once instead of after `unansweredMs`.
   */
  | { kind: 'probe'; reason: string };

/**
 * The verdict at `now` for a link that opened its transport at `openedAt` and last heard its
 * proxy at `lastHeardAt` (-Infinity: not on this transport).
 */
export function judgeLiveness(
  limits: LivenessLimits,
  transfers: Iterable<TransferLiveness>,
  openedAt: number,
  lastHeardAt: number,
  now: number,
): LivenessVerdict {
  let streaming = false;
  let waitingSince = Infinity;
  for (const t of transfers) {
    if (!t.awaiting) continue;
    if (t.heard) streaming = true;
    else if (t.firstSentAt !== undefined) waitingSince = Math.min(waitingSince, t.firstSentAt);
  }
  const quietSince = Math.max(openedAt, lastHeardAt);
  if (streaming && now - quietSince > limits.silentMs)
    return { kind: 'dead', reason: `nothing for ${limits.silentMs} ms` };
  if (waitingSince === Infinity) return { kind: 'alive' };
  const unanswered = now - Math.max(quietSince, waitingSince);
  if (unanswered > limits.unansweredMs) return { kind: 'dead', reason: `no answer for ${limits.unansweredMs} ms` };
  if (unanswered > limits.silentMs) return { kind: 'probe', reason: `no answer for ${limits.silentMs} ms` };
  return { kind: 'alive' };
}
