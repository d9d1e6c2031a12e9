/**
 * Media requests the page makes before the hook has its settings wait for them instead of going
 * to the network at once. The content script reads the settings from storage asynchronously and
 * only then sends them; a player loaded in the page's <head> may ask for its manifest and first
 * segment before that round trip is over, most of all on a busy machine (issue 35).
 *
 * Bounded, because the page decides how many requests it makes and when: at most
 * MAX_WAITING_REQUESTS wait at once (more go to the network at once, as before), and the wait is
 * one window of SETTINGS_WAIT_MS from the first request that waits. When the window ends without
 * settings (a content script that never answers), everything waiting goes on and nothing waits
 * again: a page without settings loses at most that one second, once.
 */

/** The timers the hook runs on (the page's own by default; tests advance theirs by hand). */
export interface Timers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** How long the first waiting request (and so every one after it) waits for the settings at most. */
export const SETTINGS_WAIT_MS = 1000;
/** How many requests may wait at once; a player has a manifest and a segment or two in flight. */
export const MAX_WAITING_REQUESTS = 32;

export interface Waiting {
  /** Resolves when the settings came or the window ended; never after cancel(). */
  readonly promise: Promise<void>;
  /** The request stops waiting (the page gave up on it); true when it was still waiting. */
  cancel(): boolean;
}

export class SettingsWait {
  /** Each waiting request's release, in the order the requests came. */
  private readonly waiting = new Set<() => void>();
  private timer: unknown;
  /** The settings came, or the window ended without them: nothing waits any more. */
  private over = false;

  constructor(
    private readonly timers: Timers,
    private readonly windowMs = SETTINGS_WAIT_MS,
    private readonly maxWaiting = MAX_WAITING_REQUESTS,
  ) {}

  /** A request starts waiting, or undefined when it may not (no room, or waiting is over). */
  enter(): Waiting | undefined {
    if (this.over || this.waiting.size >= this.maxWaiting) return undefined;
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.waiting.add(release);
    if (this.timer === undefined) this.timer = this.timers.setTimeout(() => this.end(), this.windowMs);
    return { promise, cancel: () => this.waiting.delete(release) };
  }

  /** The settings came (or the window ended): every waiting request goes on, in order. */
  end(): void {
    this.over = true;
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    const released = [...this.waiting];
    this.waiting.clear();
    for (const release of released) release();
  }
}
