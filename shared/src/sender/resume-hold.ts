/**
 * A resuming client's transfer (its REQUEST has a resume part) sends no DATA before the client's
 * first FEEDBACK, or a deadline: its window holds units the client has partly or wholly decoded,
 * which only FEEDBACK describes, and a window sent blind was a window wasted (testbed, rlnc after
 * a network change: up to 640 redundant packets of 7490).
 */
export class ResumeHold {
  /** DATA waits until then; -Infinity when nothing holds it. */
  private until = -Infinity;

  start(until: number): void {
    this.until = until;
  }

  holds(now: number): boolean {
    return now < this.until;
  }

  /** The client's first feedback describes the window: DATA may go. */
  release(): void {
    this.until = -Infinity;
  }

  onTimeout(now: number): void {
    if (now >= this.until) this.until = -Infinity;
  }

  /** When the hold ends by itself; Infinity if nothing holds. */
  get deadline(): number {
    return this.until > -Infinity ? this.until : Infinity;
  }
}
