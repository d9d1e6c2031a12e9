export { LinkEndpoint } from './link-endpoint';
export type { LinkEndpointOptions, LinkEndpointStats, LinkEvent, LinkState, LinkTransfer } from './link-endpoint';
export { DEFAULT_LIVENESS_LIMITS, judgeLiveness } from './liveness';
export type { LivenessLimits, LivenessVerdict, TransferLiveness } from './liveness';
export { DEFAULT_RECONNECTION_POLICY, ReconnectionSchedule } from './reconnection';
export type { ReconnectionPolicy } from './reconnection';
