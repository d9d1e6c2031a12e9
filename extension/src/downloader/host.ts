/**
 * The browser ClientHost: the platform's clock and timers, crypto.getRandomValues, the native
 * WebSocket and fetch, and WebRTC through createBrowserRtcFactory. `sha256` stays undefined so the
 * core uses its own synchronous SHA-256 (crypto.subtle is asynchronous).
 */
import { RtcFactory } from '@mutp/shared';
import { ClientHost, systemClock, WebSocketLike } from '@mutp/shared/client';
import { createBrowserRtcFactory } from './rtc';

function randomUint32(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}

/** The native WebSocket as the core's WebSocketLike (binary frames as ArrayBuffer). */
export function openWebSocket(url: string): WebSocketLike {
  const socket = new WebSocket(url);
  socket.binaryType = 'arraybuffer';
  return socket as unknown as WebSocketLike;
}

export function createBrowserHost(rtc: RtcFactory = createBrowserRtcFactory()): ClientHost {
  return {
    clock: systemClock,
    random: randomUint32,
    webSocket: openWebSocket,
    rtc,
    fetch: (url, init) =>
      fetch(url, { signal: init.signal, headers: init.headers, credentials: 'omit', cache: 'no-store' }),
  };
}
