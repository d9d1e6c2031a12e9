// `@mutp/origin-fetch`: how a MUTP service fetches an object from its origin without becoming a
// way into its own network (SSRF guard with pinned connections, timeouts, size caps, ranges).
// The proxy fetches what clients ask for with it; origo fetches what proxies disagree about.
export * from './serve-error';
export * from './address-policy';
export * from './origin-fetch';
export * from './range-response';
