/**
 * Who owns each slot of each unit: the partition of the sources' weights (partition.ts) that the
 * client's newest feedback publishes, and, per unit, the partition its work began under.
 */
import { bytesEqual } from '../bytes';
import { Partition } from '../partition';

/** Partitions kept for pinned units (see SlotOwnership.epochs). */
const MAX_EPOCHS = 64;

export class SlotOwnership {
  /** The current weights' partition: each source's share of the work still to start. */
  partition: Partition;
  private weights: Uint8Array;
  /**
   * The partition each unit's slots were owned by when work on it began (this source sent into it
   * or the client reported DoF of it); unset for untouched units, which follow the current one.
   * Weights change with every noisy rate estimate, and re-owning slots other sources have already
   * sent makes the new owners send them again: on 40 ms testbed paths that was a fifth of rlnc's
   * packets.
   */
  private readonly pinned: Uint16Array; // index into `epochs`; 0 = not begun
  /**
   * The partitions units are pinned to, by epoch (index 0 unused); the last is the current one.
   * The client decides how often weights change, so at most MAX_EPOCHS are kept: past that every
   * pin is dropped, which costs an erratic client efficiency, never the proxy memory.
   */
  private epochs: Partition[];
  /**
   * Pins protect shares that started from the sources' capacities (the REQUEST carried weights).
   * From equal shares (capacities unknown) the first measured weights must correct begun units
   * too, or a fast source waits a whole window for its share (simulator, N = 6 mixed caps without
   * capacities: efficiency 0.81 with pins against 0.86 without).
   */
  private readonly keepBegunOwners: boolean;

  /** `requestWeights`: the REQUEST's initial weights, if it carried any (else equal shares). */
  constructor(unitCount: number, sourceCount: number, requestWeights: Uint8Array | undefined) {
    this.weights = requestWeights ? Uint8Array.from(requestWeights) : new Uint8Array(sourceCount);
    this.partition = new Partition(this.weights);
    this.epochs = [this.partition, this.partition];
    this.keepBegunOwners = requestWeights !== undefined;
    this.pinned = new Uint16Array(unitCount);
  }

  /** The source that owns slot `slot` of unit `unit`. */
  ownerOf(unit: number, slot: number): number {
    const epoch = this.keepBegunOwners ? this.pinned[unit] : 0;
    return (epoch > 0 ? this.epochs[epoch] : this.partition).owner(slot);
  }

  /** Pins unit u to the current partition if work on it has not begun before. */
  pin(unit: number): void {
    if (this.pinned[unit] === 0) this.pinned[unit] = this.epochs.length - 1;
  }

  /** The newest feedback's weights: a new current partition when they changed. */
  repartition(weights: Uint8Array): void {
    if (bytesEqual(weights, this.weights)) return; // most feedback repeats the published weights
    // A source that dropped to no share (silent, failed, excluded) sends nothing more: its slots
    // in begun units must pass to the others now, not wait until they are overdue.
    const previous = this.partition;
    let unpin = this.epochs.length > MAX_EPOCHS;
    for (let i = 0; i < weights.length && !unpin; i++) if (weights[i] === 0 && previous.share(i) > 0) unpin = true;
    if (unpin) {
      this.pinned.fill(0);
      this.epochs = [previous];
    }
    this.weights = Uint8Array.from(weights);
    this.partition = new Partition(weights);
    this.epochs.push(this.partition);
  }
}
