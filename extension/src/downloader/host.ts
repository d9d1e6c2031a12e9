/**
 * The browser ClientHost: the platform's clock and timers, crypto.getRandomValues, the native
 * WebSocket and fetch, WebRTC through createBrowserRtcFactory, and a WebAssembly SHA-256
 * (sha256.ts: the core's portable one ran at a third of the speed in Chromium).
 */
import { RtcFactory } from '@mutp/shared';
import { ClientHost, systemClock, WebSocketLike } from '@mutp/shared/client';
import { createBrowserRtcFactory } from './rtc';
import { Sha256 } from './sha256';

function randomUint32(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}

/** The native WebSocket as the core's WebSocketLike (binary frames as ArrayBuffer). */
export function openWebSocket(url: string): WebSocketLike {
  const socket = new WebSocket(url);
  socket.binaryType = 'arraybuffer';
  return socket as unknown as WebSocketLike;
}

export function createBrowserHost(sha256: Sha256 | undefined, rtc: RtcFactory = createBrowserRtcFactory()): ClientHost {
  return {
    clock: systemClock,
    random: randomUint32,
    webSocket: openWebSocket,
    rtc,
    ...(sha256 ? { sha256 } : {}),
    fetch: (url, init) =>
      fetch(url, { signal: init.signal, headers: init.headers, credentials: 'omit', cache: 'no-store' }),
  };
}
