/** The Sender's tuning: window sizing, loss detection, timeouts and coded redundancy. */
export interface SenderConfig {
  /** RTT assumed before the first sample. */
  initialRttMs: number;
  /** Packets in flight before the client reports a rate. */
  initialWindowPackets: number;
  /** In-flight target = gain x reported rate x RTT (plus headroom): the queue stays shallow. */
  inFlightGain: number;
  /**
   * The RTT of that target. `min` where the transport's own controller is loss-based and fills
   * queues (SCTP under WebRTC): the target then keeps the queue shallow itself. `smoothed` where
   * the transport paces by delay (MutpRate under QUIC), which bounds the queue and, beside a TCP
   * flow, must be able to run with the standing queue the other flow keeps: a min-RTT target
   * there caps the transfer at a fraction of its rate (bench:fairness, 0.1 of the bottleneck).
   * With `smoothed` the RTT is max(min RTT, smoothed RTT / inFlightGain): the min RTT until a
   * standing queue outgrows the gain, then one BDP at the current RTT.
   */
  inFlightRtt: 'min' | 'smoothed';
  /**
   * Above the receiver's ackEveryPackets (12): on a short path (a nearby edge, a LAN, loopback)
   * rate x RTT is a few packets, and with fewer in flight than trigger an ack, feedback comes
   * only on the receiver's timer, the measured rate stays low and the limit never grows.
   */
  inFlightHeadroomPackets: number;
  maxInFlightPackets: number;
  /** Packets sent after one the client acknowledged before a missing one counts as lost. */
  reorderThreshold: number;
  /** Allowance for the receiver's feedback interval when timing out in-transit packets. */
  ackDelaySlackMs: number;
  /** The transfer ends when the client is silent this long. */
  idleTimeoutMs: number;
  /** A unit in this source's window longer than this many RTTs (+ ack slack) is overdue. */
  overdueRtts: number;
  /**
   * Coded mode sends a generation ceil(size x measured loss x this) packets beyond its size
   * (spread over the owners), so its losses need no repair round trip, where such a round trip
   * would hold the transfer up: everywhere while the window is too small to hide one (below
   * repairWindowBdps), else only in the object's tail.
   */
  redundancyFactor: number;
  /**
   * The tail: the units the sources send in the last this-many bandwidth-delay products of the
   * object. Nothing comes after them to work on while a repair travels, so each of their losses
   * costs a round trip at the end.
   */
  tailBdps: number;
  /** ... and the tail's generations get ceil(size x loss x this) extra packets. */
  tailRedundancyFactor: number;
  /**
   * A window of at least this many bandwidth-delay products keeps the sources busy while a
   * repair travels, so generations outside the tail get no redundancy: repairing the few that
   * lose more than nothing costs less than sending every one extra packets.
   */
  repairWindowBdps: number;
}

export const DEFAULT_SENDER_CONFIG: SenderConfig = {
  initialRttMs: 100,
  initialWindowPackets: 16,
  inFlightGain: 1.5,
  inFlightRtt: 'min',
  inFlightHeadroomPackets: 16,
  maxInFlightPackets: 4096,
  reorderThreshold: 3,
  ackDelaySlackMs: 25,
  idleTimeoutMs: 5000,
  overdueRtts: 2,
  redundancyFactor: 1.5,
  tailBdps: 1.5,
  tailRedundancyFactor: 3,
  repairWindowBdps: 4,
};
