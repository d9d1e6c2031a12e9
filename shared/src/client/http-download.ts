/**
 * The Parallel HTTP baseline (the MUTP paper's): the same object requested from every proxy's
 * HTTP endpoint at once; the first complete response wins and the others are aborted.
 */
import { ProxyInfo } from '../signalling';
import { ClientError } from './errors';
import { Clock, FetchLike } from './host';
import { SourceShare } from './download';

export interface HttpDownloadResult {
  object: Uint8Array;
  mode: 'http';
  startedAt: number;
  durationMs: number;
  goodputBps: number;
  /** Bytes of the winning response / all bytes received from every proxy until then. */
  normalizedGoodput: number;
  sources: Pick<SourceShare, 'proxyId' | 'name' | 'bytes' | 'share'>[];
  contentType: string | null;
}

/** The proxy endpoint serving `url` (proxy/src/http-baseline.ts). */
export function baselineUrl(proxy: ProxyInfo, url: string): string {
  return `${proxy.httpUrl.replace(/\/+$/, '')}/v1/http?url=${encodeURIComponent(url)}`;
}

export async function runHttpDownload(
  proxies: ProxyInfo[],
  url: string,
  fetch: FetchLike,
  clock: Clock,
  /** token: origo's client token, sent as `Authorization: Bearer` (the proxies require it). */
  options: { signal?: AbortSignal; maxBytes: number; token?: string },
): Promise<HttpDownloadResult> {
  const startedAt = clock.now();
  const controllers = proxies.map(() => new AbortController());
  const received = proxies.map(() => 0);
  const abortAll = () => controllers.forEach((c) => c.abort());
  options.signal?.addEventListener('abort', abortAll);
  const errors: string[] = [];

  const fetchOne = async (proxy: ProxyInfo, i: number) => {
    const headers: Record<string, string> = options.token ? { authorization: `Bearer ${options.token}` } : {};
    const response = await fetch(baselineUrl(proxy, url), { signal: controllers[i].signal, headers });
    if (!response.ok || !response.body) throw new Error(`${proxy.name}: HTTP ${response.status}`);
    const declared = Number(response.headers.get('content-length') ?? NaN);
    if (declared > options.maxBytes) throw new Error(`${proxy.name}: ${declared} bytes exceeds ${options.maxBytes}`);
    const chunks: Uint8Array[] = [];
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      received[i] += value.length;
      if (received[i] > options.maxBytes) throw new Error(`${proxy.name}: more than ${options.maxBytes} bytes`);
      chunks.push(value);
    }
    if (Number.isFinite(declared) && declared !== received[i])
      throw new Error(`${proxy.name}: ${received[i]} of ${declared} bytes`);
    const object = new Uint8Array(received[i]);
    let offset = 0;
    for (const c of chunks) {
      object.set(c, offset);
      offset += c.length;
    }
    return { object, index: i, contentType: response.headers.get('content-type') };
  };

  try {
    const winner = await Promise.any(
      proxies.map((p, i) =>
        fetchOne(p, i).catch((e: unknown) => {
          errors.push(e instanceof Error ? e.message : String(e));
          throw e;
        }),
      ),
    );
    const durationMs = Math.max(clock.now() - startedAt, 1e-3);
    const total = received.reduce((a, b) => a + b, 0);
    return {
      object: winner.object,
      mode: 'http',
      startedAt,
      durationMs,
      goodputBps: (winner.object.length * 1000) / durationMs,
      normalizedGoodput: total > 0 ? winner.object.length / total : 1,
      sources: proxies.map((p, i) => ({
        proxyId: p.proxyId,
        name: p.name,
        bytes: received[i],
        share: i === winner.index ? 1 : 0,
      })),
      contentType: winner.contentType,
    };
  } catch {
    if (options.signal?.aborted) throw new ClientError('cancelled', 'aborted');
    throw new ClientError('http-failed', errors.join('; ') || 'no proxy answered');
  } finally {
    abortAll();
    options.signal?.removeEventListener('abort', abortAll);
  }
}
