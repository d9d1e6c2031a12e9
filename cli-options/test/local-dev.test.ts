/** --local-dev's address check: loopback in every spelling, nothing else (names included). */
import { isLoopbackHost, localDevRefusal } from '../src/local-dev';

test('loopback: localhost, 127/8, ::1 in any spelling, IPv4-mapped 127/8', () => {
  for (const host of [
    'localhost',
    'LOCALHOST',
    '127.0.0.1',
    '127.1.2.3',
    '::1',
    '[::1]',
    '0:0:0:0:0:0:0:1',
    '::ffff:127.0.0.1',
  ]) {
    expect({ host, loopback: isLoopbackHost(host) }).toEqual({ host, loopback: true });
  }
});

test('not loopback: wildcards, private and public addresses, any other name', () => {
  for (const host of [
    '0.0.0.0',
    '::',
    '10.0.0.1',
    '192.168.1.1',
    '203.0.113.7',
    '::ffff:10.0.0.1',
    'fe80::1',
    'example.com',
    'localhost.example.com',
    '127.0.0.1.example.com',
    '',
  ]) {
    expect({ host, loopback: isLoopbackHost(host) }).toEqual({ host, loopback: false });
  }
});

test('the refusal names the first flag that is not loopback; absent ones pass', () => {
  expect(localDevRefusal({ '--host': '127.0.0.1', '--ice-bind': undefined })).toBeUndefined();
  expect(localDevRefusal({ '--http-host': '127.0.0.1', '--advertised-http-url': 'edge.example.com' })).toBe(
    '--local-dev listens on and advertises loopback addresses only, and --advertised-http-url gives ' +
      'edge.example.com: drop --local-dev to serve other machines (docs/deploy.md)',
  );
});
