/**
 * When a segment series may ask origo again for something it did not get (a replacement origo had
 * none for, a set after a network change origo did not answer): a pause doubling from
 * REPLACEMENT_BACKOFF_MS to MAX_REPLACEMENT_BACKOFF_MS on each miss, ended by an answer. Without
 * it a proxy nobody can replace, or a hung origo, would cost one origo request, and a held
 * segment boundary, per segment.
 */
export const REPLACEMENT_BACKOFF_MS = 5000;
export const MAX_REPLACEMENT_BACKOFF_MS = 60_000;

export class AskBackoff {
  private after = -Infinity;
  private pauseMs = 0;

  /** Whether origo may be asked at `now`. */
  mayAsk(now: number): boolean {
    return now >= this.after;
  }

  /** Origo had nothing, or did not answer, at `now`: the next pause, twice the last. */
  missed(now: number): void {
    this.pauseMs = Math.min(MAX_REPLACEMENT_BACKOFF_MS, Math.max(REPLACEMENT_BACKOFF_MS, 2 * this.pauseMs));
    this.after = now + this.pauseMs;
  }

  /** Origo answered: no pause. */
  answered(): void {
    this.pauseMs = 0;
    this.after = -Infinity;
  }
}
