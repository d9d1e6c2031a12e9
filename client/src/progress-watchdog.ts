/**
 * `--timeout` for one download: gives up when no byte of it arrived for `timeoutMs`. Time the
 * download spends on purpose without the network does not count: waiting before a retry
 * (`rearm`), and waiting for the output's reader (`holdWhile`: `-o -` into a pipe read slower than
 * the proxies send, `| pv -L 50k`), which would otherwise time out a healthy download whose range
 * takes longer to drain than `--timeout`.
 */
export class ProgressWatchdog {
  private progressAt: number;
  private lastDone = -1;
  private holds = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly timeoutMs: number,
    /** Called once, with why, when the download made no progress for `timeoutMs`. */
    private readonly onIdle: (reason: Error) => void,
    private readonly clock: () => number = Date.now,
  ) {
    this.progressAt = clock();
    this.timer = setTimeout(this.check, timeoutMs);
  }

  /** Bytes done so far (per datagram: only a change counts, and it costs two comparisons). */
  progress(done: number): void {
    if (done === this.lastDone) return;
    this.lastDone = done;
    this.progressAt = this.clock();
  }

  /** The idle time starts again from now (a retry's wait is over, or begins). */
  rearm(): void {
    this.progressAt = this.clock();
  }

  /** The clock stops while `wait` runs (waits may overlap) and starts afresh when it settles. */
  async holdWhile<T>(wait: Promise<T>): Promise<T> {
    this.holds++;
    try {
      return await wait;
    } finally {
      this.holds--;
      this.rearm();
    }
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private readonly check = () => {
    if (this.timer === undefined) return;
    const idleMs = this.clock() - this.progressAt;
    if (this.holds === 0 && idleMs >= this.timeoutMs) {
      this.timer = undefined;
      this.onIdle(new Error(`no progress for ${this.timeoutMs} ms`));
      return;
    }
    this.timer = setTimeout(this.check, this.holds > 0 ? this.timeoutMs : this.timeoutMs - idleMs);
  };
}
