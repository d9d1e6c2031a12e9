// `@mutp/shared/internal`: the main entry (index.ts) and, besides, what only tests, benches and fuzz
// targets use: the raw encoders and wire constants, the estimators, GF(256), coefficients and digest
// primitives, and the rest of each module the main entry picks its names from. No production file
// imports it (the services', the client's, the extension's and the simulator's src/ use
// `@mutp/shared`; eslint.config.mjs refuses this entry there, but in e2e's fuzz and bench runners).
export * from './index';
export * from './limits';
export * from './address-prefix';
export * from './range';
export * from './errors';
export * from './wire';
export * from './integrity';
export * from './gf256';
export * from './coefficients';
export * from './partition';
export type { PathEstimate, SenderOptions, SenderStatus, SenderStats } from './sender/sender';
export * from './modes';
export * from './window-size';
export { createScheduler } from './sender/schedulers';
export type { Scheduler, ScheduleView } from './sender/schedulers';
export { RttEstimator } from './sender/rtt';
export type {
  OutgoingDatagram,
  Polluter,
  ReceiverOptions,
  ReceiverStats,
  ReceiverStatus,
  SourceState,
} from './receiver/receiver';
export { RateEstimator } from './receiver/rate-estimator';
export type { Identity } from './receiver/agreement';
export * from './endpoint';
export * from './link';
export * from './signalling';
export * from './driver';
export * from './assertion';
