/**
 * Loopback source addresses for the simulated peers. All of 127.0.0.0/8 reaches the loopback
 * interface on Linux without configuration, so each simulated host can have its own address and
 * origo's per-address budgets (sockets, greetings) apply as they would to real hosts.
 */

/** Hosts per block: the last octet runs 1..254, the third 1..254 (no .0 or .255 anywhere). */
const PER_OCTET = 254;
export const MAX_ADDRESSES = PER_OCTET * PER_OCTET;

/** The `index`-th address of the block 127.`block`.0.0/16. */
export function loopbackAddress(block: number, index: number): string {
  if (!Number.isInteger(index) || index < 0 || index >= MAX_ADDRESSES) {
    throw new RangeError(`loopback address index ${index} outside [0, ${MAX_ADDRESSES})`);
  }
  return `127.${block}.${1 + Math.floor(index / PER_OCTET)}.${1 + (index % PER_OCTET)}`;
}

/** Proxies: one address each (each is its own host). */
export const proxyAddress = (i: number): string => loopbackAddress(2, i);

/**
 * Clients: `perAddress` of them share an address (several devices behind one NAT). Consecutive
 * clients get different addresses (round robin), so the handshakes in flight at once spread over
 * addresses and stay within origo's per-address budget of sockets still greeting.
 */
export function clientAddresses(clients: number, perAddress: number): { count: number; of: (i: number) => string } {
  const count = Math.max(1, Math.ceil(clients / perAddress));
  return { count, of: (i: number) => loopbackAddress(1, i % count) };
}
