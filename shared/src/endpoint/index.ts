export { Admission, MemoryBudget, networkShare } from './admission';
export type { AdmissionLimits, AdmissionResult, Grant } from './admission';
export { LayoutDigests } from './layout-digests';
export { EncoderBudgetError, encoderBytesOf, SharedEncoders, sharingCodec } from './shared-encoders';
export { IdleEncoders } from './idle-encoders';
export { prepareObject } from './prepare';
export {
  DEFAULT_ENDPOINT_LIMITS,
  PENDING_TRANSFER_BYTES,
  SENDER_BYTES_PER_UNIT,
  SENDER_FIXED_BYTES,
  senderStateBytes,
  SourceEndpoint,
} from './source-endpoint';
export type {
  EndpointEvent,
  EndpointLimits,
  SourceEndpointOptions,
  SourceEndpointStats,
  SourceObject,
} from './source-endpoint';
