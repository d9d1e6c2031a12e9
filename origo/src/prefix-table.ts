/**
 * The client prefixes proxies declared (selection.ts rule 6, `clientRegion`), by (family,
 * length, network): the region of a client address is found with one lookup per declared prefix
 * length, longest first, instead of matching every prefix of every proxy. Same answer as
 * `clientRegion`: the region of the longest declared prefix holding the address, none when two
 * regions declared that same prefix, none for an address in no prefix.
 */
import { parseAddress, prefixesOf } from './selection';

export class PrefixTable {
  /** Regions (with how many declarations each) by `${family}/${length}/${network bytes}`. */
  private readonly networks = new Map<string, Map<string, number>>();
  /** Declarations per family and length. */
  private readonly lengths = new Map<string, Map<number, number>>();
  /** Per family, its declared lengths, longest first (made again after a change). */
  private readonly longestFirst = new Map<string, number[]>();

  add(region: string, prefixes: readonly string[]): void {
    this.change(region, prefixes, 1);
  }

  delete(region: string, prefixes: readonly string[]): void {
    this.change(region, prefixes, -1);
  }

  regionOf(address: string): string | undefined {
    const client = parseAddress(address);
    if (client === undefined) return undefined;
    const family = client.kind();
    const bytes = client.toByteArray();
    let lengths = this.longestFirst.get(family);
    if (lengths === undefined) {
      lengths = [...(this.lengths.get(family)?.keys() ?? [])].sort((a, b) => b - a);
      this.longestFirst.set(family, lengths);
    }
    for (const bits of lengths) {
      const regions = this.networks.get(networkKey(family, bits, bytes));
      if (regions === undefined) continue;
      return regions.size === 1 ? regions.keys().next().value : undefined;
    }
    return undefined;
  }

  private change(region: string, prefixes: readonly string[], by: 1 | -1): void {
    for (const [range, bits] of prefixesOf(prefixes)) {
      const family = range.kind();
      const key = networkKey(family, bits, range.toByteArray());
      const regions = this.networks.get(key) ?? new Map<string, number>();
      bump(regions, region, by);
      if (regions.size === 0) this.networks.delete(key);
      else this.networks.set(key, regions);
      const lengths = this.lengths.get(family) ?? new Map<number, number>();
      bump(lengths, bits, by);
      this.lengths.set(family, lengths);
      this.longestFirst.delete(family);
    }
  }
}

function bump<K>(counts: Map<K, number>, key: K, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}

/** The first `bits` bits of an address, as a map key. */
function networkKey(family: string, bits: number, bytes: readonly number[]): string {
  const masked: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - 8 * i));
    masked.push(bytes[i] & ((0xff << (8 - keep)) & 0xff));
  }
  return `${family}/${bits}/${masked.join('.')}`;
}
