/**
 * origo's /metrics without a token answers loopback clients only, by the address as parsed
 * (@mutp/cli-options isLoopbackHost, the proxy's check too), not by its first characters: behind a
 * listed reverse proxy the client is whatever address it forwards, and one that merely starts
 * like a loopback address is not one.
 */
import { closeAll, startOrigo } from './helpers';

afterEach(closeAll);

test('a forwarded address that only starts like 127/8 or ::ffff:127 is not loopback', async () => {
  const { http } = await startOrigo({ trustProxy: ['127.0.0.1'] });
  const status = async (forwarded: string) =>
    (await fetch(`${http}/metrics`, { headers: { 'x-forwarded-for': forwarded } })).status;
  expect(await status('127.0.0.1.evil.example')).toBe(403);
  expect(await status('::ffff:127.evil.example')).toBe(403);
  expect(await status('127.0.0.2')).toBe(200);
  expect(await status('::1')).toBe(200);
});
