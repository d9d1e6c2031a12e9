/** Why a client operation failed; the extension counts fallbacks by this code. */
export type ClientErrorCode =
  | 'origo-unreachable'
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
