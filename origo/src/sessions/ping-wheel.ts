/**
 * Liveness pings spread over the interval: the sessions are dealt round robin into `slots`
 * buckets and one bucket is visited per tick (interval / slots), so each socket is still pinged
 * once per interval but 50,000 sockets are never pinged in one turn of the event loop (about
 * 10 µs each: half a second during which no signalling is relayed). One timer per instance,
 * none per socket.
 */
export const PING_SLOTS = 32;

export class PingWheel<S> {
  private readonly slots: Set<S>[];
  private readonly slotOf = new Map<S, number>();
  private next = 0;
  private dealt = 0;
  private readonly timer: NodeJS.Timeout;

  /** `visit` is called once per interval for each member, a slot's worth per tick. */
  constructor(
    intervalMs: number,
    private readonly visit: (member: S) => void,
    slots = PING_SLOTS,
  ) {
    this.slots = Array.from({ length: slots }, () => new Set<S>());
    this.timer = setInterval(() => this.tick(), Math.max(1, intervalMs / slots));
    this.timer.unref();
  }

  add(member: S): void {
    if (this.slotOf.has(member)) return;
    const slot = this.dealt++ % this.slots.length;
    this.slots[slot].add(member);
    this.slotOf.set(member, slot);
  }

  delete(member: S): void {
    const slot = this.slotOf.get(member);
    if (slot === undefined) return;
    this.slots[slot].delete(member);
    this.slotOf.delete(member);
  }

  get size(): number {
    return this.slotOf.size;
  }

  /** Visits the next slot (the timer calls it; exposed for tests). */
  tick(): void {
    const slot = this.slots[this.next];
    this.next = (this.next + 1) % this.slots.length;
    for (const member of slot) this.visit(member);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
