// `@mutp/node-rtc`: the core's transport interfaces (`RtcFactory`, shared/src/transport.ts) over
// node-datachannel. Node only: the native module must never reach a browser bundle.
export {
  createNodeRtcFactory,
  nodeRtcReceiveDrops,
  nodeRtcReceiveStats,
  releaseNodeRtc,
  MUTP_CHANNEL_CONFIG,
} from './webrtc';
export type { TurnBudgetStats } from './turn-budget';
export type { NodeRtcOptions } from './webrtc';
