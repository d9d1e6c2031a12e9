export { up, destroy, describe, readDescription, readLinkStats, renumberClient, LINKEM } from './topology';
export type { Host, LinkStats, LinkStatsDirection, Testbed, TestbedDescription, TestbedOptions } from './topology';
export { netnsUnavailable, NETNS_PREFIX, sysctl } from './netns';
export { loadProfile } from './profile-loader';
export {
  FAR_RTT_MS,
  LOCALITY_CAP_KBPS,
  LOCALITY_REGIONS,
  localityProfile,
  MOVED_CLIENT_OCTET,
  NEAR_RTT_MS,
  regionOfProxy,
} from './locality-profile';
export type { LocalityOptions, LocalityRegion } from './locality-profile';
