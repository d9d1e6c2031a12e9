/** Why a client operation failed; the extension counts fallbacks by this code. */
export type ClientErrorCode =
  | 'origo-unreachable'
  /** origo failed moments ago and is in its back-off period: not tried (see origo-backoff.ts). */
  | 'origo-down'
  | 'origo-error'
  | 'no-proxies'
  | 'connect-failed'
  | 'download-failed'
  | 'http-failed'
  | 'cancelled';

export class ClientError extends Error {
  override readonly name = 'ClientError';
  constructor(
    readonly code: ClientErrorCode,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}
