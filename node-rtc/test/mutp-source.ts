/**
 * The source side of receive-drops.rtc.test.ts, in its own process so that it keeps sending while
 * the test's thread is busy: the answerer of one loopback peer connection running a real MUTP
 * Sender over it, as a proxy does (REQUEST and FEEDBACK in, META and DATA out, late binding on the
 * data channel's buffered amount). The object is `length` seeded bytes, the same the test makes.
 * Signalling is one JSON document per line (stdin: the offer and candidates; stdout: the answer,
 * candidates, then `{"done": {...}}` with the Sender's counters once it stopped). It exits when
 * stdin closes.
 */
import { createHash } from 'node:crypto';
import {
  DATA_CHANNEL_LABEL,
  DatagramChannel,
  decode,
  FEEDBACK_CHANNEL_LABEL,
  MessageType,
  seededRandom,
  Sender,
  uncodedCodec,
} from '@mutp/shared';
import { createNodeRtcFactory } from '../src';
import { seededObject } from './seeded-object';
import { answerOverStdio, say } from './test-process';

const [length, seed] = process.argv.slice(2).map(Number);
const object = seededObject(length, seed);
const digest = new Uint8Array(createHash('sha256').update(object).digest());
/** Late binding: the Sender is asked for a datagram only while less than this waits to be sent. */
const LOW_WATER = 64 * 1024;

const peer = createNodeRtcFactory({ bindAddress: '127.0.0.1' }).createPeer('answerer');
let data: DatagramChannel | undefined;
let sender: Sender | undefined;
let timer: NodeJS.Timeout | undefined;
let reported = false;

peer.onChannel = (channel) => {
  if (channel.label === DATA_CHANNEL_LABEL) {
    data = channel;
    channel.setLowWaterMark(LOW_WATER, pump);
  }
  if (channel.label === FEEDBACK_CHANNEL_LABEL) channel.onMessage = onClientMessage;
};

function onClientMessage(bytes: Uint8Array): void {
  const now = performance.now();
  if (!sender) {
    const m = decode(bytes);
    if (!m.ok || m.value.type !== MessageType.Request) return;
    sender = new Sender({ request: m.value, object, digest, codec: uncodedCodec, random: seededRandom(seed), now });
  } else sender.handleDatagram(bytes, now);
  pump();
}

function pump(): void {
  if (!sender || !data?.isOpen) return;
  const now = performance.now();
  if ((sender.nextDeadline() ?? Infinity) <= now) sender.handleTimeout(now);
  while (data.bufferedAmount < LOW_WATER) {
    const bytes = sender.pollDatagram(now);
    if (!bytes) break;
    data.send(bytes);
  }
  if (sender.status !== 'active') {
    if (!reported) say({ done: { status: sender.status, ...sender.stats } });
    reported = true;
    return;
  }
  clearTimeout(timer);
  const deadline = sender.nextDeadline();
  if (deadline !== null) timer = setTimeout(pump, Math.max(0, deadline - performance.now()));
}

answerOverStdio(peer, () => clearTimeout(timer));
