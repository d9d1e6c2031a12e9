/** Typed errors of the core. Nothing in the core throws for bad input; it returns one of these. */

export type WireErrorCode =
  'truncated' | 'unknown-version' | 'unknown-type' | 'out-of-range' | 'too-large' | 'trailing-bytes' | 'inconsistent';

export class WireError extends Error {
  override readonly name = 'WireError';
  constructor(
    readonly code: WireErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export type TransferErrorCode =
  | 'all-sources-failed'
  | 'stalled'
  | 'digest-mismatch'
  | 'length-mismatch'
  | 'metadata-conflict'
  | 'metadata-unconfirmed'
  | 'object-too-large'
  | 'cancelled'
  | 'source-error'
  | 'idle-timeout';

export class TransferError extends Error {
  override readonly name = 'TransferError';
  constructor(
    readonly code: TransferErrorCode,
    /** The message without the code in front (for a caller that names the code its own way). */
    readonly reason: string,
  ) {
    super(`${code}: ${reason}`);
  }
}

export type Result<T, E = WireError> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): Result<T, never> => ({ ok: true, value });
export const err = <E>(error: E): Result<never, E> => ({ ok: false, error });
