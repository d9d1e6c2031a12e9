export { PlaybackSession } from './session';
export type { FetchedSegment, FetchOptions, PlaybackClient, PlaybackOptions } from './session';
export { downloadSeries } from './series';
export type { SegmentOutcome, SeriesOptions, SeriesResult } from './series';
