/**
 * The downloader's limits for one request, derived from the hook's deadline for it: each stage
 * must give up (with its own reason) before the hook does, or the page sees only 'timeout' and the
 * segment waits the whole deadline before it goes to the network. The stages run one after the
 * other on a cold start (origo connection and welcome, origo's answer to the proxy request,
 * proxy connections), so their shares add up to less than the first-byte limit, which itself
 * leaves the end of the deadline for the transfer.
 */

/** Deadlines never go below this, so the first segment has time to connect to origo and the proxies. */
export const MIN_DEADLINE_MS = 5000;

/**
 * The hook's deadline for a request: 2× the segment's duration when the manifest gives it, within
 * [MIN_DEADLINE_MS, configured]; the configured one otherwise. The content script works out the
 * same value for the downloader (it does not take the page's word for it).
 */
export function hookDeadline(configuredMs: number, durationS: number | undefined): number {
  if (durationS === undefined || !Number.isFinite(durationS)) return configuredMs;
  return Math.min(configuredMs, Math.max(MIN_DEADLINE_MS, 2000 * durationS));
}

/** Shares of the deadline. */
export const ORIGO_SHARE = 0.2;
/**
 * origo's limit never exceeds this: a hung origo costs the first segments this much before they
 * go to the network (then origo is in back-off), and a player starts from a buffer of a few
 * seconds at most. An origo that needs longer than a second to welcome a client is treated as down.
 */
export const ORIGO_MAX_MS = 1000;
export const PROXY_CONNECT_SHARE = 0.35;
export const FIRST_BYTE_SHARE = 0.8;

export interface RequestLimits {
  /** origo: TCP + WebSocket handshake + welcome, and again for its answer to a proxy request. */
  origoMs: number;
  /** Each proxy connection (WebRTC through origo's signalling). */
  proxyConnectMs: number;
  /** From the page's request to the first byte of the object from the proxies. */
  firstByteMs: number;
}

export function limitsFor(deadlineMs: number): RequestLimits {
  const d = Number.isFinite(deadlineMs) && deadlineMs > 0 ? deadlineMs : 10_000;
  return {
    origoMs: Math.max(1, Math.floor(Math.min(d * ORIGO_SHARE, ORIGO_MAX_MS))),
    proxyConnectMs: Math.max(1, Math.floor(d * PROXY_CONNECT_SHARE)),
    firstByteMs: Math.max(1, Math.floor(d * FIRST_BYTE_SHARE)),
  };
}

/**
 * A short name for why origo could not be used, from a client error's message (counted by the
 * hook, shown in the popup): 'origo-down' while in back-off, else how the connection failed.
 */
export function origoCause(code: string, message: string): string | undefined {
  if (code === 'origo-down') return 'origo-down';
  if (code !== 'origo-unreachable') return undefined;
  if (message.includes('handshake timed out')) return 'handshake-timeout';
  if (message.includes('no welcome')) return 'no-welcome';
  if (message.includes('connection refused or failed')) return 'refused';
  if (message.includes('closed before the welcome')) return 'closed-before-welcome';
  if (message.includes('did not answer a proxy request')) return 'no-answer';
  if (message.includes('was lost')) return 'lost';
  if (message.includes('ws://')) return 'insecure';
  return 'other';
}
