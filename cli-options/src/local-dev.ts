/**
 * `--local-dev`, the services' one-host profile: it turns on the allowances a trial on one
 * machine needs (origo: proxies on loopback, conflicts about loopback origins; the proxy: origins
 * on loopback on any port), which are safe only while nothing listens on or is advertised to
 * another machine. So the profile refuses any address that is not this machine's.
 */
import { isIP } from 'node:net';

/** Whether `host` (a name, an IPv4 or IPv6 address, bracketed or not) is this machine only: localhost, 127/8, ::1. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (bare === 'localhost') return true;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) !== 6) return false;
  // The URL parser writes an IPv6 address in its shortest form; ::ffff:127.x.y.z is IPv4 loopback.
  const short = new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  return short === '::1' || /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(short);
}

/**
 * The refusal of `--local-dev` for the first of `places` (a flag and the host it gives; absent
 * ones are skipped) that is not on loopback, or undefined when all are.
 */
export function localDevRefusal(places: Record<string, string | undefined>): string | undefined {
  for (const [flag, host] of Object.entries(places)) {
    if (host === undefined || isLoopbackHost(host)) continue;
    return (
      `--local-dev listens on and advertises loopback addresses only, and ${flag} gives ${host}: ` +
      'drop --local-dev to serve other machines (docs/deploy.md)'
    );
  }
  return undefined;
}
