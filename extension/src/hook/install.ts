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

/** A random session id (per page document). */
export function sessionId(): string {
  const bytes = new Uint8Array(9);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}
