/**
 * The client orchestration's host in Node: system clock, crypto randomness, ws, fetch,
 * node-datachannel, QUIC (@mutp/quic), and network changes from the host's addresses (network-watch.ts).
 */
import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto';
import WebSocket from 'ws';
import { ClientHost, FetchLike, systemClock, WebSocketLike } from '@mutp/shared/client';
import { createNodeRtcFactory, nodeRtcReceiveDrops, NodeRtcOptions } from '@mutp/node-rtc';
import { quicClientReceiveDrops } from '@mutp/quic';
import { nodeNetworkWatch } from './network-watch';
import { nodeQuicOpener, NodeQuicOptions } from './quic-transport';

/**
 * Received messages a channel hands on per event-loop turn (node-rtc's turn-budget.ts). A turn
 * that brings one channel more means the JS thread fell that far behind node-datachannel's
 * unbounded native queue, whose high-water mark stays in the RSS: the rest is dropped as loss.
 * 256 messages of up to 1276 bytes are about 320 KB per channel, a quarter of the 1000 Node
 * hands over at most per turn, so a drained queue still fills each turn's budget.
 */
export const MAX_MESSAGES_PER_TURN = 256;

/**
 * How long a WebSocket the client closed waits for origo's half of the close handshake before it
 * drops the connection. ws waits 30 s by default and its timer holds the process open: after a
 * network change the old address is gone, the handshake can never complete, and `mutp` (or a
 * benchmark) exited 30 s after its last download. On a live network origo answers in a round trip.
 */
export const CLOSE_HANDSHAKE_MS = 2000;

export function createNodeHost(rtc: NodeRtcOptions = {}, quic: NodeQuicOptions = {}): ClientHost {
  const host: ClientHost & { receiveDrops: () => number } = {
    clock: systemClock,
    random: () => randomBytes(4).readUInt32BE(0),
    // closeTimeout: an option of the ws we install (8.23) that @types/ws (8.18) does not declare yet.
    webSocket: (url) =>
      new WebSocket(url, {
        maxPayload: 1 << 20,
        closeTimeout: CLOSE_HANDSHAKE_MS,
      } as WebSocket.ClientOptions) as unknown as WebSocketLike,
    rtc: createNodeRtcFactory({ maxMessagesPerTurn: MAX_MESSAGES_PER_TURN, ...rtc }),
    quic: nodeQuicOpener(quic),
    fetch: globalThis.fetch as unknown as FetchLike,
    sha256: nodeSha256,
    verifySignature: verifyEd25519Native,
    onNetworkChange: nodeNetworkWatch(),
    // What the RTC budget and the QUIC sessions' shared queue dropped unread: while it grows, the
    // receivers tell each source the rate they handle, so the sources slow down to it
    // (shared/src/receiver/handled-rate.ts). One count for both: a drop on either is the JS
    // thread falling behind, which every source's data competes for.
    receiveDrops: () => nodeRtcReceiveDrops() + quicClientReceiveDrops(),
  };
  return host;
}

/**
 * SHA-256 through node:crypto; create() starts an incremental one, so the core hashes an object
 * as its check units verify instead of all at once at completion (shared/src/receiver/object-digest.ts).
 */
const nodeSha256 = Object.assign((data: Uint8Array): Uint8Array => createHash('sha256').update(data).digest(), {
  create() {
    const hash = createHash('sha256');
    const stream = {
      update(data: Uint8Array) {
        hash.update(data);
        return stream;
      },
      digest: (): Uint8Array => hash.digest(),
    };
    return stream;
  },
});

/** Ed25519 through node:crypto (about 20 times the portable one's speed). */
function verifyEd25519Native(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(publicKey).toString('base64url') },
    format: 'jwk',
  });
  return verify(null, message, key, signature);
}
