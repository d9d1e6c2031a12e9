/**
 * This source's path to the client as the client's feedback describes it: the delivery rate it
 * measures, the in-flight cap it sets, and the RTT; from them, how many packets may be in flight.
 */
import { UNLIMITED_IN_FLIGHT } from '../limits';
import { DATA_RLNC_HEADER_BYTES } from '../wire';
import { SenderConfig } from './config';
import { PathEstimate } from './options';
import { RttEstimator } from './rtt';

/**
 * A warm start never assumes more than this rate (4 Gbit/s): the estimate comes from the client's
 * own reports, and maxInFlightPackets bounds the in-flight limit it yields anyway.
 */
const MAX_WARM_RATE_BPS = 500_000_000;

export class PathState {
  readonly rtt: RttEstimator;
  /** The client's newest reported delivery rate (bytes/s); 0 before the first. */
  private rateBps = 0;
  private inFlightCap = UNLIMITED_IN_FLIGHT;
  /** A full DATA datagram: the client measures whole datagrams, so rates divide by this. */
  private readonly datagramBytes: number;

  constructor(
    private readonly config: SenderConfig,
    symbolSize: number,
    warm: PathEstimate | undefined,
  ) {
    this.datagramBytes = symbolSize + DATA_RLNC_HEADER_BYTES;
    const warmUsable = warm !== undefined && warm.rateBps > 0 && warm.minRttMs > 0 && Number.isFinite(warm.minRttMs);
    // The warm RTT stands in until this transfer's own samples arrive (the minimum is re-learnt).
    this.rtt = new RttEstimator(warmUsable ? warm.minRttMs : config.initialRttMs);
    if (warmUsable) this.rateBps = Math.min(warm.rateBps, MAX_WARM_RATE_BPS);
  }

  /** The newest feedback's rate (0: none measured yet) and in-flight cap. */
  onReport(rateBps: number, inFlightCap: number): void {
    if (rateBps > 0) this.rateBps = rateBps;
    this.inFlightCap = inFlightCap;
  }

  /** Packets this source may have in flight now. */
  get inFlightLimit(): number {
    const c = this.config;
    let limit = c.initialWindowPackets;
    if (this.rateBps > 0) {
      // The client measures whole datagrams, so divide by the datagram size, not the symbol size.
      // 'smoothed' takes over only where the gain no longer covers the queue (smoothed RTT above
      // gain x min): below that it is the min RTT, as on WebRTC (more in flight costs late
      // binding under loss: rlnc on paper-loss2 0.76-0.89 with the smoothed RTT always, 0.87 without).
      const smoothed = c.inFlightRtt === 'smoothed' && this.rtt.sampled ? this.rtt.smoothed / c.inFlightGain : 0;
      const rttMs = Math.max(this.rtt.base, smoothed);
      const bdpPackets = (this.rateBps * rttMs) / 1000 / this.datagramBytes;
      limit = Math.min(c.maxInFlightPackets, Math.ceil(c.inFlightGain * bdpPackets) + c.inFlightHeadroomPackets);
    }
    return this.inFlightCap === UNLIMITED_IN_FLIGHT ? limit : Math.min(limit, this.inFlightCap);
  }

  /**
   * Packets all sources of the transfer deliver per round trip, as this source sees it: its own
   * reported rate over its `share` of the slots. 0 before the first rate estimate.
   */
  transferBdpPackets(share: number): number {
    if (this.rateBps <= 0 || share <= 0) return 0;
    return ((this.rateBps / share) * (this.rtt.smoothed / 1000)) / this.datagramBytes;
  }

  /** The path as this transfer left it, for the next transfer's warm start; undefined before feedback. */
  estimate(): PathEstimate | undefined {
    return this.rateBps > 0 && this.rtt.sampled ? { rateBps: this.rateBps, minRttMs: this.rtt.min } : undefined;
  }
}
