/**
 * Why an object cannot be fetched or served, by kind: the fetch reports these, and each service
 * maps them to what it answers (the proxy: an MUTP ERROR code or an HTTP status).
 */
export type ServeErrorKind =
  /** The origin has no such object (404/410, unknown host). */
  | 'not-found'
  /** The origin failed: other non-2xx, network error, bad response. */
  | 'origin-error'
  /** The origin did not answer (headers or body) within the configured time. */
  | 'timeout'
  /** Larger than the proxy's object limit. */
  | 'too-large'
  /** The requested range starts at or past the end of the resource (origin 416, or known length). */
  | 'range-not-satisfiable'
  /** The URL is not acceptable: scheme, credentials, origin not allowed, private address. */
  | 'refused'
  /** The proxy is at its transfer limits. */
  | 'overloaded'
  | 'unsupported'
  | 'internal';

export class ServeError extends Error {
  override readonly name = 'ServeError';
  constructor(
    readonly kind: ServeErrorKind,
    message: string,
  ) {
    super(message);
  }
}
