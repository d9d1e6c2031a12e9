export { up, destroy, describe, readDescription, readLinkStats, renumberClient, LINKEM } from './topology';
export type { Host, LinkStats, LinkStatsDirection, Testbed, TestbedDescription, TestbedOptions } from './topology';
export { netnsUnavailable, NETNS_PREFIX, sysctl } from './netns';
export { loadProfile } from './profile-loader';
