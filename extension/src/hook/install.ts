/**
 * Installs the hook in a page: replaces `fetch` and `XMLHttpRequest` with the wrappers, keeping
 * the properties pages look at (name, length, prototype chain, constants).
 */
import { HookCore } from './core';
import { createFetch } from './fetch';
import { PageGlobals } from './globals';
import { createXhrClass } from './xhr';

export function installHook(core: HookCore, g: PageGlobals): void {
  const win = g.window;
  countWorkers(core, win);
  watchMediaSources(core, win);
  watchNetwork(core, win);
  const hookedFetch = createFetch(core, g);
  Object.defineProperty(hookedFetch, 'name', { value: 'fetch' });
  Object.defineProperty(hookedFetch, 'length', { value: 1 });
  const HookedXhr = createXhrClass(core, g);
  const fetchDescriptor = Object.getOwnPropertyDescriptor(win, 'fetch');
  const xhrDescriptor = Object.getOwnPropertyDescriptor(win, 'XMLHttpRequest');
  Object.defineProperty(win, 'fetch', {
    value: hookedFetch,
    writable: fetchDescriptor?.writable ?? true,
    enumerable: fetchDescriptor?.enumerable ?? true,
    configurable: fetchDescriptor?.configurable ?? true,
  });
  Object.defineProperty(win, 'XMLHttpRequest', {
    value: HookedXhr,
    writable: xhrDescriptor?.writable ?? true,
    enumerable: xhrDescriptor?.enumerable ?? false,
    configurable: xhrDescriptor?.configurable ?? true,
  });
}

/**
 * Counts the dedicated workers the page starts, so the popup can say that media fetched inside
 * them is not covered. A Proxy of the native constructor: `new Worker(...)`, `instanceof Worker`
 * and `Worker.prototype` behave as before; nothing about the worker changes.
 */
function countWorkers(core: HookCore, win: Window): void {
  const descriptor = Object.getOwnPropertyDescriptor(win, 'Worker');
  const Native = descriptor?.value as (new (...args: unknown[]) => unknown) | undefined;
  if (typeof Native !== 'function') return;
  const Counted = new Proxy(Native, {
    construct(target, args, newTarget) {
      const worker = Reflect.construct(target, args, newTarget === Counted ? target : newTarget) as object;
      core.noteWorker();
      return worker;
    },
  });
  Object.defineProperty(win, 'Worker', { ...descriptor, value: Counted });
}

/**
 * What reaches the player through MSE on the main thread (SourceBuffer.prototype.appendBuffer,
 * counted, then the native one with the same arguments), and media elements given a
 * MediaSourceHandle (MSE in a worker). Together with the page's own requests this tells whether
 * media arrived past the hook, i.e. through a worker (common/explain.ts). `name` and `length` of
 * the wrapped method stay the native ones.
 */
function watchMediaSources(core: HookCore, win: Window): void {
  const w = win as unknown as {
    SourceBuffer?: { prototype: { appendBuffer: (data: BufferSource) => void } };
    HTMLMediaElement?: { prototype: object };
    MediaSourceHandle?: abstract new () => unknown;
  };
  const proto = w.SourceBuffer?.prototype;
  const native = proto?.appendBuffer;
  if (proto && typeof native === 'function') {
    const counted = {
      appendBuffer(this: unknown, data: BufferSource) {
        try {
          core.noteAppended((data as ArrayBufferView | ArrayBuffer)?.byteLength ?? 0);
        } catch {
          // counting never changes what the page does
        }
        // eslint-disable-next-line prefer-rest-params
        return Reflect.apply(native, this, arguments);
      },
    }.appendBuffer;
    Object.defineProperty(counted, 'name', { value: native.name });
    Object.defineProperty(counted, 'length', { value: native.length });
    const d = Object.getOwnPropertyDescriptor(proto, 'appendBuffer');
    Object.defineProperty(proto, 'appendBuffer', { ...d, value: counted });
  }
  const Handle = w.MediaSourceHandle;
  const mediaProto = w.HTMLMediaElement?.prototype;
  const src = mediaProto && Object.getOwnPropertyDescriptor(mediaProto, 'srcObject');
  if (typeof Handle === 'function' && mediaProto && src?.set && src.get) {
    const set = src.set;
    Object.defineProperty(mediaProto, 'srcObject', {
      ...src,
      set: {
        srcObject(this: unknown, value: unknown) {
          try {
            if (value instanceof Handle) core.noteWorkerMediaSource();
          } catch {
            // as above
          }
          set.call(this, value);
        },
      }.srcObject,
    });
  }
}

/** The page's own network fetches (Resource Timing, including those before the hook ran). */
function watchNetwork(core: HookCore, win: Window): void {
  const Observer = (win as unknown as { PerformanceObserver?: typeof PerformanceObserver }).PerformanceObserver;
  if (typeof Observer !== 'function') return;
  const observer = new Observer((list) => {
    for (const e of list.getEntries() as PerformanceResourceTiming[]) {
      try {
        core.noteNetwork(e);
      } catch {
        // as above
      }
    }
  });
  observer.observe({ type: 'resource', buffered: true });
}

/** A random session id (per page document). */
export function sessionId(): string {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
