/**
 * Graceful drain (SIGTERM): the proxy takes no new work and waits for the transfers under way,
 * up to a deadline. Every transfer, MUTP or Parallel HTTP, holds a slot of the proxy's one
 * Admission, so a draining Admission refuses both kinds alike (a REQUEST is answered with ERROR
 * overloaded and this reason, /v1/http with 503) and its count of slots says when all are done.
 */
import { Admission, type AdmissionResult } from '@mutp/shared';

export const DRAINING_REASON = 'proxy draining: shutting down, use another source';

/** How long a drain waits for active transfers by default (--drain-timeout-ms). */
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;

export class DrainableAdmission extends Admission {
  private closedToNew = false;

  get draining(): boolean {
    return this.closedToNew;
  }

  /** From now on every new slot is refused; granted ones run to their end. */
  startDraining(): void {
    this.closedToNew = true;
  }

  override tryAcquire(clientKey: string, bytes = 0, networkKey = clientKey): AdmissionResult {
    if (this.closedToNew) return { ok: false, reason: DRAINING_REASON };
    return super.tryAcquire(clientKey, bytes, networkKey);
  }
}

/**
 * Resolves with 0 once no transfer holds a slot, or after `timeoutMs` with the number still
 * active (they are cut by the close that follows). Polled: slots have no events, and a drain
 * lasting seconds does not need better than `pollMs`.
 */
export function transfersDone(admission: Admission, timeoutMs: number, pollMs = 50): Promise<number> {
  return new Promise((resolve) => {
    const deadline = performance.now() + timeoutMs;
    const check = () => {
      const active = admission.activeTransfers;
      if (active === 0 || performance.now() >= deadline) {
        clearInterval(timer);
        resolve(active);
      }
    };
    const timer = setInterval(check, pollMs);
    check();
  });
}
