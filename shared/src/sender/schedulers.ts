/**
 * Packet schedulers: which unit the next datagram carries, decided only when the transport can
 * take one (late binding). Each sees the source's own view: the client's last feedback plus what
 * this source has in transit. None may choose a unit outside [windowStart, windowEnd).
 */
import { schedulerSupports } from '../modes';
import { Partition } from '../partition';
import { Random, randomBelow } from '../random';
import { Mode, SchedulerName } from '../wire';

export interface ScheduleView {
  readonly windowStart: number;
  readonly windowEnd: number;
  readonly sourceIndex: number;
  /** The current weights' partition: each source's share of the work still to start. */
  readonly partition: Partition;
  readonly generationSize: number;
  /**
   * Who owns slot `slot` of unit `unit`: by the partition in force when the unit was first worked
   * on (see SlotOwnership.pinned), so new weights never hand a slot already sent to another owner.
   */
  ownerOf(unit: number, slot: number): number;
  /** DoF the client has of unit u (uncoded: 0 or 1). */
  rank(unit: number): number;
  /** DoF unit u holds (uncoded: 1). */
  unitSize(unit: number): number;
  /** This source's packets of unit u still in transit. */
  inTransit(unit: number): number;
  /** This source's packets of unit u the client acknowledged. */
  deliveredOwn(unit: number): number;
  /** Extra packets unit u should get beyond its size to ride out the measured loss (coded). */
  redundancy(unit: number): number;
  /** Extra packets to ride out the measured loss when `packets` must arrive. */
  lossAllowance(packets: number): number;
  /**
   * Unit u has been in this source's window long enough (about two RTTs) that its owners should
   * have delivered it: helping with it now covers a slow or dead source, not a busy one.
   */
  overdue(unit: number): boolean;
}

export interface Scheduler {
  readonly name: SchedulerName;
  /** The unit to send next, or -1 if nothing in the window is worth sending now. */
  pick(view: ScheduleView): number;
}

/** The paper's uncoded scheduler: uniform among sendable packets (without replacement). */
class RandomScheduler implements Scheduler {
  readonly name = 'random' as const;
  private readonly sendable: number[] = [];

  constructor(private readonly random: Random) {}

  pick(v: ScheduleView): number {
    const sendable = this.sendable;
    sendable.length = 0;
    for (let u = v.windowStart; u < v.windowEnd; u++) if (v.rank(u) === 0 && v.inTransit(u) === 0) sendable.push(u);
    return sendable.length === 0 ? -1 : sendable[randomBelow(this.random, sendable.length)];
  }
}

/**
 * Default uncoded scheduler. Own packets (see Partition) go first, lowest index first, so the
 * window advances at the speed of every source. With none left, the source helps only with
 * overdue packets, oldest first: what its owner should have delivered by now.
 */
class PartitionedUncodedScheduler implements Scheduler {
  readonly name = 'partitioned' as const;

  pick(v: ScheduleView): number {
    const own = v.sourceIndex;
    for (let u = v.windowStart; u < v.windowEnd; u++) {
      if (v.rank(u) === 0 && v.inTransit(u) === 0 && v.ownerOf(u, u) === own) return u;
    }
    for (let u = v.windowStart; u < v.windowEnd && v.overdue(u); u++) {
      if (v.rank(u) === 0 && v.inTransit(u) === 0) return u;
    }
    return -1;
  }
}

/** The paper's coded scheduler: the generation with least received DoF + own packets in transit. */
class RarestScheduler implements Scheduler {
  readonly name = 'rarest' as const;

  pick(v: ScheduleView): number {
    let best = -1;
    let bestScore = Infinity;
    for (let u = v.windowStart; u < v.windowEnd; u++) {
      const rank = v.rank(u);
      const transit = v.inTransit(u);
      if (rank + transit >= v.unitSize(u)) continue;
      if (rank + transit < bestScore) {
        bestScore = rank + transit;
        best = u;
      }
    }
    return best;
  }
}

/**
 * Default coded scheduler. Each generation's missing DoF are slots owned by sources in proportion
 * to their weights. It works lowest generation first: all sources
 * finish the oldest generation together, so the window slides continuously instead of every
 * generation in it completing at once (what rarest-first does), and no source pours into a
 * generation more than its share. With nothing of its own left it helps only overdue
 * generations, oldest first.
 */
class PartitionedCodedScheduler implements Scheduler {
  readonly name = 'partitioned' as const;

  pick(v: ScheduleView): number {
    const own = v.sourceIndex;
    const g = v.generationSize;
    for (let u = v.windowStart; u < v.windowEnd; u++) {
      const transit = v.inTransit(u);
      const size = v.unitSize(u);
      if (v.rank(u) >= size) continue;
      // Ownership is over the whole generation, so it does not shift as others deliver.
      // Redundant slots extend the generation; losses then need no round trip to repair.
      const slots = size + v.redundancy(u);
      const budget = transit + v.deliveredOwn(u);
      let owned = 0;
      for (let t = 0; t < slots && owned <= budget; t++) if (v.ownerOf(u, u * g + t) === own) owned++;
      if (owned > budget) return u;
    }
    // One helping packet per overdue generation at a time: the owner may be repairing a loss.
    for (let u = v.windowStart; u < v.windowEnd && v.overdue(u); u++) {
      if (v.inTransit(u) === 0 && v.rank(u) < v.unitSize(u)) return u;
    }
    return -1;
  }
}

/**
 * Fountain scheduler. Sources never collide on block ids (each has its own id sequence, see
 * DataWriter), and any blocks the client lacks are useful, so the only waste left is sending
 * more than it still needs. A source keeps in flight at most its weighted share of what a source
 * block still misses, plus the loss allowance, lowest block first; with that met it helps only
 * with an overdue block, one packet at a time.
 */
class FountainScheduler implements Scheduler {
  readonly name = 'partitioned' as const;

  pick(v: ScheduleView): number {
    const share = v.partition.share(v.sourceIndex);
    for (let u = v.windowStart; u < v.windowEnd; u++) {
      const missing = v.unitSize(u) - v.rank(u);
      if (missing <= 0) continue;
      const quota = Math.ceil(share * missing) + v.lossAllowance(Math.ceil(share * missing));
      if (v.inTransit(u) < quota) return u;
    }
    for (let u = v.windowStart; u < v.windowEnd && v.overdue(u); u++) {
      if (v.inTransit(u) === 0 && v.rank(u) < v.unitSize(u)) return u;
    }
    return -1;
  }
}

export function createScheduler(mode: Mode, name: SchedulerName, random: Random): Scheduler {
  if (!schedulerSupports(mode, name)) throw new RangeError(`scheduler ${name} does not support mode ${mode}`);
  if (mode === 'uncoded') return name === 'random' ? new RandomScheduler(random) : new PartitionedUncodedScheduler();
  if (mode === 'fountain') return new FountainScheduler();
  return name === 'rarest' ? new RarestScheduler() : new PartitionedCodedScheduler();
}
