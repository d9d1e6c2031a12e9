export { StagingManager, DEFAULT_STAGING_CONFIG } from './staging-manager';
export type { StagingConfig, StagingStats } from './staging-manager';
export { segmentKey } from './chunk-profile';
export type { ChunkProfile, SegmentRef, StagingState } from './chunk-profile';
export { SegmentStager, HANDOFF_STAGE_WAIT_MS } from './stager';
export type { StagerOptions, StagerStats, StagingClient } from './stager';
export { DEFAULT_SPREAD_CONFIG } from './spread-rule';
export type { SpreadConfig } from './spread-rule';
