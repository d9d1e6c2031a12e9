/**
 * The receive budget's drops slow the sources down when the receiver is told of them
 * (ClientHost.receiveDrops, shared/src/receiver/handled-rate.ts), over a real loopback peer
 * connection: a real MUTP Sender in another process (mutp-source.ts) serves an object to a
 * Receiver on this thread, whose channels hand on at most BUDGET messages per turn. The thread is
 * slower than the wire: each message it is handed costs PER_MESSAGE_US, and every OTHER_EVERY_MS it
 * spends OTHER_WORK_MS on other work (writing, hashing: a client's thread is not only receiving),
 * so messages wait and are read in bursts, whose trains read as the thread's speed. Told of the
 * drops, the receiver reports the rate it handles, the source's in-flight limit shrinks, and
 * fewer of its messages are dropped. Counts only: the same download with and without.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { DATA_CHANNEL_LABEL, DatagramChannel, FEEDBACK_CHANNEL_LABEL, Receiver, uncodedCodec } from '@mutp/shared';
import { createNodeRtcFactory, nodeRtcReceiveDrops, releaseNodeRtc } from '../src';
import { seededObject } from './seeded-object';
import { busy, within } from './test-process';

afterAll(() => releaseNodeRtc());

const LENGTH = 6 * 1024 * 1024;
const SEED = 5;
const BUDGET = 32;
const PER_MESSAGE_US = 30;
const OTHER_WORK_MS = 4;
const OTHER_EVERY_MS = 5;

const sha256 = (data: Uint8Array) => new Uint8Array(createHash('sha256').update(data).digest());

interface Download {
  handled: number;
  dropped: number;
  /** The Sender's own counters (mutp-source.ts). */
  source: { dataSent: number; lost: number };
}

async function download(countDrops: boolean): Promise<Download> {
  const source = spawn(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'mutp-source.ts'), String(LENGTH), String(SEED)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => source.once('exit', () => resolve()));
  const peer = createNodeRtcFactory({ bindAddress: '127.0.0.1', maxMessagesPerTurn: BUDGET }).createPeer('offerer');
  const tell = (doc: unknown) => source.stdin!.write(`${JSON.stringify(doc)}\n`);
  const droppedBefore = nodeRtcReceiveDrops();
  const receiver = new Receiver({
    transferId: 0x10ad,
    url: 'https://origin.example/object',
    mode: 'uncoded',
    sourceCount: 1,
    window: 2048,
    generationSize: 16,
    symbolSize: 1120,
    codec: uncodedCodec,
    now: performance.now(),
    sha256,
    ...(countDrops ? { receiveDrops: nodeRtcReceiveDrops } : {}),
  });
  let handled = 0;
  let timer: NodeJS.Timeout | undefined;
  let feedback: DatagramChannel | undefined;
  const flush = () => {
    const now = performance.now();
    const deadline = receiver.nextDeadline();
    if (deadline !== null && deadline <= now) receiver.handleTimeout(now);
    for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now)) feedback?.send(d.bytes);
    clearTimeout(timer);
    const next = receiver.nextDeadline();
    if (next !== null) timer = setTimeout(flush, Math.max(0, next - performance.now()));
  };
  const onMessage = (bytes: Uint8Array) => {
    handled++;
    busy(PER_MESSAGE_US);
    receiver.handleDatagram(0, bytes, performance.now());
    flush();
  };
  let otherWork: NodeJS.Timeout | undefined;
  try {
    peer.onLocalDescription = (offer) => tell({ offer });
    peer.onLocalCandidate = (candidate) => tell({ candidate });
    const data = peer.createChannel(DATA_CHANNEL_LABEL);
    feedback = peer.createChannel(FEEDBACK_CHANNEL_LABEL);
    data.onMessage = onMessage;
    feedback.onMessage = onMessage;
    let open = 0;
    data.onOpen = feedback.onOpen = () => {
      if (++open !== 2) return;
      // The other work starts once connected: signalling is not what is measured.
      otherWork = setInterval(() => busy(OTHER_WORK_MS * 1000), OTHER_EVERY_MS);
      flush(); // the REQUEST
    };
    const done = new Promise<Download['source']>((resolve, reject) => {
      peer.onStateChange = (state) => {
        if (state === 'failed' || state === 'closed') reject(new Error(`peer connection ${state}`));
      };
      createInterface({ input: source.stdout! }).on('line', (line) => {
        const doc = JSON.parse(line) as { answer?: never; candidate?: never; done?: Download['source'] };
        if (doc.answer) peer.setRemoteDescription(doc.answer);
        if (doc.candidate) peer.addRemoteCandidate(doc.candidate);
        if (doc.done) resolve(doc.done);
      });
    });
    peer.startOffer();
    const sourceStats = await within(done, 120_000, 'the source to finish (the receiver completes and stops it)');
    expect({ status: receiver.status, error: receiver.error?.message }).toEqual({
      status: 'complete',
      error: undefined,
    });
    expect(Buffer.from(receiver.takeObject()).equals(Buffer.from(seededObject(LENGTH, SEED)))).toBe(true);
    return { handled, dropped: nodeRtcReceiveDrops() - droppedBefore, source: sourceStats };
  } finally {
    clearInterval(otherWork);
    clearTimeout(timer);
    peer.close();
    source.stdin!.end();
    await within(exited, 10_000, 'the source to exit');
  }
}

test('told of the drops, the receiver slows its source down and fewer messages are dropped', async () => {
  const without = await download(false);
  const told = await download(true);
  const fraction = (d: Download) => d.dropped / (d.handled + d.dropped);
  console.log(
    `receive drops: without ${JSON.stringify({ ...without, fraction: fraction(without) })}, told ${JSON.stringify({ ...told, fraction: fraction(told) })}`,
  );
  expect(fraction(without)).toBeGreaterThan(0.2);
  expect(fraction(told)).toBeLessThan(0.85 * fraction(without));
  // What the source sent for the same object falls with the drops.
  expect(told.source.dataSent).toBeLessThan(without.source.dataSent);
}, 300_000);
