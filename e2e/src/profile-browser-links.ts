/**
 * What the emulated links did during a profiled play (profile:browser --profile): per link and
 * direction, packets that came in and the drops by cause (linkem's counters, rewritten every
 * second, so a play's figures are within a second's traffic). Set beside the proxies' own
 * "lost" counts, they tell the path's losses from losses the senders only presumed (late or
 * missing acknowledgements) or that happened past the link, in the browser.
 */
import { LinkStats, LinkStatsDirection, readLinkStats, TestbedDescription } from '@mutp/testbed';

export interface LinkDirectionDelta {
  packetsIn: number;
  lossDrops: number;
  queueDrops: number;
}

export type LinkDeltas = Record<string, { up: LinkDirectionDelta; down: LinkDirectionDelta }>;

export type LinkSnapshot = Record<string, LinkStats | undefined>;

export function snapshotLinks(testbed: TestbedDescription): LinkSnapshot {
  return readLinkStats(testbed);
}

function delta(after: LinkStatsDirection, before: LinkStatsDirection | undefined): LinkDirectionDelta {
  return {
    packetsIn: after.packetsIn - (before?.packetsIn ?? 0),
    lossDrops: after.dropped.loss - (before?.dropped.loss ?? 0),
    queueDrops: after.dropped.queue - (before?.dropped.queue ?? 0),
  };
}

/** Each link's change from `before` to now (links without a stats file yet are left out). */
export function linkDeltasSince(testbed: TestbedDescription, before: LinkSnapshot): LinkDeltas {
  const out: LinkDeltas = {};
  for (const [name, after] of Object.entries(readLinkStats(testbed))) {
    if (!after) continue;
    out[name] = { up: delta(after.up, before[name]?.up), down: delta(after.down, before[name]?.down) };
  }
  return out;
}
