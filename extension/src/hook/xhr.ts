/**
 * The page's XMLHttpRequest, wrapped. Instances are real XHRs (a subclass of the page's own
 * constructor): open() and setRequestHeader() always reach the native object, so a request the
 * hook does not serve — or one MUTP could not answer — is sent by the native send() exactly as the
 * page made it. An intercepted request is emulated on the same object: readyState 1→2→3→4 with
 * readystatechange, loadstart/progress/load/loadend ProgressEvents, status, headers, responseURL,
 * every responseType players use, abort(), timeout/ontimeout, following the XHR standard's order
 * of events. Event handler properties (onload, ...) fire for these events as for native ones.
 */
import { Decision, RequestFacts } from './decide';
import { HookCore, InterceptDecision, Pending } from './core';
import { PageGlobals } from './globals';
import { GetSuccess } from '../common/messages';

type ReadyState = 0 | 1 | 2 | 3 | 4;

interface Emulation {
  readyState: ReadyState;
  status: number;
  statusText: string;
  responseURL: string;
  /** Lower-case name → value. */
  headers: [string, string][];
  body?: ArrayBuffer;
  contentType: string;
  /** A network-error response (abort, timeout, error). */
  failed: boolean;
  sentAt: number;
  pending?: Pending;
  timer?: unknown;
  cache: { text?: string; json?: unknown; jsonDone?: boolean; blob?: Blob };
}

interface XhrState {
  phase: 'idle' | 'opened' | 'native' | 'emulated';
  method: string;
  url: string;
  async: boolean;
  hasUserInfo: boolean;
  headers: [string, string][];
  mimeOverride?: string;
  /** The timeout the page set (the native one may be shortened after a fallback). */
  pageTimeout?: number;
  /** Bumped whenever the current request cycle ends (open, abort, timeout): stale callbacks check it. */
  gen: number;
  emu?: Emulation;
  /** Drops the native loadstart when a fallback sends natively (ours already fired). */
  suppressLoadstart: boolean;
}

function descriptor(proto: object, name: string): PropertyDescriptor {
  for (let p: object | null = proto; p; p = Object.getPrototypeOf(p)) {
    const d = Object.getOwnPropertyDescriptor(p, name);
    if (d) return d;
  }
  throw new Error(`XMLHttpRequest.${name} not found`);
}

const STATUS_TEXT: Record<number, string> = { 200: 'OK', 206: 'Partial Content' };

/** Returns the subclass that replaces `window.XMLHttpRequest`. */
export function createXhrClass(core: HookCore, g: PageGlobals): typeof XMLHttpRequest {
  const Native = g.XMLHttpRequest;
  const proto = Native.prototype;
  const nativeOpen = proto.open as (...args: unknown[]) => void;
  const nativeSend = proto.send;
  const nativeAbort = proto.abort;
  const nativeSetRequestHeader = proto.setRequestHeader;
  const nativeGetResponseHeader = proto.getResponseHeader;
  const nativeGetAllResponseHeaders = proto.getAllResponseHeaders;
  const nativeOverrideMimeType = proto.overrideMimeType;
  const get = (name: string) => descriptor(proto, name).get!;
  const nativeReadyState = get('readyState');
  const nativeStatus = get('status');
  const nativeStatusText = get('statusText');
  const nativeResponseURL = get('responseURL');
  const nativeResponse = get('response');
  const nativeResponseText = get('responseText');
  const nativeResponseXML = get('responseXML');
  const nativeResponseType = descriptor(proto, 'responseType');
  const nativeTimeout = descriptor(proto, 'timeout');
  const nativeWithCredentials = get('withCredentials');
  const states = new WeakMap<object, XhrState>();

  const invalidState = (message: string) => new g.DOMException(message, 'InvalidStateError');
  const fire = (target: XMLHttpRequest, type: string) => g.dispatchEvent.call(target, new g.Event(type));
  const fireProgress = (target: XMLHttpRequest, type: string, loaded: number, total: number, computable: boolean) =>
    g.dispatchEvent.call(target, new g.ProgressEvent(type, { lengthComputable: computable, loaded, total }));
  /** The emulation, when the current request cycle is emulated. */
  const emulated = (x: object): Emulation | undefined => {
    const st = states.get(x);
    return st?.phase === 'emulated' ? st.emu : undefined;
  };

  /** Native events of the page's XHR that we observe: manifests arriving. */
  function onNativeDone(x: XMLHttpRequest, st: XhrState): void {
    if (st.phase !== 'native' || nativeReadyState.call(x) !== 4) return;
    try {
      const status = nativeStatus.call(x) as number;
      if (status < 200 || status >= 300) return;
      const url = (nativeResponseURL.call(x) as string) || st.url;
      const type = nativeResponseType.get!.call(x) as string;
      const contentType = nativeGetResponseHeader.call(x, 'content-type');
      if (type === '' || type === 'text') {
        core.observeManifest(url, nativeResponseText.call(x) as string);
      } else if (type === 'arraybuffer' && core.mightBeManifest(url, contentType)) {
        const buf = nativeResponse.call(x) as ArrayBuffer | null;
        if (buf) core.observeManifest(url, new g.TextDecoder().decode(buf));
      }
    } catch {
      // observation only
    }
  }

  function factsOf(x: XMLHttpRequest, st: XhrState, body: unknown): RequestFacts {
    const method = st.method.toUpperCase();
    return {
      api: 'xhr',
      method,
      url: st.url,
      headers: st.headers,
      baseUrl: g.baseUrl(),
      pageOrigin: g.origin(),
      sync: !st.async,
      withCredentials: nativeWithCredentials.call(x) as boolean,
      hasUserInfo: st.hasUserInfo,
      responseType: nativeResponseType.get!.call(x) as string,
      hasBody: body !== undefined && body !== null && method !== 'GET' && method !== 'HEAD',
    };
  }

  function pageTimeout(x: XMLHttpRequest, st: XhrState): number {
    return st.pageTimeout ?? (nativeTimeout.get!.call(x) as number);
  }

  function armTimeout(x: XMLHttpRequest, st: XhrState, e: Emulation): void {
    if (e.timer !== undefined) g.clearTimeout(e.timer);
    e.timer = undefined;
    const ms = pageTimeout(x, st);
    if (!(ms > 0) || e.readyState === 4) return;
    const gen = st.gen;
    e.timer = g.setTimeout(
      () => {
        if (st.gen !== gen || st.emu !== e) return;
        st.gen++;
        e.pending?.cancel();
        requestError(x, st, e, 'timeout');
      },
      Math.max(0, ms - (g.now() - e.sentAt)),
    );
  }

  /** The standard's "request error steps": state DONE, readystatechange, `type`, loadend. */
  function requestError(x: XMLHttpRequest, st: XhrState, e: Emulation, type: 'abort' | 'timeout' | 'error'): void {
    if (e.timer !== undefined) g.clearTimeout(e.timer);
    e.timer = undefined;
    e.readyState = 4;
    e.failed = true;
    e.status = 0;
    e.statusText = '';
    e.responseURL = '';
    e.headers = [];
    e.body = undefined;
    e.cache = {};
    const gen = st.gen;
    fire(x, 'readystatechange');
    if (st.gen !== gen || st.emu !== e) return;
    fireProgress(x, type, 0, 0, false);
    if (st.gen !== gen || st.emu !== e) return;
    fireProgress(x, 'loadend', 0, 0, false);
  }

  function deliver(x: XMLHttpRequest, st: XhrState, e: Emulation, d: InterceptDecision, a: GetSuccess): void {
    const length = a.body.byteLength;
    e.status = a.status;
    e.statusText = STATUS_TEXT[a.status] ?? '';
    e.responseURL = d.url;
    e.contentType = a.contentType;
    e.headers = [
      ['content-length', String(length)],
      ['content-type', a.contentType],
    ];
    if (a.status === 206 && a.contentRange) e.headers.push(['content-range', a.contentRange]);
    e.headers.sort((p, q) => (p[0] < q[0] ? -1 : 1));
    e.body = a.body;
    const gen = st.gen;
    const current = () => st.gen === gen && st.emu === e;
    e.readyState = 2;
    fire(x, 'readystatechange');
    if (!current()) return;
    e.readyState = 3;
    fire(x, 'readystatechange');
    if (!current()) return;
    fireProgress(x, 'progress', length, length, true);
    if (!current()) return;
    e.readyState = 4;
    if (e.timer !== undefined) g.clearTimeout(e.timer);
    e.timer = undefined;
    fire(x, 'readystatechange');
    if (!current()) return;
    fireProgress(x, 'load', length, length, true);
    if (!current()) return;
    fireProgress(x, 'loadend', length, length, true);
  }

  /** MUTP did not answer: send the request the page made on the native object, as if nothing happened. */
  function fallBack(x: XMLHttpRequest, st: XhrState, e: Emulation, body: unknown): void {
    if (e.timer !== undefined) g.clearTimeout(e.timer);
    st.phase = 'native';
    st.emu = undefined;
    const ms = pageTimeout(x, st);
    if (ms > 0) {
      // The page's timeout counts from its send(): give the native request what is left of it.
      try {
        nativeTimeout.set!.call(x, Math.max(1, Math.round(ms - (g.now() - e.sentAt))));
      } catch {
        // keep the page's own value
      }
    }
    st.suppressLoadstart = true;
    try {
      nativeSend.call(x, body as XMLHttpRequestBodyInit | null);
    } catch {
      // Should not happen (the native object is OPENED and unsent): end the request as a network error.
      st.phase = 'emulated';
      st.emu = e;
      requestError(x, st, e, 'error');
    } finally {
      st.suppressLoadstart = false;
    }
  }

  function startEmulation(x: XMLHttpRequest, st: XhrState, d: InterceptDecision, body: unknown): void {
    st.phase = 'emulated';
    const gen = ++st.gen;
    const e: Emulation = {
      readyState: 1,
      status: 0,
      statusText: '',
      responseURL: '',
      headers: [],
      contentType: '',
      failed: false,
      sentAt: g.now(),
      cache: {},
    };
    st.emu = e;
    fireProgress(x, 'loadstart', 0, 0, false);
    if (st.gen !== gen) return; // aborted or reopened from a loadstart handler
    const pending = core.serve(d);
    e.pending = pending;
    armTimeout(x, st, e);
    pending.promise.then(
      (outcome) => {
        if (st.gen !== gen || st.emu !== e) return;
        if (outcome.kind === 'served') {
          try {
            deliver(x, st, e, d, outcome.answer);
          } catch {
            // a page handler threw: as with native events, that is the page's business
          }
        } else if (outcome.kind === 'fallback') fallBack(x, st, e, body);
      },
      () => {
        if (st.gen !== gen || st.emu !== e) return;
        core.countFallback('internal');
        fallBack(x, st, e, body);
      },
    );
  }

  class HookedXMLHttpRequest extends Native {
    constructor() {
      super();
      const st: XhrState = {
        phase: 'idle',
        method: 'GET',
        url: '',
        async: true,
        hasUserInfo: false,
        headers: [],
        gen: 0,
        suppressLoadstart: false,
      };
      states.set(this, st);
      // Registered before anything the page adds, so these run first.
      g.addEventListener.call(this, 'loadstart', (event) => {
        if (st.suppressLoadstart) event.stopImmediatePropagation();
      });
      g.addEventListener.call(this, 'readystatechange', () => onNativeDone(this, st));
    }
  }
  const P = HookedXMLHttpRequest.prototype as unknown as XMLHttpRequest & Record<string, unknown>;

  const methods: Record<string, (this: XMLHttpRequest, ...args: never[]) => unknown> = {
    open(this: XMLHttpRequest, ...args: unknown[]) {
      const st = states.get(this);
      if (!st) return nativeOpen.apply(this, args);
      const before = { phase: st.phase, emu: st.emu };
      // Native open() fires readystatechange(1) synchronously: getters must already answer natively.
      st.phase = 'opened';
      st.emu = undefined;
      try {
        nativeOpen.apply(this, args);
      } catch (error) {
        st.phase = before.phase;
        st.emu = before.emu;
        throw error;
      }
      // open() ends any request in progress without events (the standard's "terminate").
      st.gen++;
      if (before.phase === 'emulated' && before.emu) {
        if (before.emu.timer !== undefined) g.clearTimeout(before.emu.timer);
        before.emu.pending?.cancel();
      }
      st.method = String(args[0]);
      st.url = String(args[1]);
      st.async = args.length < 3 ? true : Boolean(args[2]);
      st.hasUserInfo = (args[3] !== undefined && args[3] !== null) || (args[4] !== undefined && args[4] !== null);
      st.headers = [];
      st.mimeOverride = undefined;
      if (st.async && st.pageTimeout !== undefined && nativeTimeout.get!.call(this) !== st.pageTimeout) {
        // A fallback shortened the native timeout for the previous request: restore the page's.
        try {
          nativeTimeout.set!.call(this, st.pageTimeout);
        } catch {
          // keep it
        }
      }
    },

    setRequestHeader(this: XMLHttpRequest, name: string, value: string) {
      const st = states.get(this);
      if (st?.phase === 'emulated')
        throw invalidState("Failed to execute 'setRequestHeader': the object's state must be OPENED.");
      nativeSetRequestHeader.call(this, name, value);
      if (st?.phase === 'opened') st.headers.push([String(name), String(value)]);
    },

    send(this: XMLHttpRequest, body?: unknown) {
      const st = states.get(this);
      if (st?.phase === 'emulated') throw invalidState("Failed to execute 'send': the object's state must be OPENED.");
      if (!st || st.phase !== 'opened') return nativeSend.call(this, body as XMLHttpRequestBodyInit | null);
      let d: Decision;
      try {
        d = core.decide(factsOf(this, st, body));
      } catch {
        d = { intercept: false, media: false, reason: 'not-media' };
      }
      if (!d.intercept) {
        st.phase = 'native';
        return nativeSend.call(this, body as XMLHttpRequestBodyInit | null);
      }
      try {
        startEmulation(this, st, d, body);
      } catch {
        const phase = st.phase as XhrState['phase']; // startEmulation may have changed it
        if (phase === 'emulated' && st.emu && st.emu.readyState === 1 && !st.emu.pending) {
          core.countFallback('internal');
          fallBack(this, st, st.emu, body);
        }
      }
    },

    abort(this: XMLHttpRequest) {
      const st = states.get(this);
      const e = st?.phase === 'emulated' ? st.emu : undefined;
      if (!st || !e) return nativeAbort.call(this);
      st.gen++;
      if (e.timer !== undefined) g.clearTimeout(e.timer);
      e.timer = undefined;
      e.pending?.cancel();
      if (e.readyState >= 1 && e.readyState <= 3) requestError(this, st, e, 'abort');
      if (st.emu === e && e.readyState === 4) {
        e.readyState = 0;
        e.failed = true;
        e.status = 0;
        e.statusText = '';
        e.headers = [];
        e.body = undefined;
        e.cache = {};
      }
    },

    getResponseHeader(this: XMLHttpRequest, name: string) {
      const e = emulated(this);
      if (!e) return nativeGetResponseHeader.call(this, name);
      if (e.readyState < 2 || e.failed) return null;
      const key = String(name).toLowerCase();
      const found = e.headers.find(([n]) => n === key);
      return found ? found[1] : null;
    },

    getAllResponseHeaders(this: XMLHttpRequest) {
      const e = emulated(this);
      if (!e) return nativeGetAllResponseHeaders.call(this);
      if (e.readyState < 2 || e.failed) return '';
      return e.headers.map(([n, v]) => `${n}: ${v}\r\n`).join('');
    },

    overrideMimeType(this: XMLHttpRequest, mime: string) {
      const st = states.get(this);
      const e = emulated(this);
      if (e && e.readyState >= 3)
        throw invalidState("Failed to execute 'overrideMimeType': the object's state is LOADING or DONE.");
      nativeOverrideMimeType.call(this, mime);
      if (st) st.mimeOverride = String(mime);
    },
  };
  for (const [name, fn] of Object.entries(methods)) {
    Object.defineProperty(P, name, { value: fn, writable: true, enumerable: true, configurable: true });
  }

  const textOf = (st: XhrState, e: Emulation): string => {
    if (e.cache.text !== undefined) return e.cache.text;
    if (!e.body) return '';
    const type = st.mimeOverride ?? e.contentType;
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(type)?.[1];
    let decoder: TextDecoder;
    try {
      decoder = new g.TextDecoder(charset ?? 'utf-8');
    } catch {
      decoder = new g.TextDecoder('utf-8');
    }
    e.cache.text = decoder.decode(e.body);
    return e.cache.text;
  };

  const getters: Record<string, (this: XMLHttpRequest) => unknown> = {
    readyState() {
      const e = emulated(this);
      return e ? e.readyState : nativeReadyState.call(this);
    },
    status() {
      const e = emulated(this);
      return e ? e.status : nativeStatus.call(this);
    },
    statusText() {
      const e = emulated(this);
      return e ? e.statusText : nativeStatusText.call(this);
    },
    responseURL() {
      const e = emulated(this);
      return e ? e.responseURL : nativeResponseURL.call(this);
    },
    responseXML() {
      const e = emulated(this);
      if (!e) return nativeResponseXML.call(this);
      const type = nativeResponseType.get!.call(this) as string;
      if (type !== '' && type !== 'document') {
        throw invalidState(
          "Failed to read 'responseXML': the value is only accessible if responseType is '' or 'document'.",
        );
      }
      return null;
    },
    responseText() {
      const st = states.get(this);
      const e = emulated(this);
      if (!st || !e) return nativeResponseText.call(this);
      const type = nativeResponseType.get!.call(this) as string;
      if (type !== '' && type !== 'text') {
        throw invalidState(
          `Failed to read 'responseText': the value is only accessible if responseType is '' or 'text' (was '${type}').`,
        );
      }
      return e.readyState >= 3 && !e.failed ? textOf(st, e) : '';
    },
    response() {
      const st = states.get(this);
      const e = emulated(this);
      if (!st || !e) return nativeResponse.call(this);
      const type = nativeResponseType.get!.call(this) as string;
      if (type === '' || type === 'text') return e.readyState >= 3 && !e.failed ? textOf(st, e) : '';
      if (e.readyState !== 4 || e.failed || !e.body) return null;
      switch (type) {
        case 'arraybuffer':
          return e.body;
        case 'blob':
          return (e.cache.blob ??= new g.Blob([e.body], { type: st.mimeOverride ?? e.contentType }));
        case 'json':
          if (!e.cache.jsonDone) {
            e.cache.jsonDone = true;
            try {
              e.cache.json = JSON.parse(new g.TextDecoder('utf-8').decode(e.body));
            } catch {
              e.cache.json = null;
            }
          }
          return e.cache.json;
        default:
          return null;
      }
    },
  };
  for (const [name, fn] of Object.entries(getters)) {
    Object.defineProperty(P, name, { get: fn, enumerable: true, configurable: true });
  }

  Object.defineProperty(P, 'responseType', {
    get(this: XMLHttpRequest) {
      return nativeResponseType.get!.call(this);
    },
    set(this: XMLHttpRequest, value: string) {
      const e = emulated(this);
      if (e && e.readyState >= 3)
        throw invalidState("Failed to set 'responseType': the object's state is LOADING or DONE.");
      nativeResponseType.set!.call(this, value);
    },
    enumerable: true,
    configurable: true,
  });

  Object.defineProperty(P, 'timeout', {
    get(this: XMLHttpRequest) {
      const st = states.get(this);
      return st?.pageTimeout ?? nativeTimeout.get!.call(this);
    },
    set(this: XMLHttpRequest, value: number) {
      nativeTimeout.set!.call(this, value); // validates (sync requests) and converts
      const st = states.get(this);
      if (!st) return;
      st.pageTimeout = nativeTimeout.get!.call(this) as number;
      const e = st.phase === 'emulated' ? st.emu : undefined;
      if (e && e.readyState < 4) armTimeout(this, st, e);
    },
    enumerable: true,
    configurable: true,
  });

  Object.defineProperty(HookedXMLHttpRequest, 'name', { value: 'XMLHttpRequest' });
  return HookedXMLHttpRequest as unknown as typeof XMLHttpRequest;
}
