/**
 * What the loopback tests with a peer in another process share: bounded waits, a thread kept
 * busy on purpose, and the answerer's side of the one-JSON-document-per-line signalling.
 */
import { createInterface } from 'node:readline';
import type { RtcPeer } from '@mutp/shared';
import { releaseNodeRtc } from '../src';

/** `promise`, or a failure naming `what` after `ms`. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** Spends `us` microseconds of this thread, as a decode would. */
export function busy(us: number): void {
  const until = performance.now() + us / 1000;
  while (performance.now() < until);
}

/** Writes one signalling document to stdout. */
export const say = (doc: unknown) => process.stdout.write(`${JSON.stringify(doc)}\n`);

/**
 * The answerer `peer` takes the offer and candidates from stdin and says its answer and
 * candidates on stdout; when stdin closes, `onEnd` runs and the process exits.
 */
export function answerOverStdio(peer: RtcPeer, onEnd: () => void = () => undefined): void {
  peer.onLocalDescription = (answer) => say({ answer });
  peer.onLocalCandidate = (candidate) => say({ candidate });
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
    onEnd();
    peer.close();
    releaseNodeRtc();
    process.exit(0);
  });
}
