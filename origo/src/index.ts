/** In-process use of origo (tests, e2e): `createOrigo(config)` then `listen()` / `close()`. */
export { createOrigo } from './server';
export type { Origo } from './server';
export { DEFAULT_CONFIG, resolveConfig } from './config';
export type { OrigoConfig, OrigoOptions } from './config';
export { selectProxies } from './selection';
export type { ProxyLoad, SelectionRequest } from './selection';
export { CLOSE } from './broker/peers';
export type { ProxyStatus } from './broker/registry';
export type { StoredRecord } from './records/records';
