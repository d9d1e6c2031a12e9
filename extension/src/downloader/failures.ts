/** Why a download failed, in the words of the answer to the page (reason, message, cause). */
import { ClientError } from '@mutp/shared/client';
import { origoCause } from '../common/deadlines';

/** A failure the downloader names itself. */
export class Failure extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** `e`'s reason, message and cause; `stopReason` when the downloader stopped the download itself. */
export function failureOf(
  stopReason: string | undefined,
  e: unknown,
  maxObjectBytes: number,
): { reason: string; message: string; cause?: string } {
  if (stopReason === 'no-first-byte')
    return { reason: 'no-first-byte', message: 'no byte from the proxies before the deadline share' };
  if (stopReason) return { reason: stopReason, message: `object larger than ${maxObjectBytes} bytes` };
  if (e instanceof Failure) return { reason: e.reason, message: e.message };
  const message = e instanceof Error ? e.message : String(e);
  if (message.includes('codec-unavailable')) return { reason: 'codec-unavailable', message };
  if (message.includes('range not satisfiable')) return { reason: 'range-unsatisfiable', message };
  if (e instanceof ClientError) {
    const cause = origoCause(e.code, e.message);
    // Counted as origo-unreachable (it is, from the page's side); the cause says which way.
    const reason = e.code === 'origo-down' ? 'origo-unreachable' : e.code;
    return cause ? { reason, message, cause } : { reason, message };
  }
  return { reason: 'internal', message };
}
