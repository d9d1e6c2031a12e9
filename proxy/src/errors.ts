/**
 * Why the proxy cannot serve an object, and how each reason is reported: as an MUTP ERROR code
 * (docs/protocol.md §5.4) to a WebRTC client, as an HTTP status to a Parallel HTTP client.
 */
import { ErrorCode } from '@mutp/shared';

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

export function wireErrorCode(kind: ServeErrorKind): number {
  switch (kind) {
    case 'not-found':
      return ErrorCode.OriginNotFound;
    case 'origin-error':
    case 'timeout':
      return ErrorCode.OriginError;
    case 'too-large':
      return ErrorCode.ObjectTooLarge;
    case 'range-not-satisfiable':
      return ErrorCode.RangeNotSatisfiable;
    case 'refused':
      return ErrorCode.BadRequest;
    case 'overloaded':
      return ErrorCode.Overloaded;
    case 'unsupported':
      return ErrorCode.Unsupported;
    case 'internal':
      return ErrorCode.Internal;
  }
}

export function httpStatus(kind: ServeErrorKind): number {
  switch (kind) {
    case 'not-found':
      return 404;
    case 'origin-error':
    case 'timeout':
      return 502;
    case 'too-large':
      return 413;
    case 'range-not-satisfiable':
      return 416;
    case 'refused':
      return 403;
    case 'overloaded':
      return 503;
    case 'unsupported':
      return 400;
    case 'internal':
      return 500;
  }
}

/** Any thrown value as a ServeError (unexpected ones become 'internal'). */
export function asServeError(e: unknown): ServeError {
  if (e instanceof ServeError) return e;
  return new ServeError('internal', e instanceof Error ? e.message : String(e));
}
