/**
 * The platform objects the hook uses, captured at document_start before any page script runs:
 * a page that later replaces `Response` or `setTimeout` does not change how the hook behaves.
 */
export interface PageGlobals {
  window: Window & typeof globalThis;
  XMLHttpRequest: typeof XMLHttpRequest;
  fetch: typeof fetch;
  Response: typeof Response;
  Headers: typeof Headers;
  Request: typeof Request;
  ReadableStream: typeof ReadableStream;
  Event: typeof Event;
  ProgressEvent: typeof ProgressEvent;
  DOMException: typeof DOMException;
  Blob: typeof Blob;
  TextDecoder: typeof TextDecoder;
  URL: typeof URL;
  setTimeout: (callback: () => void, ms: number) => unknown;
  clearTimeout: (handle: unknown) => void;
  now: () => number;
  addEventListener: EventTarget['addEventListener'];
  /** MessagePort.prototype.postMessage (a page patching the prototype later does not see our messages). */
  portPostMessage: MessagePort['postMessage'];
  dispatchEvent: EventTarget['dispatchEvent'];
  /** The document's base URL (relative request URLs resolve against it), and the page's origin. */
  baseUrl(): string;
  origin(): string;
}

export function captureGlobals(win: Window & typeof globalThis): PageGlobals {
  const setTimeoutFn = win.setTimeout.bind(win);
  const clearTimeoutFn = win.clearTimeout.bind(win);
  const perf = win.performance;
  const now = perf.now.bind(perf);
  const doc = win.document;
  const location = win.location;
  return {
    window: win,
    XMLHttpRequest: win.XMLHttpRequest,
    fetch: win.fetch,
    Response: win.Response,
    Headers: win.Headers,
    Request: win.Request,
    ReadableStream: win.ReadableStream,
    Event: win.Event,
    ProgressEvent: win.ProgressEvent,
    DOMException: win.DOMException,
    Blob: win.Blob,
    TextDecoder: win.TextDecoder,
    URL: win.URL,
    setTimeout: (callback, ms) => setTimeoutFn(callback, ms),
    clearTimeout: (handle) => clearTimeoutFn(handle as number),
    now,
    addEventListener: win.EventTarget.prototype.addEventListener,
    portPostMessage: win.MessagePort.prototype.postMessage,
    dispatchEvent: win.EventTarget.prototype.dispatchEvent,
    baseUrl: () => (doc && doc.baseURI) || location.href,
    origin: () => location.origin,
  };
}
