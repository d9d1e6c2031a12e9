/**
 * The browser ClientHost: the platform's clock and timers, crypto.getRandomValues, the native
 * WebSocket and fetch, WebRTC through createBrowserRtcFactory, QUIC through WebTransport
 * (webtransport.ts), a WebAssembly SHA-256 (sha256.ts:
 * the core's portable one ran at a third of the speed in Chromium), and the browser's network
 * change events.
 */
import { RtcFactory } from '@mutp/shared';
import { ClientHost, systemClock, WebSocketLike } from '@mutp/shared/client';
import { createBrowserRtcFactory } from './rtc';
import { Sha256 } from './sha256';
import { openWebTransport, webTransportAvailable } from './webtransport';

function randomUint32(): number {
  return crypto.getRandomValues(new Uint32Array(1))[0];
}

/** The native WebSocket as the core's WebSocketLike (binary frames as ArrayBuffer). */
export function openWebSocket(url: string): WebSocketLike {
  const socket = new WebSocket(url);
  socket.binaryType = 'arraybuffer';
  return socket as unknown as WebSocketLike;
}

/** What the page's navigator.connection offers, where it exists (Chromium; not Firefox). */
interface ConnectionEvents {
  addEventListener(type: 'change', listener: () => void): void;
  removeEventListener(type: 'change', listener: () => void): void;
}

/**
 * Network changes as the browser tells them: back online, or another connection type (Wi-Fi to
 * cellular, where navigator.connection exists). The page sees no addresses.
 */
export function browserNetworkChanges(listener: () => void): () => void {
  const connection = (navigator as Navigator & { connection?: ConnectionEvents }).connection;
  globalThis.addEventListener('online', listener);
  connection?.addEventListener('change', listener);
  return () => {
    globalThis.removeEventListener('online', listener);
    connection?.removeEventListener('change', listener);
  };
}

export function createBrowserHost(sha256: Sha256 | undefined, rtc: RtcFactory = createBrowserRtcFactory()): ClientHost {
  return {
    clock: systemClock,
    random: randomUint32,
    webSocket: openWebSocket,
    rtc,
    // Proxies offering QUIC are reached over WebTransport first (WebRTC beside it as the fallback).
    ...(webTransportAvailable() ? { quic: openWebTransport } : {}),
    ...(sha256 ? { sha256 } : {}),
    fetch: (url, init) =>
      fetch(url, { signal: init.signal, headers: init.headers, credentials: 'omit', cache: 'no-store' }),
    onNetworkChange: browserNetworkChanges,
  };
}
