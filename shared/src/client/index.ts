// `@mutp/shared/client`: the client orchestration (origo session, proxy links, downloads over N
// proxies, Parallel HTTP), layered on the core (`@mutp/shared`) and doing IO only through its
// injected `ClientHost`, so the extension and the Node client run the same code.
export * from './host';
export * from './errors';
export { OrigoSession, origoUrlProblem } from './origo-session';
export type { ConnectionSignals } from './origo-session';
export { ProxyLink, RetrySoon } from './proxy-link';
export type { ProxyLinkOptions, TransportConnector } from './proxy-link';
export { ConnectTimeoutError, openQuicTransport, openWebRtcTransport } from './link-transport';
export { openPreferringQuic, QUIC_HEAD_START_MS } from './transport-choice';
export type { TransportPreference } from './transport-choice';
export type { LinkTransport } from './link-transport';
export { runDownload } from './download';
export type { DownloadOptions, DownloadProgress, DownloadResult, SourceShare } from './download';
export { runHttpDownload, baselineUrl } from './http-download';
export type { HttpDownloadResult } from './http-download';
export { MutpClient, DEFAULT_CLIENT_CONFIG, origoUrlsOf } from './client';
export type { ClientConfig, ClientOptions, DownloadMode, GetOptions, GetResult } from './client';
export { OrigoBackoff, DEFAULT_ORIGO_BACKOFF, describeDown } from './origo-backoff';
export type { BackoffPolicy, OrigoDown } from './origo-backoff';
export { StagingManager, DEFAULT_STAGING_CONFIG, DEFAULT_SPREAD_CONFIG, segmentKey } from './staging';
export type {
  ChunkProfile,
  SegmentRef,
  StagingConfig,
  StagingState,
  StagingStats,
  StagerOptions,
  StagerStats,
  StagingClient,
  SpreadConfig,
} from './staging';
export { PlaybackSession, downloadSeries } from './playback';
export type {
  FetchedSegment,
  FetchOptions,
  PlaybackClient,
  PlaybackOptions,
  SegmentOutcome,
  SeriesOptions,
  SeriesResult,
} from './playback';
