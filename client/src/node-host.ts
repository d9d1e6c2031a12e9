/**
 * The client orchestration's host in Node: system clock, crypto randomness, ws, fetch,
 * node-datachannel, QUIC (@mutp/quic), and network changes from the host's addresses (network-watch.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { ClientHost, FetchLike, systemClock, WebSocketLike } from '@mutp/shared/client';
import { createNodeRtcFactory, NodeRtcOptions } from '@mutp/node-rtc';
import { nodeNetworkWatch } from './network-watch';
import { openNodeQuicTransport } from './quic-transport';

export function createNodeHost(rtc: NodeRtcOptions = {}): ClientHost {
  return {
    clock: systemClock,
    random: () => randomBytes(4).readUInt32BE(0),
    webSocket: (url) => new WebSocket(url, { maxPayload: 1 << 20 }) as unknown as WebSocketLike,
    rtc: createNodeRtcFactory(rtc),
    quic: openNodeQuicTransport,
    fetch: globalThis.fetch as unknown as FetchLike,
    sha256: (data) => createHash('sha256').update(data).digest(),
    onNetworkChange: nodeNetworkWatch(),
  };
}
