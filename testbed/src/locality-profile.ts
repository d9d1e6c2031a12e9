/**
 * The locality testbed (issue 34): two regions of proxies, the client near one of them. Proxies
 * 0 and 1 are region `a`, 2 and 3 region `b`; a client-proxy path is 10 ms RTT to the near region
 * and 80 ms to the far one. The client starts at 10.78.1.2 (the testbed's client address), in
 * region a's prefix; a network change (renumberClient) to MOVED_CLIENT_OCTET puts it in region
 * b's. With `swapAtMs` the paths swap then too (the client is now near b): a link schedule,
 * counted from the links' start, since linkem's configuration is fixed once it runs.
 *
 * Not a named profile (profile-loader): the locality runner (e2e/src/bench-locality.ts) brings
 * it up itself, with the proxies' --region flags that belong to it.
 */
import type { DirectionSpec, LinkSpec } from '@mutp/sim/link-spec';
import type { NetworkProfile } from '@mutp/sim/profiles';

export interface LocalityRegion {
  name: string;
  /** The client addresses the region serves (each of its proxies declares it). */
  prefix: string;
  /** Its proxies, by index in the fleet. */
  proxies: number[];
}

export const LOCALITY_REGIONS: readonly LocalityRegion[] = [
  { name: 'a', prefix: '10.78.1.0/25', proxies: [0, 1] },
  { name: 'b', prefix: '10.78.1.128/25', proxies: [2, 3] },
];
/** The last byte of the client's address after the move: in region b's prefix. */
export const MOVED_CLIENT_OCTET = 200;
export const NEAR_RTT_MS = 10;
export const FAR_RTT_MS = 80;
/** A proxy's cap (KB/s); its path runs 10 % above it, as the paper profile's do. */
export const LOCALITY_CAP_KBPS = 1792;
const PATH_HEADROOM = 1.1;
const PATH_QUEUE_BYTES = 192 * 1024;

export interface LocalityOptions {
  /** The client is near region b from the start (the baseline a moved client is compared with). */
  startInB?: boolean;
  /** The paths swap this long after the links start: the client moved from a to b. */
  swapAtMs?: number;
}

export function localityProfile(o: LocalityOptions = {}): NetworkProfile {
  if (o.swapAtMs !== undefined && !(o.swapAtMs > 0))
    throw new RangeError(`swapAtMs must be positive, got ${o.swapAtMs}`);
  const nearFirst = o.startInB === true ? 'b' : 'a';
  return {
    name: o.startInB === true ? 'locality-b' : o.swapAtMs !== undefined ? 'locality-move' : 'locality',
    description:
      `two regions of two proxies: ${NEAR_RTT_MS} ms RTT to region ${nearFirst}, ${FAR_RTT_MS} ms to the other` +
      (o.swapAtMs !== undefined ? `, swapped after ${o.swapAtMs} ms` : ''),
    defaultCapsKBps: [LOCALITY_CAP_KBPS, LOCALITY_CAP_KBPS, LOCALITY_CAP_KBPS, LOCALITY_CAP_KBPS],
    rttMs: NEAR_RTT_MS,
    links: (caps) => ({
      paths: caps.map((cap, i) => {
        const near = regionOfProxy(i) === nearFirst;
        const [before, after] = near ? [NEAR_RTT_MS / 2, FAR_RTT_MS / 2] : [FAR_RTT_MS / 2, NEAR_RTT_MS / 2];
        return path(cap, before, o.swapAtMs === undefined ? undefined : { atMs: o.swapAtMs, oneWayMs: after });
      }),
    }),
  };
}

/** The region of proxy `index` (`a` for 0 and 1, `b` for 2 and 3, and so on in pairs). */
export function regionOfProxy(index: number): string {
  return LOCALITY_REGIONS.find((r) => r.proxies.includes(index))?.name ?? (index % 4 < 2 ? 'a' : 'b');
}

function path(capKBps: number, oneWayMs: number, swap?: { atMs: number; oneWayMs: number }): LinkSpec {
  const direction = (rate: DirectionSpec['rate'], queueBytes?: number): DirectionSpec => ({
    rate,
    delayMs: oneWayMs,
    ...(queueBytes !== undefined ? { queueBytes } : {}),
    ...(swap
      ? {
          schedule: {
            loop: false,
            segments: [
              { durationMs: swap.atMs, connected: true, delayMs: oneWayMs },
              { durationMs: 1000, connected: true, delayMs: swap.oneWayMs },
            ],
          },
        }
      : {}),
  });
  return {
    down: direction({ kind: 'constant', bytesPerSecond: Math.round(capKBps * 1024 * PATH_HEADROOM) }, PATH_QUEUE_BYTES),
    up: direction({ kind: 'unlimited' }),
  };
}
