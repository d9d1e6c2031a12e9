export * from './scenario';
export { simulateMutp, codecFor, LINK_OVERHEAD_BYTES } from './mutp-sim';
export type { MutpSimOptions, CodecSet } from './mutp-sim';
export { simulateHttp } from './http-model';
export { makeObject } from './object';
export { configWindow } from './configs';
export * from './link-spec';
export { SimLink, SimLinkDirection, ScheduleClock, stationaryLoss, meanJitter, meanRate } from './link';
export type { DropReason, LinkDirectionStats } from './link';
import { Scenario, SimResult } from './scenario';
import { simulateHttp } from './http-model';
import { MutpSimOptions, simulateMutp } from './mutp-sim';

export function simulate(s: Scenario, options?: MutpSimOptions): SimResult {
  return s.mode === 'http' ? simulateHttp(s) : simulateMutp(s, options);
}
