/**
 * The one timer every host of a sans-IO machine keeps (quinn's `poll_timeout` / `handle_timeout`):
 * after each input and flush the host asks the machine for its next deadline and arms a timer
 * there; when it fires, the machine gets the time if its deadline is due, and the host flushes what
 * it now wants to send. The proxy (real timers, per client peer), the client (its host's clock)
 * and the simulator (its event queue) all drive Senders, Receivers and endpoints this way.
 */

/** What a machine offers its host about time: Sender, Receiver, SourceEndpoint. */
export interface TimedMachine {
  nextDeadline(): number | null;
  handleTimeout(now: number): void;
}

/**
 * The host's timer: calls `fire` at time `at` (the machine's clock) or a little later, and returns
 * a function that cancels it (a host that cannot cancel returns a no-op: a stale timer that fires
 * only finds nothing due).
 */
export type ScheduleAt = (at: number, fire: () => void) => () => void;

export class DeadlineTimer {
  private armedAt = Infinity;
  private cancel?: () => void;
  private stopped = false;

  constructor(
    private readonly machine: TimedMachine,
    private readonly scheduleAt: ScheduleAt,
    private readonly now: () => number,
    /** After the timer fired (and the machine had its timeout if due): flush its output, re-arm. */
    private readonly afterFire: (now: number) => void,
  ) {}

  /**
   * Arms the timer at the machine's deadline. Only a deadline earlier than the armed one moves
   * it; a later one waits for the armed timer, whose early firing just re-arms (no deadline: the
   * armed timer, if any, stays and finds nothing due).
   */
  arm(): void {
    if (this.stopped) return;
    const deadline = this.machine.nextDeadline();
    if (deadline === null || deadline >= this.armedAt) return;
    this.cancel?.();
    this.armedAt = deadline;
    this.cancel = this.scheduleAt(deadline, () => this.fire(deadline));
  }

  /** For good: the machine is gone (closed, its peer dead). */
  stop(): void {
    this.stopped = true;
    this.cancel?.();
    this.cancel = undefined;
  }

  private fire(deadline: number): void {
    // A timer replaced by an earlier one may still fire (hosts that cannot cancel): harmless.
    if (this.armedAt === deadline) {
      this.armedAt = Infinity;
      this.cancel = undefined;
    }
    if (this.stopped) return;
    const now = this.now();
    const due = this.machine.nextDeadline();
    if (due !== null && due <= now) this.machine.handleTimeout(now);
    this.afterFire(now);
  }
}
