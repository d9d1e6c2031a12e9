/**
 * Slot ownership for the partitioned schedulers. The client knows every source and its rate; the
 * sources do not know each other. The client therefore sends every source the same quantised
 * weights, and each source derives from them, without further coordination, which slots are its
 * own: slot s goes to the source whose cumulative-weight interval contains the golden-ratio
 * point frac((s + 1) * 0x9E3779B9 / 2^32). The sequence is low-discrepancy, so every run of
 * consecutive slots is split close to the weights: sources with weights proportional to their
 * rates move through the window at the same speed and rarely send the same packet.
 * A slot is a packet index (uncoded) or generation * g + DoF index (rlnc).
 */
export class Partition {
  private readonly bounds: number[] = [];

  constructor(weights: ArrayLike<number>) {
    let total = 0;
    for (let i = 0; i < weights.length; i++) total += weights[i];
    const equal = total === 0;
    if (equal) total = weights.length;
    let acc = 0;
    for (let i = 0; i < weights.length; i++) {
      acc += equal ? 1 : weights[i];
      this.bounds.push(Math.floor((acc / total) * 0x100000000));
    }
    this.bounds[this.bounds.length - 1] = 0x100000000;
  }

  /** Fraction of all slots that source `index` owns. */
  share(index: number): number {
    const upper = this.bounds[index] ?? 0;
    const lower = index > 0 ? this.bounds[index - 1] : 0;
    return (upper - lower) / 0x100000000;
  }

  owner(slot: number): number {
    const x = Math.imul(slot + 1, 0x9e3779b9) >>> 0;
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) if (x < bounds[i]) return i;
    return bounds.length - 1;
  }

  static equal(sourceCount: number): Partition {
    return new Partition(new Array<number>(sourceCount).fill(1));
  }
}
