/**
 * A source's answers to SYMBOL_DIGESTS_REQUEST (uncoded mode): the symbol digests of one check
 * unit, which the client proves against that unit's agreed digest and then judges each packet by.
 *
 * An ask is a 10-byte datagram on an authenticated connection and an answer is about 400 bytes
 * (g = 24), so the cost that matters is the hashing and the queue: each check unit is answered at
 * most MAX_ANSWERS_PER_CHECK times (a lost answer is asked again), and at most MAX_QUEUED
 * datagrams wait; a client asking for more gets nothing more.
 */
import { CheckLayout, Sha256, symbolDigests } from '../integrity';
import { Layout } from '../layout';
import { UNIT_DIGEST_BYTES } from '../limits';
import { encodeSymbolDigests, MAX_DIGESTS_PER_MESSAGE } from '../wire';

const MAX_ANSWERS_PER_CHECK = 3;
const MAX_QUEUED = 64;

export class SymbolDigestAnswers {
  private readonly checks: CheckLayout;
  private readonly answered: Uint8Array;
  private readonly queue: Uint8Array[] = [];
  /** Asks not answered: out of range, over a unit's budget, queue full, or not uncoded mode. */
  refused = 0;

  constructor(
    layout: Layout,
    private readonly object: Uint8Array,
    private readonly transferId: number,
    private readonly sha256: Sha256 | undefined,
  ) {
    this.checks = new CheckLayout(layout);
    this.answered = new Uint8Array(layout.mode === 'uncoded' ? this.checks.checkCount : 0);
  }

  ask(check: number): void {
    const per = Math.ceil(this.checks.layout.generationSize / MAX_DIGESTS_PER_MESSAGE);
    if (
      check >= this.answered.length ||
      this.answered[check] >= MAX_ANSWERS_PER_CHECK ||
      this.queue.length + per > MAX_QUEUED
    ) {
      this.refused++;
      return;
    }
    this.answered[check]++;
    const start = this.checks.byteOffset(check);
    const bytes = this.object.subarray(start, start + this.checks.byteLength(check));
    const digests = symbolDigests(bytes, this.checks.layout.symbolSize, this.sha256);
    const step = MAX_DIGESTS_PER_MESSAGE * UNIT_DIGEST_BYTES;
    for (let at = 0; at < digests.length; at += step) {
      this.queue.push(
        encodeSymbolDigests({
          transferId: this.transferId,
          check,
          first: at / UNIT_DIGEST_BYTES,
          digests: digests.subarray(at, at + step),
        }),
      );
    }
  }

  /** The next answer datagram to send, if any. */
  next(): Uint8Array | undefined {
    return this.queue.shift();
  }
}
