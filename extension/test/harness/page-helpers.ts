/**
 * Helpers the emulation test calls in the page (window.__t): run an XHR or a fetch and report
 * everything a player could observe, in plain JSON.
 */
import { objectFor } from './objects';

export interface XhrOptions {
  url: string;
  method?: string;
  responseType?: XMLHttpRequestResponseType;
  headers?: Record<string, string>;
  timeout?: number;
  withCredentials?: boolean;
  /** abort() this many ms after send (0: right after send). */
  abortAfterMs?: number;
  /** Wait this long after the last event for anything that should not come. */
  settleMs?: number;
  /** Use onxxx properties instead of addEventListener. */
  useProperties?: boolean;
}

/** Whether `bytes` are the object at `url` (from `offset`). */
function matches(url: string, bytes: Uint8Array, offset = 0): boolean {
  const obj = objectFor(new URL(url, location.href).pathname);
  if (!obj || offset + bytes.length > obj.bytes.length) return false;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] !== obj.bytes[offset + i]) return false;
  return true;
}

const EVENTS = ['readystatechange', 'loadstart', 'progress', 'load', 'error', 'abort', 'timeout', 'loadend'] as const;

async function summarize(response: unknown, url: string, offset: number) {
  if (response instanceof ArrayBuffer) {
    const b = new Uint8Array(response);
    return { kind: 'arraybuffer', length: b.length, matches: matches(url, b, offset) };
  }
  if (response instanceof Blob) {
    const b = new Uint8Array(await response.arrayBuffer());
    return { kind: 'blob', type: response.type, length: b.length, matches: matches(url, b, offset) };
  }
  if (typeof response === 'string') return { kind: 'string', value: response };
  return { kind: typeof response, value: response === undefined ? null : JSON.parse(JSON.stringify(response)) };
}

export function runXhr(o: XhrOptions): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const x = new XMLHttpRequest();
    const events: string[] = [];
    const record = (e: Event) => {
      const p = e as ProgressEvent;
      events.push(
        e.type === 'readystatechange'
          ? `rs${x.readyState}`
          : `${e.type}(${p.loaded}/${p.total}${p.lengthComputable ? '' : '?'})`,
      );
    };
    for (const type of EVENTS) {
      if (o.useProperties) (x as unknown as Record<string, unknown>)[`on${type}`] = record;
      else x.addEventListener(type, record);
    }
    x.open(o.method ?? 'GET', o.url);
    events.push(`opened:${x.readyState}`);
    if (o.responseType !== undefined) x.responseType = o.responseType;
    for (const [k, v] of Object.entries(o.headers ?? {})) x.setRequestHeader(k, v);
    if (o.timeout !== undefined) x.timeout = o.timeout;
    if (o.withCredentials) x.withCredentials = true;
    let finished = false;
    const finish = async () => {
      if (finished) return;
      finished = true;
      await new Promise((r) => setTimeout(r, o.settleMs ?? 50));
      const cr = x.getResponseHeader('content-range');
      const offset = cr ? Number(/bytes (\d+)-/.exec(cr)?.[1] ?? 0) : 0;
      let responseText: string | null = null;
      try {
        responseText = x.responseText;
      } catch (e) {
        responseText = `throws ${(e as DOMException).name}`;
      }
      resolve({
        events,
        readyState: x.readyState,
        status: x.status,
        statusText: x.statusText,
        responseURL: x.responseURL,
        allHeaders: x.getAllResponseHeaders(),
        contentType: x.getResponseHeader('Content-Type'),
        contentLength: x.getResponseHeader('content-length'),
        contentRange: cr,
        from: x.getResponseHeader('x-from'),
        response: await summarize(x.response, o.url, offset),
        responseText:
          x.responseType === '' || x.responseType === 'text' || responseText?.startsWith('throws')
            ? responseText
            : '(binary)',
        timeout: x.timeout,
      });
    };
    x.addEventListener('loadend', () => void finish());
    x.send();
    events.push(`sent:${x.readyState}`);
    if (o.abortAfterMs !== undefined) {
      const abort = () => {
        x.abort();
        events.push(`aborted:${x.readyState}`);
        void finish();
      };
      if (o.abortAfterMs === 0) abort();
      else setTimeout(abort, o.abortAfterMs);
    }
  });
}

export interface FetchOptions {
  url: string;
  init?: RequestInit;
  /** 'before': abort before calling fetch; a number: abort after that many ms. */
  abort?: 'before' | number;
  read?: 'arrayBuffer' | 'text' | 'json' | 'blob';
  /** Build a Request object instead of passing the URL and init. */
  asRequest?: boolean;
}

export async function runFetch(o: FetchOptions): Promise<Record<string, unknown>> {
  const controller = new AbortController();
  const init: RequestInit = { ...o.init, signal: controller.signal };
  if (o.abort === 'before') controller.abort();
  else if (typeof o.abort === 'number') setTimeout(() => controller.abort(), o.abort);
  try {
    const response = await (o.asRequest ? fetch(new Request(o.url, init)) : fetch(o.url, init));
    const headers: Record<string, string> = {};
    response.headers.forEach((v, k) => (headers[k] = v));
    const cr = response.headers.get('content-range');
    const offset = cr ? Number(/bytes (\d+)-/.exec(cr)?.[1] ?? 0) : 0;
    const read = o.read ?? 'arrayBuffer';
    let body: unknown;
    try {
      body = await summarize(await response[read](), o.url, offset);
    } catch (e) {
      body = { error: (e as Error).name };
    }
    return {
      ok: response.ok,
      status: response.status,
      statusText: response.statusText,
      url: response.url,
      type: response.type,
      redirected: response.redirected,
      isResponse: response instanceof Response,
      headers,
      body,
    };
  } catch (e) {
    return { rejected: true, name: (e as Error).name, isDomException: e instanceof DOMException };
  }
}

export function syncXhr(url: string): { status: number; from: string | null } {
  const x = new XMLHttpRequest();
  x.open('GET', url, false);
  x.send();
  return { status: x.status, from: x.getResponseHeader('x-from') };
}
