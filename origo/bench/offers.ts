/** The offers of a run: started at a bounded rate, expired when unanswered. */
import { monotonicMs } from './exchange-id';
import { RunBook, SimClient } from './peers';
import { LoadSettings } from './settings';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Starts offers at `offerRate` per second on idle active clients (an offer due while all of them
 * are busy is counted as skipped) and expires requests and offers unanswered after the timeout.
 * The returned function stops new offers and waits (at most `drainMs`) for those in flight.
 */
export function drive(book: RunBook, active: SimClient[], s: LoadSettings): (drainMs: number) => Promise<void> {
  let cursor = 0;
  let due = 0;
  let last = performance.now();
  const scheduler = setInterval(() => {
    const now = performance.now();
    due += ((now - last) / 1000) * s.offerRate;
    last = now;
    for (; due >= 1; due--) {
      let started = false;
      for (let tried = 0; tried < active.length && !started; tried++) {
        const client = active[cursor];
        cursor = (cursor + 1) % active.length;
        if (!client.busy && client.open) {
          client.begin();
          started = true;
        }
      }
      if (!started && book.measuring) book.offers.skipped++;
    }
  }, 10);
  const sweep = () => {
    const cutoff = monotonicMs() - s.answerTimeoutMs;
    for (const [connectionId, exchange] of book.exchanges) {
      if (exchange.sentAt >= cutoff) break; // in the order sent
      book.exchanges.delete(connectionId);
      book.failures.missingAnswers++;
      exchange.client.abandonOffer();
    }
    for (const client of active) if (client.expire(cutoff) === 'request') book.failures.missingProxyLists++;
  };
  const sweeper = setInterval(sweep, 250);
  return async (drainMs) => {
    clearInterval(scheduler);
    const deadline = performance.now() + drainMs;
    while (active.some((c) => c.busy) && performance.now() < deadline) await sleep(50);
    clearInterval(sweeper);
    // Whatever is still in flight now missed the answer timeout.
    for (const exchange of book.exchanges.values()) exchange.client.abandonOffer();
    book.failures.missingAnswers += book.exchanges.size;
    book.exchanges.clear();
    for (const client of active) if (client.expire(Infinity) === 'request') book.failures.missingProxyLists++;
  };
}
