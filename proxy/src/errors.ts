/**
 * Why the proxy cannot serve an object, and how each reason is reported: as an MUTP ERROR code
 * (docs/protocol.md §5.4) to a WebRTC client, as an HTTP status to a Parallel HTTP client.
 */
import { ErrorCode } from '@mutp/shared';
import { ServeError, ServeErrorKind } from '@mutp/origin-fetch';

export { ServeError };
export type { ServeErrorKind };

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
