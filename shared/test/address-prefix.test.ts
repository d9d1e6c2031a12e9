import { addressPrefix, shareKey } from '../src';

describe('addressPrefix', () => {
  test('IPv4 counts per /24, IPv4-mapped IPv6 as IPv4', () => {
    expect(addressPrefix('203.0.113.7')).toBe('203.0.113.0/24');
    expect(addressPrefix('203.0.113.250')).toBe('203.0.113.0/24');
    expect(addressPrefix('203.0.114.7')).toBe('203.0.114.0/24');
    expect(addressPrefix('::ffff:203.0.113.9')).toBe('203.0.113.0/24');
  });

  test('IPv6 counts per /48, however the address is written', () => {
    expect(addressPrefix('2001:db8:1234:5678::1')).toBe('2001:db8:1234::/48');
    expect(addressPrefix('2001:0db8:1234:ffff:0:0:0:2')).toBe('2001:db8:1234::/48');
    expect(addressPrefix('2001:db8:1235::1')).toBe('2001:db8:1235::/48');
    expect(addressPrefix('fe80::1%eth0')).toBe('fe80:0:0::/48');
  });

  test('anything else stands for itself', () => {
    expect(addressPrefix('/run/origo.sock')).toBe('/run/origo.sock');
    expect(addressPrefix('')).toBe('');
  });
});

test("a client's shares count against origo's network for it, else against the client alone", () => {
  expect(shareKey('c-1', '203.0.113.0/24')).toBe('203.0.113.0/24');
  expect(shareKey('c-1', undefined)).toBe('client:c-1');
});
