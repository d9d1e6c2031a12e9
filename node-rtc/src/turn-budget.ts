/**
 * How many received messages a channel hands on per event-loop turn.
 *
 * node-datachannel 0.33 gives each received message to the JS thread through the channel's own
 * ThreadSafeFunction, a native queue without a bound and without a way to poll it: while the
 * thread is busy (decoding, a GC, a loaded machine), libdatachannel's threads keep queueing
 * messages, each a malloc'd copy in their glibc arenas, and the process's RSS keeps the queue's
 * high-water mark (freed arena memory is rarely handed back). Node runs at most 1000 queued
 * calls per channel per turn, so a turn that brings one channel more than `perTurn` messages
 * means the thread fell that far behind: the rest of that turn's messages are dropped unread.
 * A drop costs a call and a copy instead of a decode, so the queue drains in a few turns. The
 * drops are counted (nodeRtcReceiveDrops): the client's receivers read the count and, while it
 * grows, report each source the rate they handle its data at instead of the train estimate, which
 * reads a backlog at the thread's speed (docs/protocol.md §9.2, "Receive drops"); that lowers the
 * sources' in-flight limits, so the budget acts on bursts. MUTP's channels are unreliable: a
 * drop is a loss the protocol repairs.
 */
export interface TurnBudgetStats {
  /** Messages handed on. */
  delivered: number;
  /** Messages dropped because a turn brought more than the budget. */
  dropped: number;
  /** The most messages one channel brought in one turn. */
  largestTurn: number;
}

/** Where a turn ends: the next check phase of the event loop (tests pass their own). */
export type ScheduleTurnEnd = (callback: () => void) => void;

/** The event loop's turns, shared by every channel of a process (they share its thread). */
export class TurnClock {
  private turn = 0;
  private endScheduled = false;

  constructor(private readonly scheduleEnd: ScheduleTurnEnd = (f) => setImmediate(f)) {}

  /** The current turn's number; the first call in a turn arranges for the turn to end. */
  current(): number {
    if (!this.endScheduled) {
      this.endScheduled = true;
      this.scheduleEnd(() => {
        this.endScheduled = false;
        this.turn++;
      });
    }
    return this.turn;
  }
}

/** One channel's budget. */
export class TurnBudget {
  private turn = -1;
  private inTurn = 0;

  constructor(
    private readonly perTurn: number,
    private readonly clock: TurnClock,
    private readonly stats: TurnBudgetStats,
  ) {
    if (!(perTurn >= 1)) throw new RangeError('perTurn must be at least 1');
  }

  /** Counts one received message; false when it is over this turn's budget (drop it). */
  admit(): boolean {
    const turn = this.clock.current();
    if (turn !== this.turn) {
      this.turn = turn;
      this.inTurn = 0;
    }
    this.inTurn++;
    if (this.inTurn > this.stats.largestTurn) this.stats.largestTurn = this.inTurn;
    if (this.inTurn > this.perTurn) {
      this.stats.dropped++;
      return false;
    }
    this.stats.delivered++;
    return true;
  }
}
