/**
 * Uncoded mode: which check units wait for their symbol digests, and whom to ask when (see
 * check-units.ts). A failed unit asks every usable source at once (the first answer that proves
 * itself wins, so a silent or lying source costs nothing but its own answer) and again after
 * `retryMs` while none came, at most MAX_ROUNDS times: after that the unit waits for the stall
 * timeout, as a download nobody can finish does.
 */
const MAX_ROUNDS = 3;

interface Ask {
  round: number;
  /** When this round went out (sources asked in it are in `asked`). */
  roundAt: number;
  asked: Set<number>;
}

export class SymbolAsks {
  private readonly open = new Map<number, Ask>();

  constructor(private readonly retryMs: number) {}

  /** Check unit `check` failed: its symbol digests are wanted (again, if it was answered before). */
  want(check: number, now: number): void {
    if (!this.open.has(check)) this.open.set(check, { round: 1, roundAt: now, asked: new Set() });
  }

  /** Its symbol digests are known, or it verified: nobody needs to be asked any more. */
  settle(check: number): void {
    this.open.delete(check);
  }

  /** A check unit source `source` should be asked about now, marked as asked; -1 if none. */
  takeFor(source: number, now: number): number {
    for (const [check, ask] of this.open) {
      if (ask.round < MAX_ROUNDS && now - ask.roundAt >= this.retryMs) {
        ask.round++;
        ask.roundAt = now;
        ask.asked.clear();
      }
      if (!ask.asked.has(source)) {
        ask.asked.add(source);
        return check;
      }
    }
    return -1;
  }

  /** When the next round of asks is due (null if none can be). */
  nextDeadline(): number | null {
    let deadline: number | null = null;
    for (const ask of this.open.values()) {
      if (ask.round >= MAX_ROUNDS) continue;
      const due = ask.roundAt + this.retryMs;
      if (deadline === null || due < deadline) deadline = due;
    }
    return deadline;
  }

  get size(): number {
    return this.open.size;
  }
}
