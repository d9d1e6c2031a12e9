/**
 * The proxy's SSRF guard (`proxy/src/address-policy.ts`): IPv4 and IPv6 addresses, biased to
 * private, loopback, link-local and mapped ranges, written in every textual form a URL parser or
 * resolver accepts (decimal, octal, hex, short forms, trailing dot, IPv4-mapped, NAT64, 6to4,
 * percent-encoded, full-width digits, brackets and zones), plus raw text. The independent judge is
 * ipaddr.js: an address it puts in a non-public range must be refused in every form.
 */
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';
import { checkUrl, classifyAddress, hostOf, OriginPolicy, ServeError } from '@mutp/origin-fetch';
import { FuzzTarget, invariant, jsonBytes } from '../target';

const STRICT: OriginPolicy = { allowedOrigins: '*', allowPrivateOrigins: false };

/** ipaddr.js range names of addresses the proxy must never connect to. */
const REFUSED_V4 = new Set([
  'unspecified',
  'broadcast',
  'multicast',
  'linkLocal',
  'loopback',
  'carrierGradeNat',
  'private',
]);
const REFUSED_V6 = new Set([
  'unspecified',
  'linkLocal',
  'multicast',
  'loopback',
  'uniqueLocal',
  'deprecatedSiteLocal',
  'discard',
  // 2001::/23 (IETF protocol assignments) and 3fff::/20 (documentation): never a media origin.
  'teredo',
  'benchmarking',
  'amt',
  'as112v6',
  'deprecatedOrchid',
  'orchid2',
  'droneRemoteIdProtocolEntityTags',
  'segmentRouting',
  'reserved',
]);

const v4FromBytes = (b: number[], at: number) => new ipaddr.IPv4(b.slice(at, at + 4));

/** Whether ipaddr.js puts `address` (a valid literal) in a range the proxy must refuse. */
export function mustRefuse(address: string): boolean {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return REFUSED_V4.has(parsed.range());
  const v6 = parsed as ipaddr.IPv6;
  const range = v6.range();
  if (REFUSED_V6.has(range)) return true;
  const b = v6.toByteArray();
  // Addresses that lead to an embedded IPv4 address: judged by that address.
  if (range === 'ipv4Mapped' || range === 'rfc6052' || range === 'rfc6145')
    return mustRefuse(v4FromBytes(b, 12).toString());
  if (range === '6to4') return mustRefuse(v4FromBytes(b, 2).toString());
  return false;
}

const prefix = (cidr: string) => ipaddr.parseCIDR(cidr);
const V4_RANGES = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '255.255.255.255/32',
  '8.8.8.0/24',
  '93.184.216.0/24',
].map(prefix);
const V6_RANGES = [
  '::1/128',
  '::/128',
  'fe80::/10',
  'fc00::/7',
  'ff00::/8',
  '2001:db8::/32',
  '2606:4700::/32',
  '2001::/23',
  '2001:200::/23',
  '3fff::/20',
  '100::/64',
].map(prefix);

/** An address inside `network/bits`, the host part from `noise`. */
function inside(range: [ipaddr.IPv4 | ipaddr.IPv6, number], noise: number[]): number[] {
  const [network, bits] = range;
  const bytes = network.toByteArray();
  return bytes.map((byte, i) => {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    const mask = (0xff << (8 - keep)) & 0xff;
    return (byte & mask) | (noise[i % noise.length] & ~mask & 0xff);
  });
}

const v4Bytes = fc.oneof(
  fc
    .tuple(fc.nat(V4_RANGES.length - 1), fc.array(fc.nat(255), { minLength: 4, maxLength: 4 }))
    .map(([r, n]) => inside(V4_RANGES[r], n)),
  fc.array(fc.nat(255), { minLength: 4, maxLength: 4 }),
);
const v6Bytes = fc.oneof(
  fc
    .tuple(fc.nat(V6_RANGES.length - 1), fc.array(fc.nat(255), { minLength: 16, maxLength: 16 }))
    .map(([r, n]) => inside(V6_RANGES[r], n)),
  fc
    .tuple(
      fc.constantFrom(
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff],
        [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0],
      ),
      v4Bytes,
    )
    .map(([head, v4]) => [...head, ...v4]),
  fc
    .tuple(v4Bytes, fc.array(fc.nat(255), { minLength: 10, maxLength: 10 }))
    .map(([v4, rest]) => [0x20, 0x02, ...v4, ...rest]),
  fc.array(fc.nat(255), { minLength: 16, maxLength: 16 }),
);

const V4_FORMS = [
  'dotted',
  'octal',
  'hex',
  'HEX',
  'integer',
  'hex-integer',
  'octal-integer',
  'three-part',
  'two-part',
  'trailing-dot',
  'leading-zeros',
  'percent',
  'full-width',
  'mapped',
  'mapped-hex',
  'nat64',
  '6to4',
] as const;
const V6_FORMS = ['canonical', 'expanded', 'upper', 'zero-padded', 'dotted-tail', 'zone'] as const;

function v4Text(b: number[], form: (typeof V4_FORMS)[number]): string {
  const n = ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
  const hex4 = (x: number) => x.toString(16);
  switch (form) {
    case 'dotted':
      return b.join('.');
    case 'octal':
      return b.map((x) => `0${x.toString(8)}`).join('.');
    case 'hex':
      return b.map((x) => `0x${hex4(x)}`).join('.');
    case 'HEX':
      return b.map((x) => `0X${hex4(x).toUpperCase()}`).join('.');
    case 'integer':
      return String(n);
    case 'hex-integer':
      return `0x${hex4(n)}`;
    case 'octal-integer':
      return `0${n.toString(8)}`;
    case 'three-part':
      return `${b[0]}.${b[1]}.${(b[2] << 8) | b[3]}`;
    case 'two-part':
      return `${b[0]}.${((b[1] << 16) | (b[2] << 8) | b[3]) >>> 0}`;
    case 'trailing-dot':
      return `${b.join('.')}.`;
    case 'leading-zeros':
      return b.map((x) => `00${x}`.slice(-3)).join('.'); // 3-digit decimal, which parsers read as octal
    case 'percent':
      return [...b.join('.')].map((c) => `%${c.charCodeAt(0).toString(16)}`).join('');
    case 'full-width':
      return [...b.join('.')].map((c) => (c === '.' ? '\uFF0E' : String.fromCharCode(0xff10 + Number(c)))).join('');
    case 'mapped':
      return `[::ffff:${b.join('.')}]`;
    case 'mapped-hex':
      return `[::ffff:${hex4((b[0] << 8) | b[1])}:${hex4((b[2] << 8) | b[3])}]`;
    case 'nat64':
      return `[64:ff9b::${b.join('.')}]`;
    case '6to4':
      return `[2002:${hex4((b[0] << 8) | b[1])}:${hex4((b[2] << 8) | b[3])}::1]`;
  }
}

function v6Text(b: number[], form: (typeof V6_FORMS)[number]): string {
  const address = ipaddr.fromByteArray(b) as ipaddr.IPv6;
  switch (form) {
    case 'canonical':
      return address.toRFC5952String();
    case 'expanded':
      return address.toNormalizedString();
    case 'upper':
      return address.toRFC5952String().toUpperCase();
    case 'zero-padded':
      return address.parts.map((p) => p.toString(16).padStart(4, '0')).join(':');
    case 'dotted-tail':
      return `${address.parts
        .slice(0, 6)
        .map((p) => p.toString(16))
        .join(':')}:${b.slice(12).join('.')}`;
    case 'zone':
      return `${address.toRFC5952String()}%eth0`;
  }
}

export type AddressInput =
  | { kind: 'v4'; bytes: number[]; form: (typeof V4_FORMS)[number] }
  | { kind: 'v6'; bytes: number[]; form: (typeof V6_FORMS)[number]; brackets: boolean }
  | { kind: 'raw'; text: string };

function hostText(input: AddressInput): string {
  if (input.kind === 'raw') return input.text;
  if (input.kind === 'v4') return v4Text(input.bytes, input.form);
  const text = v6Text(input.bytes, input.form);
  return input.brackets ? `[${text}]` : text;
}

/** The address the form was written to mean (for forms a URL parser must read as that address). */
function meant(input: AddressInput): string | undefined {
  // 3-digit parts with a leading zero are octal to URL parsers and inet_aton: they mean another
  // address, which is judged as what the parser made of it.
  if (input.kind === 'v4') return input.form === 'leading-zeros' ? undefined : input.bytes.join('.');
  if (input.kind === 'v6' && input.form !== 'zone')
    return (ipaddr.fromByteArray(input.bytes) as ipaddr.IPv6).toString();
  return undefined;
}

export const addressTarget: FuzzTarget<AddressInput> = {
  name: 'address',
  about: 'SSRF address classifier (proxy/src/address-policy.ts), judged against ipaddr.js',
  inputs: fc.oneof(
    {
      weight: 4,
      arbitrary: fc.record({ kind: fc.constant('v4' as const), bytes: v4Bytes, form: fc.constantFrom(...V4_FORMS) }),
    },
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('v6' as const),
        bytes: v6Bytes,
        form: fc.constantFrom(...V6_FORMS),
        brackets: fc.boolean(),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('raw' as const),
        text: fc.oneof(fc.string({ maxLength: 50 }), fc.stringMatching(/^\[?[0-9a-fA-Fx:.%\]]{0,45}$/)),
      }),
    },
  ),
  check(input) {
    const host = hostText(input);
    // 1. The classifier on the text as a resolver would hand it over.
    const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
    const cls = classifyAddress(host);
    const family = isIP(bare.split('%')[0]);
    if (family === 0) invariant(cls === 'invalid', `${host} is not an IP address but classified ${cls}`);
    else if (mustRefuse(bare.split('%')[0])) invariant(cls !== 'public', `${host} classified public`);
    // 2. The URL check a REQUEST goes through: refused, or allowed only when public.
    let url: URL;
    try {
      url = checkUrl(`http://${host}/`, STRICT);
    } catch (e) {
      invariant(e instanceof ServeError && e.kind === 'refused', `checkUrl threw ${String(e)}`);
      return;
    }
    const literal = hostOf(url);
    if (isIP(literal) !== 0) invariant(!mustRefuse(literal), `http://${host}/ passed the check as ${literal}`);
    const address = meant(input);
    if (address !== undefined && mustRefuse(address)) {
      invariant(false, `http://${host}/ (${address}) passed the check with host ${url.hostname}`);
    }
  },
  bytes: (input) => jsonBytes({ ...input, host: hostText(input) }),
};
