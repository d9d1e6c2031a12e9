/**
 * The sending side of turn-budget.rtc.test.ts, in its own process so that it keeps its pace while
 * the test's thread is busy: the answerer of one loopback peer connection. Signalling is one JSON
 * document per line (stdin: the offer and candidates; stdout: the answer, candidates, then
 * `{"done": n}` after it sent n messages). Once the data channel opens it sends `count` messages
 * of 1138 bytes (a DATA_RLNC datagram), `perTick` every 10 ms, skipping a tick while 256 KB wait
 * in the native send buffer. It exits when stdin closes.
 */
import { createInterface } from 'node:readline';
import type { DatagramChannel } from '@mutp/shared';
import { createNodeRtcFactory, releaseNodeRtc } from '../src';

const [count, perTick] = process.argv.slice(2).map(Number);
const say = (doc: unknown) => process.stdout.write(`${JSON.stringify(doc)}\n`);

const peer = createNodeRtcFactory({ bindAddress: '127.0.0.1' }).createPeer('answerer');
peer.onLocalDescription = (answer) => say({ answer });
peer.onLocalCandidate = (candidate) => say({ candidate });
peer.onChannel = (channel) => {
  if (channel.label !== 'mutp-data') return;
  if (channel.isOpen) flood(channel);
  else channel.onOpen = () => flood(channel);
};

function flood(channel: DatagramChannel): void {
  const bytes = new Uint8Array(1138);
  let sent = 0;
  const tick = setInterval(() => {
    for (let i = 0; i < perTick && sent < count && channel.bufferedAmount < 256 * 1024; i++) {
      bytes[0] = sent & 0xff;
      if (channel.send(bytes)) sent++;
    }
    if (sent < count) return;
    clearInterval(tick);
    say({ done: sent });
  }, 10);
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const doc = JSON.parse(line) as {
    offer?: { type: 'offer'; sdp: string };
    candidate?: { candidate: string; mid: string };
  };
  if (doc.offer) peer.setRemoteDescription(doc.offer);
  if (doc.candidate) peer.addRemoteCandidate(doc.candidate);
});
lines.on('close', () => {
  peer.close();
  releaseNodeRtc();
  process.exit(0);
});
