// `@mutp/shared`: the sans-IO MUTP core. No sockets, timers, clocks or Node built-ins: callers feed
// datagrams and the time, and pull datagrams and the next deadline. The client orchestration built
// on it is the separate entry `@mutp/shared/client`.
//
// What this entry exports: the names a production file uses (the services', the client's, the
// extension's and the simulator's src/, the client orchestration, e2e's cluster/demo/origin), and
// nothing else. A name only tests, benches or fuzz targets use (raw encoders, wire constants,
// estimators, GF(256) and digest primitives) is exported by `@mutp/shared/internal` (internal.ts)
// alone; it moves here the day a production file needs it.
export {
  DEFAULT_SYMBOL_SIZE,
  MAX_DATAGRAM_BYTES,
  MAX_OBJECT_BYTES,
  MAX_SOURCES,
  MAX_SYMBOL_SIZE,
  MIN_SYMBOL_SIZE,
} from './limits';
export { addressPrefix, shareKey } from './address-prefix';
export { MAX_RANGE_OFFSET, rangeEnd, rangeProblem, servedRangeProblem, validContentType } from './range';
export type { ByteRange, ObjectAttributes } from './range';
export { TransferError } from './errors';
export { decode, ErrorCode, MessageType, parseFeatureList, validValidator } from './wire';
export type { Feature, MetaMessage, Mode, OriginValidator, SchedulerName } from './wire';
export * from './layout';
export * from './random';
export * from './codec';
export { Sender, DEFAULT_SENDER_CONFIG } from './sender/sender';
export type { MetaSigner, SenderConfig } from './sender/sender';
export { DEFAULT_GENERATION_SIZE, DEFAULT_SCHEDULER, MODES } from './modes';
export { windowForPath } from './window-size';
export { Receiver, DEFAULT_RECEIVER_CONFIG } from './receiver/receiver';
export type { ReceiverConfig, SourceStats, PollutionKind } from './receiver/receiver';
export type { SourceSigner } from './receiver/meta-signatures';
export { sameIdentity } from './receiver/agreement';
export {
  Admission,
  EncoderBudgetError,
  IdleEncoders,
  LayoutDigests,
  MemoryBudget,
  networkShare,
  objectLayout,
  prepareObject,
  SharedEncoders,
  SourceEndpoint,
} from './endpoint';
export type { AdmissionLimits, AdmissionResult, EndpointEvent, EndpointLimits } from './endpoint';
export { LinkEndpoint } from './link';
export type { LinkState, LinkTransfer, LivenessLimits, ReconnectionPolicy } from './link';
export {
  assertionKey,
  clientToOrigo,
  downloadRecord,
  failedStage,
  MAX_CONFLICT_STATEMENTS,
  MAX_RENEWED_PROXY_TOKENS,
  MAX_SIGNAL_BYTES,
  NETWORK_CLAIM,
  origoToClient,
  origoToProxy,
  parseSignal,
  proxyTokenAudience,
  proxyToOrigo,
  quicEndpoint,
  SIGNALLING_VERSION,
  tokenPublicKey,
  withdrawReason,
} from './signalling';
export type {
  ClientToOrigo,
  ConflictReport,
  DownloadRecord,
  IceCandidate,
  OrigoToClient,
  OrigoToProxy,
  ProxyInfo,
  ProxyToOrigo,
  QuicEndpoint,
  SessionDescription,
  SignalResult,
  StagedAnswer,
  StagedByProxy,
  StageHint,
  StageLayout,
  TokenPublicKey,
  WithdrawReason,
} from './signalling';
export * from './transport';
export * from './channel-base';
export { DeadlineTimer } from './driver';
export type { ScheduleAt } from './driver';
export { decodeAssertionKey, signHttpAnswer, verifyMeta } from './assertion';
export type { AnsweredObject, AssertionProvenance, VerifySignature } from './assertion';
