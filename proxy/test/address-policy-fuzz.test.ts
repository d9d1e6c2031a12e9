/**
 * Property tests of the SSRF guard (src/address-policy.ts) against an independent judge,
 * ipaddr.js: an address in a private, loopback, link-local, CGNAT, unique-local, multicast or
 * unspecified range, or an IPv6 address that leads to one (IPv4-mapped, NAT64, 6to4), is refused
 * in every textual form a URL parser accepts.
 */
import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { checkUrl, classifyAddress, hostOf, OriginPolicy } from '@mutp/origin-fetch';
import { ServeError } from '../src/errors';

const STRICT: OriginPolicy = { allowedOrigins: '*', allowPrivateOrigins: false };
const PARAMS = { seed: 11, numRuns: 500 };

const REFUSED_V4 = new Set([
  'unspecified',
  'broadcast',
  'multicast',
  'linkLocal',
  'loopback',
  'carrierGradeNat',
  'private',
]);
const REFUSED_V6 = new Set(['unspecified', 'linkLocal', 'multicast', 'loopback', 'uniqueLocal']);

/** ipaddr.js's verdict: must the proxy refuse this literal? */
function mustRefuse(literal: string): boolean {
  const a = ipaddr.parse(literal);
  if (a.kind() === 'ipv4') return REFUSED_V4.has(a.range());
  const v6 = a as ipaddr.IPv6;
  const b = v6.toByteArray();
  const range = v6.range();
  if (REFUSED_V6.has(range)) return true;
  if (range === 'ipv4Mapped' || range === 'rfc6052') return mustRefuse(b.slice(12).join('.'));
  if (range === '6to4') return mustRefuse(b.slice(2, 6).join('.'));
  return false;
}

function refused(url: string): boolean {
  try {
    checkUrl(url, STRICT);
    return false;
  } catch (e) {
    expect(e).toBeInstanceOf(ServeError);
    expect((e as ServeError).kind).toBe('refused');
    return true;
  }
}

const inRange = (cidr: string) => {
  const [net, bits] = ipaddr.parseCIDR(cidr);
  const base = net.toByteArray();
  return fc.array(fc.nat(255), { minLength: base.length, maxLength: base.length }).map((noise) =>
    base.map((byte, i) => {
      const keep = Math.max(0, Math.min(8, bits - i * 8));
      const mask = (0xff << (8 - keep)) & 0xff;
      return (byte & mask) | (noise[i] & ~mask & 0xff);
    }),
  );
};
const privateV4 = fc.oneof(
  ...[
    '0.0.0.0/8',
    '10.0.0.0/8',
    '100.64.0.0/10',
    '127.0.0.0/8',
    '169.254.0.0/16',
    '172.16.0.0/12',
    '192.168.0.0/16',
    '224.0.0.0/4',
  ].map(inRange),
);

/** Forms that WHATWG URL parsers and inet_aton read as the address `b`. */
function v4Forms(b: number[]): string[] {
  const n = ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
  const h = (x: number) => x.toString(16);
  const dotted = b.join('.');
  return [
    dotted,
    `${dotted}.`,
    b.map((x) => `0${x.toString(8)}`).join('.'),
    b.map((x) => `0x${h(x)}`).join('.'),
    b.map((x) => `0X${h(x).toUpperCase()}`).join('.'),
    String(n),
    `0x${h(n)}`,
    `0${n.toString(8)}`,
    `${b[0]}.${b[1]}.${(b[2] << 8) | b[3]}`,
    `${b[0]}.${((b[1] << 16) | (b[2] << 8) | b[3]) >>> 0}`,
    [...dotted].map((c) => `%${c.charCodeAt(0).toString(16)}`).join(''),
    [...dotted].map((c) => (c === '.' ? '\uFF0E' : String.fromCharCode(0xff10 + Number(c)))).join(''),
    `[::ffff:${dotted}]`,
    `[::ffff:${h((b[0] << 8) | b[1])}:${h((b[2] << 8) | b[3])}]`,
    `[0:0:0:0:0:FFFF:${dotted}]`,
    `[64:ff9b::${dotted}]`,
    `[2002:${h((b[0] << 8) | b[1])}:${h((b[2] << 8) | b[3])}::1]`,
  ];
}

test('a private IPv4 address is refused in every textual form', () => {
  fc.assert(
    fc.property(privateV4, fc.constantFrom('http', 'https'), fc.constantFrom('', ':80', ':8080'), (b, scheme, port) => {
      expect(mustRefuse(b.join('.'))).toBe(true); // the generator's own check
      for (const host of v4Forms(b)) {
        if (!refused(`${scheme}://${host}${port}/x`)) throw new Error(`${host} (${b.join('.')}) was allowed`);
      }
    }),
    PARAMS,
  );
});

test('a private IPv6 address is refused in every textual form', () => {
  const v6 = fc.oneof(...['::1/128', '::/128', 'fe80::/10', 'fc00::/7', 'ff00::/8'].map(inRange));
  fc.assert(
    fc.property(v6, (b) => {
      const a = ipaddr.fromByteArray(b) as ipaddr.IPv6;
      const forms = [
        a.toRFC5952String(),
        a.toNormalizedString(),
        a.toRFC5952String().toUpperCase(),
        a.parts.map((p) => p.toString(16).padStart(4, '0')).join(':'),
        `${a.parts
          .slice(0, 6)
          .map((p) => p.toString(16))
          .join(':')}:${b.slice(12).join('.')}`,
      ];
      for (const text of forms) {
        if (!refused(`http://[${text}]/`)) throw new Error(`[${text}] was allowed`);
        expect(classifyAddress(text)).not.toBe('public');
        expect(classifyAddress(`${text}%eth0`)).not.toBe('public');
      }
    }),
    PARAMS,
  );
});

test('the classifier agrees with ipaddr.js on every literal it must refuse, and allows what URL parsing lets through only when public', () => {
  const anyV4 = fc.array(fc.nat(255), { minLength: 4, maxLength: 4 });
  const anyV6 = fc.oneof(
    fc.array(fc.nat(255), { minLength: 16, maxLength: 16 }),
    anyV4.map((b) => [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...b]),
    anyV4.map((b) => [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, ...b]),
  );
  fc.assert(
    fc.property(fc.oneof(anyV4, anyV6, privateV4), (b) => {
      const literal = ipaddr.fromByteArray(b).toString();
      if (mustRefuse(literal)) expect(classifyAddress(literal)).not.toBe('public');
      const host = b.length === 4 ? literal : `[${literal}]`;
      try {
        const url = checkUrl(`http://${host}/`, STRICT);
        expect(mustRefuse(hostOf(url))).toBe(false);
      } catch (e) {
        expect(e).toBeInstanceOf(ServeError);
      }
    }),
    PARAMS,
  );
});
