/**
 * The page's fetch, wrapped. A request the hook does not serve goes to the native fetch with the
 * page's own arguments; manifests among the responses are read (from a clone) before the page
 * gets them, so their segments are known by the time the player asks for them. An intercepted
 * request resolves with a real `Response` (200, or 206 with Content-Range; Content-Type,
 * Content-Length; `url`, `type`, `redirected` as the network would give them) and honours the
 * AbortSignal: rejection with the signal's reason (an AbortError DOMException) before the answer,
 * an errored body stream after it. A media request made before the hook has its settings waits
 * for them (settings-wait.ts), its signal still honoured.
 */
import { GetSuccess } from '../common/messages';
import { Decision, RequestFacts } from './decide';
import { HookCore, InterceptDecision, LaterDecision, Ruling } from './core';
import { PageGlobals } from './globals';

/** How long a manifest response is held back while its body is read and parsed. */
const MANIFEST_READ_WAIT_MS = 3000;

interface FetchFacts extends RequestFacts {
  signal?: AbortSignal | null;
}

function factsOf(g: PageGlobals, input: unknown, init: RequestInit | undefined): FetchFacts {
  const isRequest = input instanceof g.Request;
  const req = isRequest ? (input as Request) : undefined;
  const url = req ? req.url : String(input);
  const headerSource = init?.headers !== undefined ? init.headers : req?.headers;
  const headers: [string, string][] = [];
  if (headerSource !== undefined) new g.Headers(headerSource).forEach((value, name) => headers.push([name, value]));
  const body = init && 'body' in init ? init.body : req?.body;
  return {
    api: 'fetch',
    method: init?.method ?? req?.method ?? 'GET',
    url,
    headers,
    baseUrl: g.baseUrl(),
    pageOrigin: g.origin(),
    credentials: init?.credentials ?? req?.credentials ?? 'same-origin',
    mode: init?.mode ?? req?.mode ?? 'cors',
    integrity: init?.integrity ?? req?.integrity ?? '',
    cache: init?.cache ?? req?.cache ?? 'default',
    redirect: init?.redirect ?? req?.redirect ?? 'follow',
    hasBody: body !== undefined && body !== null,
    signal: init && 'signal' in init ? init.signal : req?.signal,
  };
}

function abortReason(g: PageGlobals, signal: AbortSignal): unknown {
  return signal.reason ?? new g.DOMException('signal is aborted without reason', 'AbortError');
}

/** Returns the function that replaces `window.fetch`. */
export function createFetch(core: HookCore, g: PageGlobals): typeof fetch {
  const nativeFetch = g.fetch;
  const callNative = (args: unknown[]): Promise<Response> => Reflect.apply(nativeFetch, g.window, args);

  /** Native fetch; a manifest's body is parsed before the page gets the response. */
  function passThrough(args: unknown[]): Promise<Response> {
    const promise = callNative(args);
    return promise.then((response) => {
      try {
        if (!response.ok || !core.mightBeManifest(response.url, response.headers.get('content-type'))) return response;
        const reading = response
          .clone()
          .text()
          .then((text) => core.observeManifest(response.url, text));
        return new Promise<Response>((resolve) => {
          const timer = g.setTimeout(() => resolve(response), MANIFEST_READ_WAIT_MS);
          const done = () => {
            g.clearTimeout(timer);
            resolve(response);
          };
          reading.then(done, done);
        });
      } catch {
        return response;
      }
    });
  }

  function makeResponse(a: GetSuccess, d: InterceptDecision, signal: AbortSignal | null | undefined): Response {
    const bytes = new Uint8Array(a.body);
    let sent = false;
    let finished = false;
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    const onAbort = () => {
      if (!finished && controller) {
        finished = true;
        try {
          controller.error(abortReason(g, signal!));
        } catch {
          // already closed
        }
      }
    };
    const body = new g.ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      },
      pull(c) {
        if (!sent) {
          sent = true;
          if (bytes.length > 0) {
            c.enqueue(bytes);
            return;
          }
        }
        finished = true;
        signal?.removeEventListener('abort', onAbort);
        c.close();
      },
      cancel() {
        finished = true;
        signal?.removeEventListener('abort', onAbort);
      },
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    const headers = new g.Headers({ 'content-type': a.contentType, 'content-length': String(bytes.length) });
    if (a.status === 206 && a.contentRange) headers.set('content-range', a.contentRange);
    const response = new g.Response(body, {
      status: a.status,
      statusText: a.status === 206 ? 'Partial Content' : 'OK',
      headers,
    });
    let type: ResponseType = 'cors';
    try {
      if (new g.URL(d.url).origin === g.origin()) type = 'basic';
    } catch {
      // keep 'cors'
    }
    const nativeClone = g.Response.prototype.clone;
    const dress = (r: Response): Response => {
      Object.defineProperties(r, {
        url: { value: d.url, enumerable: true, configurable: true },
        redirected: { value: false, enumerable: true, configurable: true },
        type: { value: type, enumerable: true, configurable: true },
        // A clone keeps what the network would have given it.
        clone: { value: () => dress(nativeClone.call(r)), writable: true, configurable: true },
      });
      return r;
    };
    return dress(response);
  }

  function emulate(args: unknown[], facts: FetchFacts, d: InterceptDecision): Promise<Response> {
    const signal = facts.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      if (signal?.aborted) {
        core.countAbortedEarly();
        reject(abortReason(g, signal));
        return;
      }
      const pending = core.serve(d);
      const onAbort = () => {
        pending.cancel();
        reject(abortReason(g, signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const fallback = () => resolve(callNative(args));
      pending.promise.then(
        (outcome) => {
          signal?.removeEventListener('abort', onAbort);
          if (outcome.kind === 'cancelled') return;
          if (outcome.kind === 'fallback') return fallback();
          try {
            resolve(makeResponse(outcome.answer, d, signal));
          } catch {
            core.countFallback('internal');
            fallback();
          }
        },
        () => {
          signal?.removeEventListener('abort', onAbort);
          fallback();
        },
      );
    });
  }

  function proceed(args: unknown[], facts: FetchFacts, d: Decision): Promise<Response> {
    return d.intercept ? emulate(args, facts, d) : passThrough(args);
  }

  /** A media request made before the settings came: goes on when they come (or the wait ends). */
  function afterSettings(args: unknown[], facts: FetchFacts, later: LaterDecision): Promise<Response> {
    const signal = facts.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      const onAbort = () => {
        later.cancel();
        reject(abortReason(g, signal!));
      };
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle = (go: () => Promise<Response>) => {
        signal?.removeEventListener('abort', onAbort);
        try {
          resolve(go());
        } catch (error) {
          reject(error);
        }
      };
      later.promise.then(
        (d) => settle(() => proceed(args, facts, d)),
        () => settle(() => callNative(args)),
      );
    });
  }

  const hooked = function fetch(...args: unknown[]): Promise<Response> {
    let facts: FetchFacts;
    let ruling: Ruling;
    try {
      facts = factsOf(g, args[0], args[1] as RequestInit | undefined);
      ruling = core.decideOrWait(facts);
    } catch {
      // Arguments our code cannot read: the native fetch judges them (and throws what it throws).
      return callNative(args);
    }
    if ('later' in ruling) return afterSettings(args, facts, ruling.later);
    return proceed(args, facts, ruling.now);
  };
  return hooked as typeof fetch;
}
