// `@mutp/shared`: the sans-IO MUTP core. No sockets, timers, clocks or Node built-ins: callers feed
// datagrams and the time, and pull datagrams and the next deadline. The client orchestration built
// on it is the separate entry `@mutp/shared/client`.
export * from './limits';
export * from './address-prefix';
export * from './range';
export * from './errors';
export * from './wire';
export * from './layout';
export * from './integrity';
export * from './gf256';
export * from './coefficients';
export * from './random';
export * from './partition';
export * from './codec';
export { Sender, DEFAULT_SENDER_CONFIG } from './sender/sender';
export type { PathEstimate } from './sender/sender';
export type { MetaSigner, SenderConfig, SenderOptions, SenderStatus, SenderStats } from './sender/sender';
export * from './modes';
export * from './window-size';
export { createScheduler } from './sender/schedulers';
export type { Scheduler, ScheduleView } from './sender/schedulers';
export { RttEstimator } from './sender/rtt';
export { Receiver, DEFAULT_RECEIVER_CONFIG } from './receiver/receiver';
export type {
  ReceiverConfig,
  ReceiverOptions,
  ReceiverStatus,
  ReceiverStats,
  SourceStats,
  SourceState,
  OutgoingDatagram,
  Polluter,
  PollutionKind,
} from './receiver/receiver';
export { RateEstimator } from './receiver/rate-estimator';
export type { SourceSigner } from './receiver/meta-signatures';
export { sameIdentity } from './receiver/agreement';
export type { Identity } from './receiver/agreement';
export * from './endpoint';
export * from './link';
export * from './signalling';
export * from './transport';
export * from './channel-base';
export * from './driver';
export * from './assertion';
