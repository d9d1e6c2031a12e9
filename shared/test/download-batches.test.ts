/**
 * A transport that hands the client a whole batch of datagrams at once (the QUIC addon's shared
 * queue, a browser's WebTransport reads) must not make the source count delivered packets lost.
 * One FEEDBACK acknowledges its largest sequence number and the 32 below it (ack-tracker.ts), and
 * the Sender retires older unacknowledged packets as lost; the download's answers waited for the
 * end of the batch, so one FEEDBACK answered a burst of 64 and half of it counted as lost,
 * shrinking the source's window. The download now answers at least every FLUSH_EVERY_MESSAGES
 * datagrams within a batch. Real Receiver (runDownload) and real Sender, fake time.
 */
import { sha256 } from '@noble/hashes/sha256';
import { decode, DeadlineTimer, MessageType, rlncCodec, seededRandom, Sender } from '../src/internal';
import { ProxyLink, runDownload } from '../src/client';
import type { LinkTransport } from '../src/client';
import { FakeClock, objectOf, settle } from './helpers/fake-host';

const OBJECT = objectOf(300_000, 33);
const ONE_WAY_MS = 20;
/** What the source lets go at once: more than one FEEDBACK's reach of 33 packets. */
const BURST = 96;

/** The proxy's side is a bare Sender; whatever it may send arrives at the client together, one way later. */
class BurstTransport implements LinkTransport {
  readonly kind = 'test';
  isOpen = true;
  onDatagram?: (bytes: Uint8Array) => void;
  onClose?: (reason: string) => void;
  sender?: Sender;
  largestBatch = 0;
  private timer?: DeadlineTimer;

  constructor(private readonly clock: FakeClock) {}

  send(bytes: Uint8Array): boolean {
    this.clock.setTimer(ONE_WAY_MS, () => this.arrive(bytes));
    return true;
  }

  close(): void {
    this.isOpen = false;
    this.timer?.stop();
  }

  private arrive(bytes: Uint8Array): void {
    if (!this.isOpen) return;
    const now = this.clock.now();
    if (this.sender) this.sender.handleDatagram(bytes, now);
    else {
      const m = decode(bytes);
      if (!m.ok || m.value.type !== MessageType.Request) return;
      this.sender = new Sender({
        request: m.value,
        object: OBJECT,
        digest: sha256(OBJECT),
        codec: rlncCodec,
        random: seededRandom(34),
        now,
        sha256,
        // A warm source on a fast path: its window lets a whole burst go.
        config: { initialWindowPackets: BURST },
      });
      this.timer = new DeadlineTimer(
        this.sender,
        (at, fire) => this.clock.setTimer(at - this.clock.now(), fire),
        () => this.clock.now(),
        () => this.pump(),
      );
    }
    this.pump();
  }

  private pump(): void {
    const sender = this.sender!;
    const batch: Uint8Array[] = [];
    for (let d = sender.pollDatagram(this.clock.now()); d; d = sender.pollDatagram(this.clock.now()))
      batch.push(d.slice());
    this.timer!.arm();
    if (batch.length === 0) return;
    this.largestBatch = Math.max(this.largestBatch, batch.length);
    this.clock.setTimer(ONE_WAY_MS, () => {
      if (this.isOpen) for (const d of batch) this.onDatagram?.(d);
    });
  }
}

test('a batch of one source larger than a FEEDBACK reaches is answered within it: no delivered packet counted lost', async () => {
  const clock = new FakeClock();
  const transport = new BurstTransport(clock);
  const info = {
    proxyId: 'edge-0',
    name: 'edge-0',
    httpUrl: 'http://10.0.0.1:8080',
    capacityBps: 10_000_000,
  };
  const link = new ProxyLink(info, { clock, reconnect: () => Promise.resolve(transport), reconnectAttemptMs: 1000 });
  await link.connect(() => Promise.resolve(transport), 1000);
  try {
    const result = await settle(
      clock,
      runDownload([link], clock, {
        url: 'https://cdn.example/seg-2.m4s',
        mode: 'rlnc',
        window: 240,
        generationSize: 24,
        symbolSize: 1120,
        codec: rlncCodec,
        transferId: 78,
      }),
      60_000,
    );
    expect(Buffer.from(result.object).equals(Buffer.from(OBJECT))).toBe(true);
    // The path loses nothing, and the burst was bigger than one FEEDBACK's reach.
    expect(transport.largestBatch).toBeGreaterThan(33);
    expect(transport.sender!.stats.lost).toBe(0);
  } finally {
    link.close();
  }
});
