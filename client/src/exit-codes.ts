/** The exit codes of `mutp` (documented in client/README.md) and which failure gets which. */
import { ClientError } from '@mutp/shared/client';

export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3, cancelled: 4 } as const;

/** The exit code of a failed download and the message to print for it. */
export function exitCodeOf(e: unknown): { code: number; message: string } {
  const error = e instanceof ClientError ? e : new ClientError('download-failed', String(e));
  const code =
    error.code === 'origo-unreachable' || error.code === 'no-proxies' || error.code === 'origo-error'
      ? EXIT.unreachable
      : error.code === 'cancelled'
        ? EXIT.cancelled
        : EXIT.failed;
  return { code, message: error.message };
}
