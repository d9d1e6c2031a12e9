/** Downloads run at most `limit()` at a time, in the order asked for; one aborted while it waits never starts. */
import { ClientError } from '@mutp/shared/client';

export class DownloadQueue {
  private readonly waiting: (() => void)[] = [];
  private running = 0;

  /** `limit` is read each time a place may be free (the settings can change it). */
  constructor(private readonly limit: () => number) {}

  /** Runs `task` when fewer than `limit()` downloads run; drops it if aborted while waiting. */
  enqueue<T>(signal: AbortSignal, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const run = () => {
        if (signal.aborted) {
          reject(new ClientError('cancelled', 'cancelled while queued'));
          this.pump();
          return;
        }
        this.running++;
        task()
          .then(resolve, reject)
          .finally(() => {
            this.running--;
            this.pump();
          });
      };
      this.waiting.push(run);
      this.pump();
    });
  }

  private pump(): void {
    const limit = Math.max(1, this.limit());
    while (this.running < limit && this.waiting.length > 0) this.waiting.shift()!();
  }
}
