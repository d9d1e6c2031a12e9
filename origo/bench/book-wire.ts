/**
 * A generator worker's RunBook as plain JSON (sent over the IPC channel) and merged into the
 * parent's book, which the row is summarised from.
 */
import { RunBook } from './peers';

export interface BookJson {
  oneWay: { same: readonly number[]; cross: readonly number[] };
  roundTrip: { same: readonly number[]; cross: readonly number[] };
  requestProxies: readonly number[];
  offers: { measured: number; cross: number; skipped: number };
  heartbeatsMeasured: number;
  tallies: Record<'proxyHandshake' | 'clientHandshake' | 'errors' | 'unexpectedCloses', Record<string, number>>;
  counts: Record<CountKey, number>;
}

const TALLIES = ['proxyHandshake', 'clientHandshake', 'errors', 'unexpectedCloses'] as const;
const COUNTS = [
  'missingAnswers',
  'lateAnswers',
  'missingProxyLists',
  'lateProxyLists',
  'emptyProxyLists',
  'offersToUnknownProxies',
  'unexpectedMessages',
] as const;
type CountKey = (typeof COUNTS)[number];

export function bookToJson(book: RunBook): BookJson {
  const f = book.failures;
  return {
    oneWay: { same: book.oneWay.same.all(), cross: book.oneWay.cross.all() },
    roundTrip: { same: book.roundTrip.same.all(), cross: book.roundTrip.cross.all() },
    requestProxies: book.requestProxies.all(),
    offers: { ...book.offers },
    heartbeatsMeasured: book.heartbeatsMeasured,
    tallies: Object.fromEntries(TALLIES.map((k) => [k, f[k].toJSON()])) as BookJson['tallies'],
    counts: Object.fromEntries(COUNTS.map((k) => [k, f[k]])) as BookJson['counts'],
  };
}

/** Adds a worker's book to `into` (samples appended, counters summed). */
export function mergeBook(into: RunBook, part: BookJson): void {
  into.oneWay.same.pushAll(part.oneWay.same);
  into.oneWay.cross.pushAll(part.oneWay.cross);
  into.roundTrip.same.pushAll(part.roundTrip.same);
  into.roundTrip.cross.pushAll(part.roundTrip.cross);
  into.requestProxies.pushAll(part.requestProxies);
  into.offers.measured += part.offers.measured;
  into.offers.cross += part.offers.cross;
  into.offers.skipped += part.offers.skipped;
  into.heartbeatsMeasured += part.heartbeatsMeasured;
  for (const k of TALLIES) for (const [key, n] of Object.entries(part.tallies[k])) into.failures[k].add(key, n);
  for (const k of COUNTS) into.failures[k] += part.counts[k];
}
