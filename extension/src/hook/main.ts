/**
 * Entry of the page-world hook (content script with `world: "MAIN"`, document_start, all frames;
 * the manifest requires Chrome 111+ / Firefox 128+, which support it, so hook.js is not
 * web-accessible and never injected by a script element). The page world is the page's: nothing
 * here is trusted by the rest of the extension (the content script checks every request).
 *
 * Installs the fetch/XHR wrappers, then hands port A to the content script with one window
 * message (the content script stops that message, so page listeners never see it) and from then
 * on talks to it only through that port: configuration in, counters and "need-downloader" out.
 * Port B (to the content script's relay to the downloader frame) arrives through port A.
 */
import { Counters } from '../common/counters';
import { ContentToHook, HOOK_HELLO, HookConfig, HookToContent, isObject } from '../common/messages';
import { HookCore } from './core';
import { captureGlobals } from './globals';
import { installHook, sessionId } from './install';
import { PortTransport } from './transport';

const COUNTERS_INTERVAL_MS = 250;

function start(): void {
  const win = window;
  const g = captureGlobals(win);
  const session = sessionId();
  const channel = new MessageChannel();
  const portA = channel.port1;
  const send = (m: HookToContent) => {
    try {
      g.portPostMessage.call(portA, m);
    } catch {
      // the content script is gone (extension reloaded): nothing to tell
    }
  };
  const transport = new PortTransport(
    () => send({ type: 'need-downloader' }),
    g,
    g.now,
    () => ({ session, pageUrl: win.location.href }),
    (port, message) => g.portPostMessage.call(port, message),
  );
  const core = new HookCore(transport, g, g.now);

  let countersTimer: unknown;
  const publish = () => {
    countersTimer = undefined;
    const c = core.counters;
    if (c.media === 0 && c.manifests === 0 && c.workers === 0) return;
    send({ type: 'counters', session, pageUrl: win.location.href, counters: structuredClone(c) as Counters });
  };
  core.onCountersChanged = () => {
    if (countersTimer === undefined) countersTimer = g.setTimeout(publish, COUNTERS_INTERVAL_MS);
  };
  core.onConfig = (config: HookConfig) => exposeCounters(config.exposeCounters);
  core.onManifest = () => transport.prepare();

  const exposeCounters = (on: boolean) => {
    const w = win as unknown as { __mutp?: unknown };
    if (on && !Object.prototype.hasOwnProperty.call(w, '__mutp')) {
      Object.defineProperty(w, '__mutp', {
        value: Object.freeze({
          counters: () => structuredClone(core.counters),
          config: () => structuredClone(core.getConfig() ?? null),
          session,
        }),
        configurable: true,
        enumerable: false,
      });
    } else if (!on && Object.prototype.hasOwnProperty.call(w, '__mutp')) {
      delete w.__mutp;
    }
  };

  portA.onmessage = (event: MessageEvent) => {
    try {
      const data: unknown = event.data;
      if (!isObject(data)) return;
      const m = data as unknown as ContentToHook;
      if (m.type === 'config' && isObject(m.config)) core.setConfig(m.config);
      else if (m.type === 'downloader-port' && event.ports[0]) transport.attach(event.ports[0]);
      else if (m.type === 'downloader-failed') transport.fail(String(m.reason));
    } catch {
      // a message we cannot use changes nothing
    }
  };

  installHook(core, g);
  win.postMessage({ [HOOK_HELLO]: session }, '*', [channel.port2]);
}

try {
  start();
} catch {
  // Never break the page: without the hook every request simply goes to the network.
}
