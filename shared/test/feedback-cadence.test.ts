/**
 * How often the receiver sends FEEDBACK to a source (ReceiverConfig.ackEveryPackets): sparse
 * enough that a client's FEEDBACK costs little (issue 33: sending is most of a QUIC client's
 * native work), dense enough that the sender still learns of every packet it delivered. Its
 * acks reach 33 packets back (the largest seq and the 32-bit bitmap below it): a packet older
 * than that and not acked counts as lost (sent-packets.ts). In memory, on a virtual clock: one
 * source's data arrives in batches, as the QUIC addon hands datagrams over (several per call),
 * and the host answers after each batch, as download.ts does.
 */
import {
  decode,
  DEFAULT_RECEIVER_CONFIG,
  encodeDataUncoded,
  MessageType,
  Receiver,
  uncodedCodec,
} from '../src/internal';

const TRANSFER = 0x5eed0033;
const SYMBOL = 1120;
const PACKETS = 4000;
/** Data packets per batch, and the virtual time between batches (about 2.5 MB/s). */
const BATCH = 8;
const BATCH_MS = 4;

interface Ack {
  largestSeq: number;
  ackBits: number;
}

/** Runs the stream; returns every FEEDBACK's acks, in order. */
function feedbackOf(): Ack[] {
  const receiver = new Receiver({
    transferId: TRANSFER,
    url: 'https://origin.example/object',
    mode: 'uncoded',
    sourceCount: 1,
    window: 256,
    generationSize: 1,
    symbolSize: SYMBOL,
    codec: uncodedCodec,
    now: 0,
  });
  const payload = new Uint8Array(SYMBOL).fill(0x33);
  const acks: Ack[] = [];
  let now = 0;
  const poll = () => {
    for (let d = receiver.pollDatagram(now); d; d = receiver.pollDatagram(now)) {
      const m = decode(d.bytes);
      if (m.ok && m.value.type === MessageType.FeedbackUncoded)
        acks.push({ largestSeq: m.value.largestSeq, ackBits: m.value.ackBits });
    }
  };
  for (let seq = 0; seq < PACKETS;) {
    for (let k = 0; k < BATCH; k++, seq++)
      receiver.handleDatagram(0, encodeDataUncoded({ transferId: TRANSFER, seq, index: seq % 200, payload }), now);
    poll();
    now += BATCH_MS;
    const deadline = receiver.nextDeadline();
    if (deadline !== null && deadline <= now) receiver.handleTimeout(now);
    poll();
  }
  return acks;
}

/** Which seqs these FEEDBACKs acknowledge (the largest and the bitmap's 32 below it). */
function acknowledged(acks: Ack[]): Set<number> {
  const seen = new Set<number>();
  for (const a of acks) {
    seen.add(a.largestSeq);
    for (let i = 0; i < 32; i++) if ((a.ackBits >>> i) & 1) seen.add(a.largestSeq - 1 - i);
  }
  return seen;
}

test('FEEDBACK comes at most once per 12 data packets of a source in batches', () => {
  const acks = feedbackOf();
  console.log(
    `feedback cadence: ${acks.length} FEEDBACK for ${PACKETS} data packets (ackEveryPackets ${DEFAULT_RECEIVER_CONFIG.ackEveryPackets})`,
  );
  expect(acks.length).toBeGreaterThan(0);
  expect(acks.length).toBeLessThanOrEqual(PACKETS / 12);
});

test('with every other FEEDBACK lost, the ones that arrive still acknowledge every data packet', () => {
  const acks = feedbackOf();
  const last = acks[acks.length - 1].largestSeq;
  for (const parity of [0, 1]) {
    const arrived = acks.filter((_, i) => i % 2 === parity);
    const seen = acknowledged(arrived);
    // Up to the first FEEDBACK that arrived: what came before it is the first one's to cover.
    const missing = [];
    for (let seq = arrived[0].largestSeq; seq <= last - BATCH * 4; seq++) if (!seen.has(seq)) missing.push(seq);
    expect({ parity, missing: missing.slice(0, 5) }).toEqual({ parity, missing: [] });
  }
});
