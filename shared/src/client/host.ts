/**
 * What the client orchestration needs from its host (browser page, extension frame, Node): a
 * clock with timers, randomness, WebSockets, HTTP fetch and WebRTC. Injected, so the same code
 * runs everywhere and tests can drive it.
 */
import { VerifySignature } from '../assertion';
import { RtcFactory } from '..';
import type { QuicOpener } from './link-transport-types';

// Part of the host's interface, kept in a leaf module: link-transport.ts imports this one.
export type { QuicOpener, QuicTarget } from './link-transport-types';

export interface Clock {
  /** Milliseconds, monotonic. */
  now(): number;
  /**
   * Calls `callback` once after `delayMs`; returns a function that cancels it. A `background`
   * timer (housekeeping) must not keep a Node process alive on its own.
   */
  setTimer(delayMs: number, callback: () => void, background?: boolean): () => void;
}

/** The subset of the W3C WebSocket (browsers) and of the `ws` package (Node) that origo needs. */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

export type WebSocketFactory = (url: string) => WebSocketLike;

/** The subset of `fetch` the Parallel HTTP baseline uses. */
export type FetchLike = (
  url: string,
  init: { signal: AbortSignal; headers?: Record<string, string> },
) => Promise<{
  ok: boolean;
  status: number;
  headers: { get(name: string): string | null };
  body: ReadableStream<Uint8Array> | null;
}>;

export interface ClientHost {
  clock: Clock;
  /** Uniform uint32 (transfer ids, connection ids). */
  random: () => number;
  webSocket: WebSocketFactory;
  rtc: RtcFactory;
  /** QUIC transports to proxies that offer them (preferred to WebRTC); absent, every link is WebRTC. */
  quic?: QuicOpener;
  fetch: FetchLike;
  /** SHA-256 for verification; defaults to the core's portable one. */
  sha256?: (data: Uint8Array) => Uint8Array;
  /** Ed25519 verification of signed METAs; defaults to the core's portable one (about 1 ms each). */
  verifySignature?: VerifySignature;
  /**
   * Calls `listener` when the host's network changes (an address it had is gone; the browser came
   * back online or changed its connection type); returns the unsubscribe. Optional: without it,
   * connections bound to a lost address are found dead by their silence (seconds later).
   */
  onNetworkChange?(listener: () => void): () => void;
  /**
   * Received messages the host's transports dropped unread so far, all links together (a
   * monotonic count; node-rtc's per-turn receive budget). While it grows, the receivers report
   * their sources the rates they handle (shared/src/receiver/handled-rate.ts). Absent: the host
   * hands on everything it receives (the browser).
   */
  receiveDrops?: () => number;
}

/** A clock over the platform's timers (browsers and Node alike). */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(delayMs, callback, background) {
    const handle: unknown = setTimeout(callback, Math.max(0, delayMs));
    if (background) (handle as { unref?: () => void }).unref?.();
    return () => clearTimeout(handle as Parameters<typeof clearTimeout>[0]);
  },
};

/** Rejects with `error` after `ms` unless `promise` settles first; the timer is always cleared. */
export function withTimeout<T>(clock: Clock, promise: Promise<T>, ms: number, error: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = clock.setTimer(ms, () => reject(error()));
    promise.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (e: unknown) => {
        cancel();
        reject(e);
      },
    );
  });
}
