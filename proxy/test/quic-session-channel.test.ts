/** A QUIC session as a TransferHost's data channel, over a fake server that queues and drains. */
import { randomBelow, seededRandom } from '@mutp/shared';
import type { QuicServerApi } from '../src/quic-service';
import { QUIC_DATAGRAM_OVERHEAD_BYTES, QUIC_LOW_WATER_BYTES, QuicSessionChannel } from '../src/quic-session-channel';

const SESSION = 7;

/** A server whose one session queues what is sent (with the header) up to `capacity` and drains on demand. */
function fakeServer(capacity = 64 * 1024) {
  const state = { queued: 0, reads: 0, sent: 0 };
  const server: QuicServerApi = {
    port: 4433,
    acceptSession: () => {},
    rejectSession: () => {},
    sendDatagram: (id, bytes) => {
      expect(id).toBe(SESSION);
      const cost = bytes.length + QUIC_DATAGRAM_OVERHEAD_BYTES;
      if (state.queued + cost > capacity) return false;
      state.queued += cost;
      state.sent++;
      return true;
    },
    bufferedBytes: (id) => {
      expect(id).toBe(SESSION);
      state.reads++;
      return state.queued;
    },
    setLowWaterMark: () => {},
    closeSession: () => {},
    reloadCertificate: () => {},
    close: async () => {},
  };
  const drain = (bytes: number) => {
    state.queued = Math.max(0, state.queued - bytes);
  };
  return { server, state, drain };
}

/** What TransferHost.pump does with the channel: send while it holds less than its low-water mark. */
function pump(channel: QuicSessionChannel, datagram: Uint8Array): number {
  let sent = 0;
  while (channel.bufferedAmount < channel.preferredLowWater && channel.send(datagram)) sent++;
  return sent;
}

describe('QuicSessionChannel', () => {
  const datagram = new Uint8Array(1200);

  test('a pump reads the native queue once to start and once at the mark, not before every datagram', () => {
    const { server, state } = fakeServer();
    const channel = new QuicSessionChannel(server, SESSION);
    const sent = pump(channel, datagram);
    // 16 KiB of 1208-byte entries: 14 fill it past the mark.
    expect(sent).toBe(Math.ceil(QUIC_LOW_WATER_BYTES / (datagram.length + QUIC_DATAGRAM_OVERHEAD_BYTES)));
    expect(state.reads).toBe(2);
  });

  test('with the queue draining at random between checks, every check decides as the exact count would', () => {
    const random = seededRandom(33);
    const { server, state, drain } = fakeServer();
    const channel = new QuicSessionChannel(server, SESSION);
    let checks = 0;
    const wrong: string[] = [];
    for (let step = 0; step < 5_000; step++) {
      const r = randomBelow(random, 10);
      if (r < 3) drain(randomBelow(random, 4000));
      else if (r === 3) {
        drain(state.queued);
        channel.drained();
      } else {
        const size = 1 + randomBelow(random, 1276);
        const below = channel.bufferedAmount < channel.preferredLowWater;
        checks++;
        if (below !== state.queued < channel.preferredLowWater)
          wrong.push(`step ${step}: ${channel.bufferedAmount} against ${state.queued} queued`);
        if (below) channel.send(datagram.subarray(0, size));
      }
    }
    expect(wrong).toEqual([]);
    expect(checks).toBeGreaterThan(2_500);
    // The point of the bound: far fewer native readings than checks.
    expect(state.reads).toBeLessThan(checks / 4);
  });

  test('a refused send leaves the bound as it was; a closed channel holds nothing and sends nothing', () => {
    const { server, state } = fakeServer(3 * 1208);
    const channel = new QuicSessionChannel(server, SESSION);
    expect(pump(channel, datagram)).toBe(3);
    expect(channel.bufferedAmount).toBe(3 * 1208);
    channel.closeSession('test');
    expect(channel.bufferedAmount).toBe(0);
    expect(channel.send(datagram)).toBe(false);
    expect(state.sent).toBe(3);
  });
});
