/**
 * The network a client address belongs to, as budgets and votes count it: an IPv4 /24 or an
 * IPv6 /48. One host, or one attacker with a block of addresses from one provider, gets one
 * share, however many sockets, client ids or addresses inside the block it uses (issue 31).
 */
import ipaddr from 'ipaddr.js';

export const IPV4_PREFIX_BITS = 24;
export const IPV6_PREFIX_BITS = 48;

/**
 * `a.b.c.0/24` or `x:y:z::/48` for an IP address (IPv4-mapped IPv6 counts as IPv4); anything
 * else (a Unix socket, an unparsable string) stands for itself.
 */
export function addressPrefix(address: string): string {
  const bare = address.split('%')[0];
  if (!ipaddr.isValid(bare)) return address;
  let parsed = ipaddr.parse(bare);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  if (parsed.kind() === 'ipv4') {
    const [a, b, c] = parsed.toByteArray();
    return `${a}.${b}.${c}.0/${IPV4_PREFIX_BITS}`;
  }
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, IPV6_PREFIX_BITS / 16);
  return `${parts.map((p) => p.toString(16)).join(':')}::/${IPV6_PREFIX_BITS}`;
}

/**
 * The key a client's shares count against at a proxy: the network origo named for it, or, when
 * origo named none (an older origo), the client alone.
 */
export function shareKey(clientId: string, network: string | undefined): string {
  return network ?? `client:${clientId}`;
}
