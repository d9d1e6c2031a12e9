import { Random, randomBelow, seededRandom } from '@mutp/shared';
import { SelectionIndex } from '../src/selection-index';
import { clientRegion, ProxyLoad, SelectableMode, selectProxies, SelectionRequest } from '../src/selection';

/**
 * The index must choose as selectProxies does (the reference): same rules, same frequencies, on
 * random fleets and requests (seeded), built by random changes rather than in one go.
 */

const MODES: SelectableMode[] = ['uncoded', 'rlnc', 'fountain'];
const REGIONS = ['eu', 'us', 'ap'];
const PREFIXES: Record<string, string[]> = {
  eu: ['10.1.0.0/16', '10.1.2.0/24', '2001:db8:1::/48'],
  us: ['10.2.0.0/16', '10.1.2.0/24', '10.0.0.0/8'],
  ap: ['10.3.0.0/16', '2001:db8::/32', '10.3.3.3/32'],
};

const pickOne = <T>(random: Random, items: readonly T[]): T => items[randomBelow(random, items.length)];
const chance = (random: Random, p: number) => random() / 0x100000000 < p;

/** A proxy with the values that move selection drawn from small sets, so ties and groups happen. */
function randomProxy(random: Random, proxyId: string): ProxyLoad {
  const modes = new Set(MODES.filter(() => chance(random, 0.7)));
  if (modes.size === 0) modes.add(pickOne(random, MODES));
  const region = chance(random, 0.75) ? pickOne(random, REGIONS) : undefined;
  const maxTransfers = 1 + randomBelow(random, 8);
  return {
    proxyId,
    modes,
    capacityBps: chance(random, 0.2) ? 0 : pickOne(random, [1e6, 2e6, 4e6, 5e6]),
    uploadBps: pickOne(random, [0, 0, 1e5, 5e5, 1e6, 3e6]),
    activeTransfers: randomBelow(random, maxTransfers + 1),
    maxTransfers,
    ...(chance(random, 0.1) ? { draining: true } : {}),
    ...(chance(random, 0.5) ? { recentPicks: randomBelow(random, 3) } : {}),
    ...(chance(random, 0.3) ? { measuredBps: pickOne(random, [5e5, 1e6, 3e6, 8e6]) } : {}),
    ...(region !== undefined ? { region } : {}),
    ...(region !== undefined && chance(random, 0.5) ? { prefixes: PREFIXES[region] } : {}),
  };
}

function randomRequest(random: Random, ids: readonly string[]): SelectionRequest {
  const exclude = ids.filter(() => chance(random, 0.1));
  return {
    count: 1 + randomBelow(random, 6),
    ...(chance(random, 0.6) ? { mode: pickOne(random, MODES) } : {}),
    ...(exclude.length > 0 ? { exclude: [...exclude, exclude[0]] } : {}),
    ...(chance(random, 0.4) ? { region: pickOne(random, REGIONS) } : {}),
    ...(chance(random, 0.3) ? { regionHint: pickOne(random, [...REGIONS, 'nowhere']) } : {}),
  };
}

/** Builds an index by random upserts, updates and removals; returns it with the fleet it ends with. */
function randomFleet(random: Random, size: number): { index: SelectionIndex<ProxyLoad>; fleet: ProxyLoad[] } {
  const index = new SelectionIndex<ProxyLoad>();
  const fleet = new Map<string, ProxyLoad>();
  let next = 0;
  // Views are made on first use: make some before the changes so that they are kept up to date.
  index.select({ count: 2, mode: 'rlnc', region: 'eu' }, random);
  index.select({ count: 2 }, random);
  for (let step = 0; step < size * 3; step++) {
    const ids = [...fleet.keys()];
    if (ids.length > 0 && chance(random, 0.03)) {
      // A registry read: picks of every proxy change at once, and some go; one resync for all.
      for (const id of ids) {
        if (chance(random, 0.1)) fleet.delete(id);
        else fleet.get(id)!.recentPicks = randomBelow(random, 3);
      }
      index.resync(fleet.values());
    } else if (ids.length > 0 && chance(random, 0.15)) {
      const id = pickOne(random, ids);
      fleet.delete(id);
      index.remove(id);
    } else if (ids.length > 0 && chance(random, 0.5)) {
      // A heartbeat or a pick: the same object changed in place, then upserted again.
      const p = fleet.get(pickOne(random, ids))!;
      const fresh = randomProxy(random, p.proxyId);
      Object.assign(p, {
        activeTransfers: Math.min(fresh.activeTransfers, p.maxTransfers),
        uploadBps: fresh.uploadBps,
        recentPicks: fresh.recentPicks ?? 0,
        draining: fresh.draining === true,
      });
      if (chance(random, 0.3)) p.measuredBps = fresh.measuredBps;
      index.upsert(p);
    } else if (fleet.size < size) {
      const p = randomProxy(random, `p${next++}`);
      fleet.set(p.proxyId, p);
      index.upsert(p);
    }
  }
  return { index, fleet: [...fleet.values()] };
}

/** How often each proxy came at each place, over `runs` selections. */
function frequencies(select: () => ProxyLoad[], runs: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < runs; i++) {
    select().forEach((p, place) => {
      const key = `${place}:${p.proxyId}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    });
  }
  return counts;
}

describe('selection index', () => {
  test('picks with the same rules and frequencies as selectProxies on random fleets', () => {
    const random = seededRandom(34);
    const runs = 1500;
    let compared = 0;
    for (let trial = 0; trial < 60; trial++) {
      const { index, fleet } = randomFleet(random, 4 + randomBelow(random, 60));
      const request = randomRequest(
        random,
        fleet.map((p) => p.proxyId),
      );
      const reference = frequencies(() => selectProxies(fleet, request, random), runs);
      const indexed = frequencies(() => index.select(request, random), runs);
      for (const key of new Set([...reference.keys(), ...indexed.keys()])) {
        const a = (reference.get(key) ?? 0) / runs;
        const b = (indexed.get(key) ?? 0) / runs;
        // A certain place is certain in both; one the other never gives is a few draws at most
        // (chance); else the two agree within sampling noise (5 standard deviations).
        const p = (a + b) / 2;
        const noise = 5 * Math.sqrt((2 * p * (1 - p)) / runs) + 2 / runs;
        const certain = (a === 1 || b === 1) && a !== b;
        const never = (a === 0 || b === 0) && Math.max(a, b) * runs > 3;
        if (certain || never || Math.abs(a - b) > noise) {
          throw new Error(`trial ${trial}, ${key}: reference ${a}, index ${b} (${JSON.stringify(request)})`);
        }
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(500);
  });

  test('large near-equal fleets: the first group is sampled, never a proxy outside it', () => {
    const random = seededRandom(5);
    const index = new SelectionIndex<ProxyLoad>();
    const fleet: ProxyLoad[] = [];
    for (let i = 0; i < 2000; i++) {
      const p: ProxyLoad = {
        proxyId: `p${i}`,
        modes: new Set(MODES),
        capacityBps: 10e6,
        uploadBps: 0,
        activeTransfers: i % 3, // three groups: 0, 1 and 2 transfers
        maxTransfers: 10,
      };
      fleet.push(p);
      index.upsert(p);
    }
    const seen = new Set<string>();
    for (let i = 0; i < 500; i++) {
      const chosen = index.select({ count: 4 }, random);
      expect(new Set(chosen).size).toBe(4);
      // Three places from the idle third; the fourth is drawn from anyone (rule 5).
      for (const p of chosen.slice(0, 3)) expect(p.activeTransfers).toBe(0);
      seen.add(chosen[0].proxyId);
    }
    // Spread over the idle third (667 proxies), as the shuffle of rule 4 would.
    expect(seen.size).toBeGreaterThan(300);
  });

  test('clientRegion: the same region as the reference for any address', () => {
    const random = seededRandom(9);
    for (let trial = 0; trial < 30; trial++) {
      const { index, fleet } = randomFleet(random, 4 + randomBelow(random, 30));
      for (const address of [
        '10.1.2.3',
        '10.1.9.9',
        '10.2.0.1',
        '10.9.9.9',
        '10.3.3.3',
        '10.3.3.4',
        '::ffff:10.1.2.3',
        '2001:db8:1::5',
        '2001:db8:2::5',
        '192.0.2.1',
        'not an address',
      ]) {
        expect({ trial, address, region: index.clientRegion(address) }).toEqual({
          trial,
          address,
          region: clientRegion(fleet, address),
        });
      }
    }
  });
});
