/**
 * The simulator's prediction beside a benchmark row: the same mode, caps, object size and, with
 * a network profile, the same links (those of the fleet hosts the cell used), over 5 seeds.
 */
import { DEFAULT_GENERATION_SIZE, DEFAULT_SYMBOL_SIZE } from '@mutp/shared';
import { CodecSet, configWindow, Scenario, SimMode, SimResult, simulate } from '@mutp/sim';
import { linkAt } from '@mutp/sim/link-spec';
import type { NetworkProfile } from '@mutp/sim/profiles';

export interface PredictionCell {
  mode: SimMode;
  capsKBps: number[];
  objectBytes: number;
  rttMs: number;
  /** The profile, its seed, the testbed fleet's caps and the fleet indices the cell used. */
  network?: {
    profile: NetworkProfile;
    seed: number;
    fleetCaps: number[];
    hosts: number[];
    /** How long the testbed's links had run when the cell started (their schedules' phase). */
    offsetMs?: number;
  };
  /**
   * The download runs on connections that just served one (the benchmarks' repeats, a player's
   * next segment): the sources warm-start (SourceEndpoint path memory). Default true.
   */
  warmConnections?: boolean;
}

const SEEDS = 5;

/** One simulated run per seed; failed runs are left out. */
export function simulateCell(cell: PredictionCell, codecs: CodecSet): { scenario: Scenario; result: SimResult }[] {
  const n = cell.network;
  const links = n?.profile.links(n.fleetCaps, n.seed);
  const out: { scenario: Scenario; result: SimResult }[] = [];
  for (let seed = 1; seed <= SEEDS; seed++) {
    const scenario: Scenario = {
      mode: cell.mode,
      capsKBps: cell.capsKBps,
      objectBytes: Math.round(cell.objectBytes),
      rttMs: cell.rttMs,
      jitterMs: 0,
      loss: 0,
      // As the client sizes it once the proxies are measured (the benchmarks' repeats are).
      window: configWindow('path', cell.capsKBps, cell.rttMs, DEFAULT_SYMBOL_SIZE),
      generationSize: DEFAULT_GENERATION_SIZE,
      symbolSize: DEFAULT_SYMBOL_SIZE,
      seed,
      // The benchmarks' proxies have an upload limit, so they start at it on a cold connection.
      startAtCap: true,
      // ... and origo reports that limit to the client as the proxy's capacity.
      capacityHints: true,
      ...(links && n
        ? {
            paths: n.hosts.map((h) => linkAt(links.paths[h], n.offsetMs ?? 0)),
            access: links.access && linkAt(links.access, n.offsetMs ?? 0),
            maxSimMs: 600_000,
          }
        : {}),
    };
    const result = simulate(scenario, { codecs, warmPath: cell.warmConnections ?? true });
    if (result.status === 'complete') out.push({ scenario, result });
  }
  return out;
}
