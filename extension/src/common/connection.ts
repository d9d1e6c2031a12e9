/**
 * "Test connection" (popup and options page): does origo answer at the configured URL, how many
 * proxies does it offer for the configured mode and N, and does the first of them answer HTTP?
 * Checked the way a download starts (an origo session: WebSocket, hello, welcome, a proxy
 * request), each step bounded, before any video plays. The proxy check is one credential-less
 * `GET /livez` in no-cors mode: an opaque answer proves the proxy is reachable over HTTP, not
 * that WebRTC or QUIC to it will work.
 */
import type { ProxyInfo } from '@mutp/shared';
import { ClientError, Clock, OrigoSession, WebSocketLike } from '@mutp/shared/client';
import { origoUrlList, origoUrlProblem, Settings } from './settings';

export interface ConnectionCheckDeps {
  webSocket: (url: string) => WebSocketLike;
  clock: Clock;
  /** Resolves when the URL answered (any status, opaque included), rejects on a network error or `signal`. */
  fetchNoCors: (url: string, signal: AbortSignal) => Promise<unknown>;
  /** Wall clock, ms since the epoch (when the check ran). */
  wallNow: () => number;
}

export interface ConnectionReport {
  /** ms since the epoch. */
  at: number;
  /** The origo URL that answered, or the last one tried. */
  origoUrl: string;
  origo: 'reachable' | 'unreachable' | 'refused-url';
  /** Proxies origo offered (asked for `asked`), when it answered. */
  offered?: number;
  asked: number;
  mode: string;
  proxy?: { name: string; reachable: boolean; detail?: string };
  /** The failure in words, when origo did not answer. */
  detail?: string;
  ms: number;
}

export const ORIGO_CHECK_TIMEOUT_MS = 3000;
export const PROXY_CHECK_TIMEOUT_MS = 2000;

async function probeProxy(
  proxy: ProxyInfo,
  deps: ConnectionCheckDeps,
): Promise<NonNullable<ConnectionReport['proxy']>> {
  const controller = new AbortController();
  const cancel = deps.clock.setTimer(PROXY_CHECK_TIMEOUT_MS, () => controller.abort());
  try {
    await deps.fetchNoCors(new URL('/livez', proxy.httpUrl).href, controller.signal);
    return { name: proxy.name || proxy.proxyId, reachable: true };
  } catch (e) {
    const detail = controller.signal.aborted
      ? `no HTTP answer within ${PROXY_CHECK_TIMEOUT_MS} ms`
      : `HTTP request failed (${e instanceof Error ? e.message : String(e)})`;
    return { name: proxy.name || proxy.proxyId, reachable: false, detail };
  } finally {
    cancel();
  }
}

/** Checks origo (each configured instance until one answers) and one proxy it offers. Never rejects. */
export async function checkConnection(settings: Settings, deps: ConnectionCheckDeps): Promise<ConnectionReport> {
  const started = deps.clock.now();
  const mode = settings.mode === 'http' ? 'uncoded' : settings.mode;
  const base = { at: deps.wallNow(), asked: settings.proxies, mode: settings.mode };
  const done = (r: Omit<ConnectionReport, 'at' | 'asked' | 'mode' | 'ms'>): ConnectionReport => ({
    ...base,
    ...r,
    ms: Math.round(deps.clock.now() - started),
  });
  const problem = origoUrlProblem(settings.origoUrl);
  if (problem !== undefined) return done({ origoUrl: settings.origoUrl, origo: 'refused-url', detail: problem });
  let last = { origoUrl: settings.origoUrl, detail: 'no origo URL' };
  for (const url of origoUrlList(settings.origoUrl)) {
    const session = new OrigoSession(url, deps.webSocket, deps.clock, ORIGO_CHECK_TIMEOUT_MS);
    try {
      await session.connect();
      const proxies = await session.requestProxies(settings.proxies, mode, [], ORIGO_CHECK_TIMEOUT_MS);
      session.close('connection check done');
      const proxy = proxies[0] ? await probeProxy(proxies[0], deps) : undefined;
      return done({ origoUrl: url, origo: 'reachable', offered: proxies.length, ...(proxy ? { proxy } : {}) });
    } catch (e) {
      session.close('connection check failed');
      const message = e instanceof Error ? e.message : String(e);
      const detail = e instanceof ClientError ? message.replace(`${e.code}: `, '') : message;
      last = { origoUrl: url, detail };
    }
  }
  return done({ ...last, origo: 'unreachable' });
}
