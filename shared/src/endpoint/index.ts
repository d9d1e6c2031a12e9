export { Admission, MemoryBudget, networkShare } from './admission';
export type { AdmissionLimits, AdmissionResult, Grant } from './admission';
export { DEFAULT_ENDPOINT_LIMITS } from './config';
export type { EndpointLimits, SourceEndpointOptions } from './config';
export { LayoutDigests } from './layout-digests';
export { objectLayout, refusedLayout } from './layout-rules';
export type { AskedLayout, LayoutRefusal, LayoutRules } from './layout-rules';
export { EncoderBudgetError, encoderBytesOf, SharedEncoders, sharingCodec } from './shared-encoders';
export { IdleEncoders } from './idle-encoders';
export { prepareObject } from './prepare';
export {
  PENDING_TRANSFER_BYTES,
  SENDER_BYTES_PER_UNIT,
  SENDER_FIXED_BYTES,
  senderStateBytes,
  SourceEndpoint,
} from './source-endpoint';
export type { EndpointEvent, SourceEndpointStats } from './source-endpoint';
export type { SourceObject } from './source-object';
