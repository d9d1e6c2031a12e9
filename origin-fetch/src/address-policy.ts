/**
 * SSRF guard: which URLs the proxy may fetch and which addresses it may connect to. A client
 * names any URL it likes in a REQUEST, so the proxy must never become a way into its own network:
 * only http(s), no credentials in the URL, only allowed origins, and only public unicast
 * addresses (loopback, private, link-local and the like only with `allowPrivateOrigins`, a test
 * setting). The host is resolved here and the connection goes to the checked address (see
 * origin-fetch.ts), so a DNS answer that changes between check and connect (rebinding) cannot
 * slip through.
 */
import { lookup as dnsLookup } from 'node:dns';
import { isIP } from 'node:net';
import { ServeError } from './serve-error';

export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'cgnat'
  | 'link-local'
  | 'unique-local'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'reserved'
  | 'invalid';

/** Classes `allowPrivateOrigins` opens up; the rest (multicast, unspecified, ...) stay closed. */
const PRIVATE_CLASSES: ReadonlySet<AddressClass> = new Set<AddressClass>([
  'loopback',
  'private',
  'cgnat',
  'link-local',
  'unique-local',
  'documentation',
  'reserved',
]);

export interface OriginPolicy {
  /** Allowed origins (`https://cdn.example.com`) or '*' = any origin on a public address. */
  allowedOrigins: '*' | readonly string[];
  /** Test setting: permit loopback, private, link-local, ... addresses. */
  allowPrivateOrigins: boolean;
  /**
   * Finer test setting: exactly these non-public classes are allowed (replaces
   * allowPrivateOrigins), e.g. only 'loopback' for origins on this machine.
   */
  allowedClasses?: ReadonlySet<AddressClass>;
  /**
   * Origin ports allowed (default: any). The proxy configures 80 and 443 so it cannot be used to
   * reach other services; an origin listed in allowedOrigins is allowed on its own port.
   */
  originPorts?: '*' | readonly number[];
}

export type LookupAll = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** The system resolver (getaddrinfo), every address. */
export const systemLookup: LookupAll = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses) => {
      if (error) reject(error);
      else resolve(addresses);
    });
  });

// ---------------------------------------------------------------- addresses

const V4_RANGES: readonly [number, number, AddressClass][] = [
  // [network, prefix length, class], most specific first where they overlap
  [ipv4(0, 0, 0, 0), 8, 'unspecified'],
  [ipv4(10, 0, 0, 0), 8, 'private'],
  [ipv4(100, 64, 0, 0), 10, 'cgnat'],
  [ipv4(127, 0, 0, 0), 8, 'loopback'],
  [ipv4(169, 254, 0, 0), 16, 'link-local'],
  [ipv4(172, 16, 0, 0), 12, 'private'],
  [ipv4(192, 0, 0, 0), 24, 'reserved'],
  [ipv4(192, 0, 2, 0), 24, 'documentation'],
  [ipv4(192, 88, 99, 0), 24, 'reserved'],
  [ipv4(192, 168, 0, 0), 16, 'private'],
  [ipv4(198, 18, 0, 0), 15, 'reserved'],
  [ipv4(198, 51, 100, 0), 24, 'documentation'],
  [ipv4(203, 0, 113, 0), 24, 'documentation'],
  [ipv4(224, 0, 0, 0), 4, 'multicast'],
  [ipv4(255, 255, 255, 255), 32, 'broadcast'],
  [ipv4(240, 0, 0, 0), 4, 'reserved'],
];

function ipv4(a: number, b: number, c: number, d: number): number {
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
}

function classifyV4(value: number): AddressClass {
  for (const [network, prefix, cls] of V4_RANGES) {
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if ((value & mask) >>> 0 === network) return cls;
  }
  return 'public';
}

function parseV4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    value = value * 256 + n;
  }
  return value;
}

/** 16 bytes of an IPv6 address (text already validated by net.isIP), or null. */
function parseV6(text: string): Uint8Array | null {
  const bytes = new Uint8Array(16);
  let head = text;
  let v4Tail: number | null = null;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    v4Tail = parseV4(text.slice(lastColon + 1));
    if (v4Tail === null) return null;
    head = text.slice(0, lastColon + 1) + '0:0'; // placeholder groups, overwritten below
  }
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = groups(halves[0]);
  const right = halves.length === 2 ? groups(halves[1]) : [];
  if (halves.length === 1 && left.length !== 8) return null;
  if (left.length + right.length > 8 || [...left, ...right].some((g) => !(g >= 0 && g <= 0xffff))) return null;
  const all = [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  all.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  if (v4Tail !== null) {
    bytes[12] = v4Tail >>> 24;
    bytes[13] = (v4Tail >>> 16) & 0xff;
    bytes[14] = (v4Tail >>> 8) & 0xff;
    bytes[15] = v4Tail & 0xff;
  }
  return bytes;
}

function v4At(bytes: Uint8Array, offset: number): number {
  return ((bytes[offset] << 24) | (bytes[offset + 1] << 16) | (bytes[offset + 2] << 8) | bytes[offset + 3]) >>> 0;
}

function classifyV6(b: Uint8Array): AddressClass {
  const zeroUpTo = (n: number) => b.subarray(0, n).every((x) => x === 0);
  if (zeroUpTo(16)) return 'unspecified';
  if (zeroUpTo(15) && b[15] === 1) return 'loopback';
  // ::ffff:a.b.c.d, IPv4-mapped: what the IPv4 address is.
  if (zeroUpTo(10) && b[10] === 0xff && b[11] === 0xff) return classifyV4(v4At(b, 12));
  // ::a.b.c.d (deprecated IPv4-compatible) and the rest of ::/96.
  if (zeroUpTo(12)) return 'reserved';
  // 64:ff9b::/96, NAT64: the gateway connects to the embedded IPv4 address.
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b.subarray(4, 12).every((x) => x === 0))
    return classifyV4(v4At(b, 12));
  // 2002::/16, 6to4: the embedded IPv4 address.
  if (b[0] === 0x20 && b[1] === 0x02) return classifyV4(v4At(b, 2));
  if (b[0] === 0xff) return 'multicast';
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) return 'link-local'; // fe80::/10
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0xc0) return 'private'; // fec0::/10, old site-local
  if ((b[0] & 0xfe) === 0xfc) return 'unique-local'; // fc00::/7
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0x0d && b[3] === 0xb8) return 'documentation'; // 2001:db8::/32
  if (b[0] === 0x3f && b[1] === 0xff && (b[2] & 0xf0) === 0x00) return 'documentation'; // 3fff::/20
  // 2001::/23, IETF protocol assignments (Teredo, benchmarking, ORCHID, AMT, ...): never a media origin.
  if (b[0] === 0x20 && b[1] === 0x01 && (b[2] & 0xfe) === 0x00) return 'reserved';
  if ((b[0] & 0xe0) !== 0x20) return 'reserved'; // outside 2000::/3, global unicast
  return 'public';
}

/** What kind of address `address` (IPv4, IPv6, optionally in brackets or with a zone) is. */
export function classifyAddress(address: string): AddressClass {
  let text = address.trim();
  if (text.startsWith('[') && text.endsWith(']')) text = text.slice(1, -1);
  const zone = text.indexOf('%');
  if (zone >= 0) {
    // Only link-local (and multicast) IPv6 addresses carry a zone; classify without it.
    text = text.slice(0, zone);
  }
  const family = isIP(text);
  if (family === 4) {
    const value = parseV4(text);
    return value === null ? 'invalid' : classifyV4(value);
  }
  if (family === 6) {
    const bytes = parseV6(text.toLowerCase());
    return bytes === null ? 'invalid' : classifyV6(bytes);
  }
  return 'invalid';
}

/**
 * Whether the proxy may connect to `address`: public unicast always; with `allowPrivate` true
 * also loopback, private, link-local and the like (never multicast, broadcast, unspecified), or
 * exactly the classes of a set.
 */
export function isAddressAllowed(address: string, allowPrivate: boolean | ReadonlySet<AddressClass>): boolean {
  const cls = classifyAddress(address);
  if (cls === 'public') return true;
  if (typeof allowPrivate !== 'boolean') return allowPrivate.has(cls) && PRIVATE_CLASSES.has(cls);
  return allowPrivate && PRIVATE_CLASSES.has(cls);
}

function allowed(address: string, policy: OriginPolicy): boolean {
  return isAddressAllowed(address, policy.allowedClasses ?? policy.allowPrivateOrigins);
}

// ---------------------------------------------------------------- URLs

/** Normalises configured origins (`https://cdn.example.com[:port]`) to URL.origin form. */
export function normalizeOrigins(list: readonly string[]): string[] {
  return list.map((entry) => {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new Error(`allowed origin ${JSON.stringify(entry)} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new Error(`allowed origin ${JSON.stringify(entry)} must be http or https`);
    if (url.username || url.password || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash)
      throw new Error(`allowed origin ${JSON.stringify(entry)} must be scheme://host[:port] only`);
    return url.origin;
  });
}

/**
 * Checks what can be checked without the network: scheme, credentials, allowed origins and IP
 * literals. Throws ServeError 'refused'; returns the parsed URL.
 */
export function checkUrl(raw: string | URL, policy: OriginPolicy): URL {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    throw new ServeError('refused', 'not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ServeError('refused', `scheme ${url.protocol} is not allowed (http and https only)`);
  if (url.username !== '' || url.password !== '')
    throw new ServeError('refused', 'URLs with credentials are not allowed');
  if (url.hostname === '') throw new ServeError('refused', 'URL has no host');
  if (policy.allowedOrigins !== '*' && !policy.allowedOrigins.includes(url.origin))
    throw new ServeError('refused', `origin ${url.origin} is not allowed on this proxy`);
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
  const ports = policy.originPorts ?? '*';
  if (ports !== '*' && !ports.includes(port) && policy.allowedOrigins === '*')
    throw new ServeError('refused', `origin port ${port} is not allowed on this proxy`);
  const host = hostOf(url);
  if (isIP(host) !== 0 && !allowed(host, policy))
    throw new ServeError('refused', `address ${host} (${classifyAddress(host)}) is not allowed`);
  return url;
}

/** The URL's host without IPv6 brackets. */
export function hostOf(url: URL): string {
  const h = url.hostname;
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/**
 * Resolves the URL's host and checks every address it has; returns the address to connect to.
 * Refuses when any address is not allowed (a name that also points inside is not trusted).
 * Unknown hosts are 'not-found' (as a 404 would be), other resolver failures 'origin-error'.
 */
export async function resolveChecked(
  url: URL,
  policy: OriginPolicy,
  lookup: LookupAll = systemLookup,
): Promise<{ address: string; family: 4 | 6 }> {
  const host = hostOf(url);
  const literal = isIP(host);
  if (literal !== 0) {
    if (!allowed(host, policy))
      throw new ServeError('refused', `address ${host} (${classifyAddress(host)}) is not allowed`);
    return { address: host, family: literal as 4 | 6 };
  }
  let addresses: { address: string; family: number }[];
  try {
    addresses = await lookup(host);
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw new ServeError('not-found', `unknown host ${host}`);
    throw new ServeError('origin-error', `cannot resolve ${host}: ${String(code ?? e)}`);
  }
  if (addresses.length === 0) throw new ServeError('not-found', `unknown host ${host}`);
  for (const a of addresses) {
    if (!allowed(a.address, policy))
      throw new ServeError('refused', `${host} resolves to ${a.address} (${classifyAddress(a.address)}), not allowed`);
  }
  const first = addresses[0];
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}
