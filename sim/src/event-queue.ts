/** Discrete-event queue: a binary heap ordered by (time, insertion order), so runs are reproducible. */
interface Event {
  at: number;
  order: number;
  run: () => void;
}

export class EventQueue {
  private readonly heap: Event[] = [];
  private order = 0;
  now = 0;

  schedule(at: number, run: () => void): void {
    const e = { at: Math.max(at, this.now), order: this.order++, run };
    const h = this.heap;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }

  /** Runs events in order until the queue is empty, `until` is reached, or `stop()` says so. */
  run(until: number, stop: () => boolean): void {
    const h = this.heap;
    while (h.length > 0 && !stop()) {
      const e = this.pop();
      if (e.at > until) {
        this.now = until;
        return;
      }
      this.now = e.at;
      e.run();
    }
  }

  get size(): number {
    return this.heap.length;
  }

  private pop(): Event {
    const h = this.heap;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && before(h[l], h[m])) m = l;
        if (r < h.length && before(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return top;
  }
}

function before(a: Event, b: Event): boolean {
  return a.at < b.at || (a.at === b.at && a.order < b.order);
}
