/**
 * What the client knows of one upcoming segment for staging (SoftStage's chunk profile, seed 000
 * Table I): whether an edge proxy holds it yet, which ones, and the latencies measured on the way.
 */
import type { ByteRange } from '../../range';

/** NONE: not ordered (or the order failed); PENDING: ordered, no proxy answered; READY: staged. */
export type StagingState = 'none' | 'pending' | 'ready';

export interface SegmentRef {
  url: string;
  range?: ByteRange;
}

export interface ChunkProfile extends SegmentRef {
  readonly key: string;
  staging: StagingState;
  /** When the last stage order went out (ms), and how many went out in all. */
  orderedAt?: number;
  orders: number;
  /** Proxies that answered "staged". */
  holders: string[];
  /** Origin to edge, ms: what the first proxy to stage it reported (or the order's round trip). */
  stagingLatencyMs?: number;
  fetchStartedAt?: number;
  /** Edge to client, ms, once fetched. */
  fetchMs?: number;
  fetched: boolean;
}

export function segmentKey(s: SegmentRef): string {
  return s.range ? `${s.url}#${s.range.start}+${s.range.length}` : s.url;
}

export function newProfile(s: SegmentRef): ChunkProfile {
  return {
    url: s.url,
    ...(s.range ? { range: { ...s.range } } : {}),
    key: segmentKey(s),
    staging: 'none',
    orders: 0,
    holders: [],
    fetched: false,
  };
}
