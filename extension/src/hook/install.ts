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

/** A random session id (per page document). */
export function sessionId(): string {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
