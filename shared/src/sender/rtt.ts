/** Round-trip time estimator (RFC 6298 smoothing) with the minimum kept for sizing the window. */
export class RttEstimator {
  smoothed: number;
  variance: number;
  min = Infinity;
  private hasSample = false;

  constructor(private readonly initialMs: number) {
    this.smoothed = initialMs;
    this.variance = initialMs / 2;
  }

  addSample(ms: number): void {
    if (!(ms > 0) || !Number.isFinite(ms)) return;
    this.min = Math.min(this.min, ms);
    if (!this.hasSample) {
      this.smoothed = ms;
      this.variance = ms / 2;
      this.hasSample = true;
      return;
    }
    this.variance = 0.75 * this.variance + 0.25 * Math.abs(this.smoothed - ms);
    this.smoothed = 0.875 * this.smoothed + 0.125 * ms;
  }

  get sampled(): boolean {
    return this.hasSample;
  }

  /** Base RTT for in-flight sizing: the minimum seen, or the initial guess before any sample. */
  get base(): number {
    return this.hasSample ? this.min : this.initialMs;
  }

  /** When an unacknowledged packet is presumed lost. `slackMs` covers the receiver's ack delay. */
  timeout(slackMs: number): number {
    return Math.max(this.smoothed + 4 * this.variance, 1.25 * this.smoothed) + slackMs;
  }
}
