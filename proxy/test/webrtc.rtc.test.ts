/**
 * @mutp/node-rtc (node-rtc/src/webrtc.ts): two node-datachannel peers in one process on loopback, both MUTP
 * channels open, at least 2000 DATA-sized messages under bufferedAmount back-pressure, the low-water
 * callback, a clean close, and node-datachannel's cleanup at the end.
 */
import { DatagramChannel } from '@mutp/shared';
import { createNodeRtcFactory, releaseNodeRtc } from '@mutp/node-rtc';
import { connectedLoopbackPair, until, within } from './helpers';

afterAll(() => releaseNodeRtc());

const MESSAGES = 2000;
// The native send buffer may swallow all 2000 before JS sees bufferedAmount rise (a fresh CI host
// did once); the pump then keeps going until it has seen back-pressure, up to this many.
const MAX_MESSAGES = 20_000;
const SIZE = 1138; // a DATA_RLNC datagram at the default symbol size: unsplit at MTU 1280
const HIGH_WATER = 4 * 1200;

function message(i: number): Uint8Array {
  const bytes = new Uint8Array(SIZE);
  bytes[0] = i >>> 8;
  bytes[1] = i & 0xff;
  for (let k = 2; k < SIZE; k++) bytes[k] = (i * 31 + k) & 0xff;
  return bytes;
}

function check(bytes: Uint8Array): number {
  if (bytes.length !== SIZE) return -1;
  const i = (bytes[0] << 8) | bytes[1];
  for (let k = 2; k < SIZE; k++) if (bytes[k] !== ((i * 31 + k) & 0xff)) return -1;
  return i;
}

test('two peers connect on loopback and carry at least 2000 messages with back-pressure', async () => {
  const factory = createNodeRtcFactory({ bindAddress: '127.0.0.1' });
  const remote = new Map<string, DatagramChannel>();
  // Retried once on a lost handshake (libdatachannel 0.24's loopback race: node-rtc/README.md).
  const pair = await connectedLoopbackPair(factory, (c) => remote.set(c.label, c));
  try {
    await until(() => remote.size === 2, 10_000, 'both channels at the answerer');
    await until(() => remote.get('mutp-data')!.isOpen, 5000, 'answerer data channel open');
    expect([...remote.keys()].sort()).toEqual(['mutp-data', 'mutp-feedback']);
    // The state change may be delivered after the channels' open events (separate callbacks).
    await until(() => pair.offerer.state === 'connected', 5000, 'offerer connected');
    await until(() => pair.answerer.state === 'connected', 5000, 'answerer connected');

    // Feedback direction: answerer -> offerer on the feedback channel.
    const back = new Promise<Uint8Array>((resolve) => (pair.feedback.onMessage = resolve));
    remote.get('mutp-feedback')!.send(new Uint8Array([1, 2, 3]));
    expect(Array.from(await within(back, 5000, 'message on the feedback channel'))).toEqual([1, 2, 3]);

    const seen = new Set<number>();
    let corrupt = 0;
    let sent = 0;
    let sentEverything = false;
    const receiver = remote.get('mutp-data')!;
    const allReceived = new Promise<void>((resolve) => {
      receiver.onMessage = (bytes) => {
        expect(bytes).toBeInstanceOf(Uint8Array);
        const i = check(bytes);
        if (i < 0 || seen.has(i)) corrupt++;
        else seen.add(i);
        if (sentEverything && seen.size === sent) resolve();
      };
    });

    let refused = 0;
    let lowCallbacks = 0;
    let sawBackPressure = false;
    let allSent!: () => void;
    const sentAll = new Promise<void>((resolve) => (allSent = resolve));
    const pump = () => {
      while (sent < MESSAGES || (!sawBackPressure && sent < MAX_MESSAGES)) {
        if (pair.data.bufferedAmount >= HIGH_WATER) {
          sawBackPressure = true;
          return;
        }
        if (!pair.data.send(message(sent))) refused++;
        sent++;
      }
      sentEverything = true;
      allSent();
    };
    pair.data.setLowWaterMark(HIGH_WATER / 2, () => {
      lowCallbacks++;
      pump();
    });
    pump();
    await within(sentAll, 20_000, `all messages handed to the channel`);
    expect(refused).toBe(0);
    // Unreliable channel: on loopback nothing should be lost, but allow a little for a loaded CI.
    await within(allReceived, 10_000, `received all messages`).catch(() => undefined);
    expect(sawBackPressure).toBe(true);
    expect(lowCallbacks).toBeGreaterThan(0);
    expect(corrupt).toBe(0);
    expect(seen.size).toBeGreaterThanOrEqual(sent * 0.95);

    // Close: both sides see the channels close, send() refuses afterwards.
    const remoteClosed = new Promise<void>((resolve) => (receiver.onClose = () => resolve()));
    pair.offerer.close();
    expect(pair.offerer.state).toBe('closed');
    expect(pair.data.send(message(0))).toBe(false);
    expect(pair.data.isOpen).toBe(false);
    await within(remoteClosed, 10_000, 'answerer data channel closed');
    await until(() => ['closed', 'disconnected', 'failed'].includes(pair.answerer.state), 10_000, 'answerer closed');
  } finally {
    pair.close();
  }
});

/** One handshake whose offerer's candidates reach the answerer before the offer does. */
async function candidatesFirst(): Promise<void> {
  const factory = createNodeRtcFactory({ bindAddress: '127.0.0.1' });
  const offerer = factory.createPeer('offerer');
  const answerer = factory.createPeer('answerer');
  const candidates: { candidate: string; mid: string }[] = [];
  let offer: { type: 'offer' | 'answer'; sdp: string } | undefined;
  offerer.onLocalCandidate = (c) => candidates.push(c);
  offerer.onLocalDescription = (d) => (offer = d);
  answerer.onLocalDescription = (d) => offerer.setRemoteDescription(d);
  answerer.onLocalCandidate = (c) => offerer.addRemoteCandidate(c);
  const opened = new Promise<void>((resolve) => {
    answerer.onChannel = (c) => {
      c.onOpen = () => resolve();
    };
  });
  try {
    const data = offerer.createChannel('mutp-data');
    offerer.startOffer();
    await until(() => offer !== undefined && candidates.length > 0, 10_000, 'offer and candidates');
    // Wrong order on purpose: candidates first.
    for (const c of candidates) answerer.addRemoteCandidate(c);
    offerer.onLocalCandidate = (c) => answerer.addRemoteCandidate(c);
    answerer.setRemoteDescription(offer!);
    await within(opened, 10_000, 'channel open at the answerer');
    await until(() => data.isOpen, 5000, 'channel open at the offerer');
  } finally {
    offerer.close();
    answerer.close();
  }
}

test('candidates that arrive before the remote description are applied after it', async () => {
  try {
    await candidatesFirst();
  } catch {
    // libdatachannel 0.24 loses about 1 % of loopback handshakes (node-rtc/README.md, "Known
    // loss of handshakes"): once more, as the client's own connections are; twice is a failure.
    await candidatesFirst();
  }
});
