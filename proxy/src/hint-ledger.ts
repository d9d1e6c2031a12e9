/**
 * What staging hints may cost the origin, per client network (issue 31, attack 4: 51 KiB of hints
 * pulled 1.9 GiB from an origin, 37,000x). A hint costs its sender a ~100-byte message and the
 * proxy a whole origin fetch, so the proxy keeps, per network, the origin bytes that network's
 * fetches caused (hints and transfers alike) against the bytes its transfers actually completed,
 * both as sums decaying over `windowMs`. A hint is staged only while
 *
 *     originBytes <= floorBytes + ratio * completedBytes
 *
 * so a network that downloads what it hints keeps staging (its transfers' own fetches count on
 * both sides), and one that only hints gets `floorBytes` per window, whatever the URLs (cache
 * busting) or the origin's answers (a 1-byte range an origin answers whole costs what it fetched).
 * Transfers are never refused by it: they are the downloads the budget is measured against.
 * Memory: two numbers per network, at most `maxNetworks` networks (the least recent forgotten).
 */

export interface HintLedgerOptions {
  /** Origin bytes a network may cause with hints alone, per window. */
  floorBytes: number;
  /** Origin bytes allowed per byte of completed transfers. */
  ratio: number;
  /** Time constant of the decaying sums, ms. */
  windowMs: number;
  maxNetworks: number;
}

export const DEFAULT_HINT_LEDGER: HintLedgerOptions = {
  floorBytes: 16 << 20,
  ratio: 2,
  windowMs: 60_000,
  maxNetworks: 10_000,
};

interface Sums {
  originBytes: number;
  completedBytes: number;
  at: number;
}

export class HintLedger {
  private readonly networks = new Map<string, Sums>();

  constructor(private readonly options: HintLedgerOptions = DEFAULT_HINT_LEDGER) {}

  /** Origin bytes a fetch this network started caused. */
  chargeOrigin(network: string, bytes: number, now: number): void {
    this.sums(network, now).originBytes += bytes;
  }

  /** Bytes of a transfer this network completed. */
  creditCompleted(network: string, bytes: number, now: number): void {
    this.sums(network, now).completedBytes += bytes;
  }

  /** Whether a hint of this network may make the proxy fetch now. */
  mayStage(network: string, now: number): boolean {
    const s = this.networks.get(network);
    if (s === undefined) return true;
    this.decay(s, now);
    return s.originBytes <= this.options.floorBytes + this.options.ratio * s.completedBytes;
  }

  /** The decayed sums of a network (tests, stats). */
  peek(network: string, now: number): { originBytes: number; completedBytes: number } | undefined {
    const s = this.networks.get(network);
    if (s === undefined) return undefined;
    this.decay(s, now);
    return { originBytes: s.originBytes, completedBytes: s.completedBytes };
  }

  private sums(network: string, now: number): Sums {
    let s = this.networks.get(network);
    if (s === undefined) {
      s = { originBytes: 0, completedBytes: 0, at: now };
      if (this.networks.size >= this.options.maxNetworks) this.networks.delete(this.networks.keys().next().value!);
    } else {
      this.networks.delete(network);
      this.decay(s, now);
    }
    this.networks.set(network, s);
    return s;
  }

  private decay(s: Sums, now: number): void {
    if (now <= s.at) return;
    const keep = Math.exp(-(now - s.at) / this.options.windowMs);
    s.originBytes *= keep;
    s.completedBytes *= keep;
    s.at = now;
  }
}
