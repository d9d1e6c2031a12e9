/**
 * Delivery-rate estimate of one source from packet trains (RCDP, thesis 3.4.2): consecutive data
 * sequence numbers are grouped in trains of `trainLength`; a train that arrived at least half
 * complete gives one sample (bytes after the first packet / first-to-last arrival time), and the
 * filtered value is the median of the last `medianWindow` samples (k = 5 keeps outliers under 1%).
 * The estimate is the largest filtered value of the last `maxWindow` trains: a source that sent
 * less than it could (its share was small, or the window was full) delivers trains with gaps and
 * would otherwise be measured below its capacity, get a smaller share, and sink further.
 *
 * Bunched arrivals (a sender's start-up burst, a token bucket's burst, a receiver that stalled
 * and then read a queue at once) compress a train's span and read as rates many times the
 * path's. Such a sample, taken into the maximum, would hold a wrong share for ten trains. So only
 * medians of at least three samples enter the maximum; until then the estimate is the median
 * alone, and a bunched train among the first two counts for a train or two, not ten. (A stall
 * that bunches two of the first three trains still gets through. Capping samples at the average
 * since the first packet would catch it, but on long paths that average includes the first round
 * trip's idle time and cost the simulator grid 10 % efficiency; taking the lower median early as
 * well cost rlnc 2 % normalized goodput there. Send timestamps in DATA would settle it.)
 */
const MIN_SAMPLES_FOR_MAX = 3;

export class RateEstimator {
  private train = -1;
  private firstAt = 0;
  private lastAt = 0;
  private count = 0;
  private bytesAfterFirst = 0;
  private readonly samples: number[] = [];
  private readonly filtered: number[] = [];
  private estimate = 0;

  constructor(
    private readonly trainLength = 16,
    private readonly medianWindow = 5,
    private readonly maxWindow = 10,
  ) {}

  /** Record a data packet: its sequence number, size and arrival time (ms). */
  onPacket(seq: number, bytes: number, now: number): void {
    const train = Math.floor(seq / this.trainLength);
    if (train < this.train) return; // a straggler of a closed train
    if (train > this.train) {
      this.closeTrain();
      this.train = train;
      this.firstAt = now;
      this.lastAt = now;
      this.count = 1;
      this.bytesAfterFirst = 0;
      return;
    }
    this.lastAt = now;
    this.count++;
    this.bytesAfterFirst += bytes;
  }

  private closeTrain(): void {
    if (this.train < 0 || this.count * 2 < this.trainLength) return;
    const span = this.lastAt - this.firstAt;
    if (span <= 0) return;
    this.samples.push((this.bytesAfterFirst * 1000) / span);
    if (this.samples.length > this.medianWindow) this.samples.shift();
    const sorted = [...this.samples].sort((a, b) => a - b);
    const median = sorted[sorted.length >> 1];
    if (this.samples.length < MIN_SAMPLES_FOR_MAX) {
      this.estimate = median;
      return;
    }
    this.filtered.push(median);
    if (this.filtered.length > this.maxWindow) this.filtered.shift();
    this.estimate = Math.max(...this.filtered);
  }

  /** Bytes per second; 0 until the first train has closed. */
  get bytesPerSecond(): number {
    return this.estimate;
  }
}
