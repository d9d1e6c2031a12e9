/**
 * The hook's seams for unit tests: timers advanced by hand and a downloader transport that
 * records requests and lets the test answer them.
 */
import { DownloaderTransport, Timers } from '../../src/hook/core';
import { GetFailure, GetRequest, GetSuccess } from '../../src/common/messages';

/** Timers the test advances by hand. */
export class ManualTimers implements Timers {
  now = 0;
  private next = 1;
  private readonly pending = new Map<number, { at: number; callback: () => void }>();
  setTimeout(callback: () => void, ms: number): unknown {
    const id = this.next++;
    this.pending.set(id, { at: this.now + ms, callback });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const due = [...this.pending.entries()].filter(([, t]) => t.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.now = due[1].at;
      due[1].callback();
    }
    this.now = until;
  }
}

export class FakeTransport implements DownloaderTransport {
  requests: { req: GetRequest; answer: (a: GetSuccess | GetFailure) => void }[] = [];
  cancelled: number[] = [];
  request(req: GetRequest, answer: (a: GetSuccess | GetFailure) => void): void {
    this.requests.push({ req, answer });
  }
  cancel(id: number): void {
    this.cancelled.push(id);
  }
}
