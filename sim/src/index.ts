export * from './scenario';
export { simulateMutp, codecFor } from './mutp-sim';
export type { MutpSimOptions } from './mutp-sim';
export { simulateHttp } from './http-model';
export { makeObject } from './object';
import { Scenario, SimResult } from './scenario';
import { simulateHttp } from './http-model';
import { simulateMutp } from './mutp-sim';

export function simulate(s: Scenario): SimResult {
  return s.mode === 'http' ? simulateHttp(s) : simulateMutp(s);
}
