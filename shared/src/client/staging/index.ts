export { StagingManager, DEFAULT_STAGING_CONFIG } from './staging-manager';
export type { StagingConfig, StagingStats } from './staging-manager';
export { segmentKey } from './chunk-profile';
export type { ChunkProfile, SegmentRef, StagingState } from './chunk-profile';
export { downloadSeries } from './segment-series';
export type { SegmentOutcome, SeriesClient, SeriesOptions, SeriesResult } from './segment-series';
