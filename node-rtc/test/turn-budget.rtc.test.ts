/**
 * The turn budget (node-rtc/src/turn-budget.ts) bounds what waits in node-datachannel's native
 * receive queue while the JS thread is slower than the sender: a sender in another process
 * (flood-sender.ts) keeps its pace at about 10,000 messages/s while this thread spends 300 µs on
 * each message it is handed (at most 3,300/s). What still arrives after the sender finished is
 * what was queued natively at that moment. With a budget of 16 messages per channel per turn the
 * excess is dropped unread and the queue stays short; without one (maxMessagesPerTurn unset)
 * about two thirds of the 15,000 messages are still queued when the sender finishes.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { DatagramChannel } from '@mutp/shared';
import { createNodeRtcFactory, nodeRtcReceiveStats, releaseNodeRtc } from '../src';

afterAll(() => releaseNodeRtc());

const MESSAGES = 15_000;
const PER_TICK = 100; // every 10 ms: about 10,000 messages/s
const HANDLING_US = 300;
const BUDGET = 16;

/** `promise`, or a failure naming `what` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Spends `us` microseconds of this thread, as a decode would. */
function busy(us: number): void {
  const until = performance.now() + us / 1000;
  while (performance.now() < until);
}

interface Flood {
  sent: number;
  /** Messages that arrived (handed on or dropped) after the sender said it was done. */
  arrivedAfterDone: number;
  dropped: number;
}

/** Floods one loopback channel from another process; resolves once the channel is quiet again. */
async function flood(maxMessagesPerTurn: number | undefined): Promise<Flood> {
  const sender = spawn(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'flood-sender.ts'), String(MESSAGES), String(PER_TICK)],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => sender.once('exit', () => resolve()));
  const peer = createNodeRtcFactory({
    bindAddress: '127.0.0.1',
    ...(maxMessagesPerTurn !== undefined ? { maxMessagesPerTurn } : {}),
  }).createPeer('offerer');
  const tell = (doc: unknown) => sender.stdin!.write(`${JSON.stringify(doc)}\n`);
  const droppedBefore = nodeRtcReceiveStats().dropped;
  let handled = 0;
  const arrived = () => handled + nodeRtcReceiveStats().dropped - droppedBefore;
  try {
    peer.onLocalDescription = (offer) => tell({ offer });
    peer.onLocalCandidate = (candidate) => tell({ candidate });
    const data: DatagramChannel = peer.createChannel('mutp-data');
    peer.createChannel('mutp-feedback');
    data.onMessage = () => {
      handled++;
      busy(HANDLING_US);
    };
    const done = new Promise<{ sent: number; arrivedAtDone: number }>((resolve) => {
      createInterface({ input: sender.stdout! }).on('line', (line) => {
        const doc = JSON.parse(line) as { answer?: never; candidate?: never; done?: number };
        if (doc.answer) peer.setRemoteDescription(doc.answer);
        if (doc.candidate) peer.addRemoteCandidate(doc.candidate);
        if (doc.done !== undefined) resolve({ sent: doc.done, arrivedAtDone: arrived() });
      });
    });
    peer.startOffer();
    const { sent, arrivedAtDone } = await within(done, 60_000, 'the sender to send every message');
    // Quiet: nothing arrived for 500 ms (bounded: the queue holds at most what was sent).
    for (let last = -1; last !== arrived();) {
      last = arrived();
      await new Promise((r) => setTimeout(r, 500));
    }
    return {
      sent,
      arrivedAfterDone: arrived() - arrivedAtDone,
      dropped: nodeRtcReceiveStats().dropped - droppedBefore,
    };
  } finally {
    peer.close();
    sender.stdin!.end();
    await within(exited, 10_000, 'the sender to exit');
  }
}

test('a turn budget keeps the native receive queue short while the JS thread is slower than the sender', async () => {
  const withBudget = await flood(BUDGET);
  expect(withBudget.sent).toBe(MESSAGES);
  // The thread could not have handled them all: the budget dropped the excess...
  expect(withBudget.dropped).toBeGreaterThan(MESSAGES / 4);
  // ...so little was still queued when the sender finished: about 100 here, up to 1,800 with both
  // cores busy (the thread gets no CPU at times); without a budget about 10,000.
  expect(withBudget.arrivedAfterDone).toBeLessThan(MESSAGES / 4);
});
