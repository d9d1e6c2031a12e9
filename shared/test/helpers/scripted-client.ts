/** Pieces of the scripted clients the staging and playback tests download through. */
import type { ProxyInfo, StagedAnswer } from '../../src';
import type { GetResult } from '../../src/client';

/** Every proxy named answers a hint "staged" (its origin fetch took `originMs`). */
export function stagedBy(proxies: readonly ProxyInfo[], originMs = 5): StagedAnswer[] {
  return proxies.map((p) => ({
    type: 'staged',
    requestId: 's',
    proxyId: p.proxyId,
    status: 'staged',
    originMs,
    cached: false,
    bytes: 10,
  }));
}

/** A download of `url` (its bytes are the URL) from `sources`. */
export function downloadedFrom(url: string, sources: GetResult['sources']): GetResult {
  return {
    object: new TextEncoder().encode(url),
    mode: 'rlnc',
    startedAt: 0,
    durationMs: 1,
    goodputBps: 1,
    normalizedGoodput: 1,
    sources,
  } as GetResult;
}
