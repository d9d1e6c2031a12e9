/**
 * How a TransferHost under the upload limit sends: a real SourceEndpoint serving an in-memory
 * object, the proxy's token bucket and Pacer, and a channel that records sends. The clock and the
 * pacer's timer are the test's (no real time): what is checked is how many datagrams leave at
 * each wake-up, not when.
 */
import { DATA_CHANNEL_LABEL, type DatagramChannel, decode, encodeRequest, MessageType } from '@mutp/shared/internal';
import { Admission, uncodedCodec } from '@mutp/shared';
import { ProxyMetrics } from '../src/metrics';
import { ObjectCache } from '../src/object-cache';
import { Pacer, PacerTimers } from '../src/pacer';
import { RateMeter } from '../src/rate-meter';
import { TokenBucket } from '../src/token-bucket';
import { TransferHost } from '../src/transfer-host';
import { makeObject, silentLogger } from './helpers';

/** An open data channel that keeps what the host sends and never fills. */
class RecordingChannel implements DatagramChannel {
  readonly label = DATA_CHANNEL_LABEL;
  readonly isOpen = true;
  readonly bufferedAmount = 0;
  onOpen?: () => void;
  onMessage?: (bytes: Uint8Array) => void;
  onClose?: (reason?: string) => void;
  readonly sent: Uint8Array[] = [];
  send(bytes: Uint8Array): boolean {
    this.sent.push(bytes.slice());
    return true;
  }
  setLowWaterMark(): void {}
  close(): void {}
  /** DATA datagrams sent so far. */
  get dataSent(): number {
    return this.sent.filter((d) => {
      const m = decode(d);
      return m.ok && m.value.type === MessageType.DataUncoded;
    }).length;
  }
}

const RATE_BPS = 1_200_000; // 1200 B per ms: one full datagram a little over 1 ms
const QUANTUM_BYTES = 4 * 1200;

async function servingHost() {
  let now = 0;
  const bucket = new TokenBucket(RATE_BPS, 16 * 1200, 0);
  const timers: { fire: () => void; cleared: boolean }[] = [];
  const pacerTimers: PacerTimers = {
    set: (fire) => {
      const t = { fire, cleared: false };
      timers.push(t);
      return t;
    },
    clear: (handle) => {
      (handle as { cleared: boolean }).cleared = true;
    },
  };
  const pacer = new Pacer(bucket, QUANTUM_BYTES, pacerTimers);
  const object = makeObject(200_000, 3);
  const host = new TransferHost('client', {
    codecs: { uncoded: uncodedCodec },
    objects: new ObjectCache({ maxBytes: 1 << 20, fetch: async () => ({ bytes: object }) }),
    bucket,
    pacer,
    admission: new Admission({ maxTransfers: 4, maxPerClient: 4, memoryBytes: 16 << 20 }),
    metrics: new ProxyMetrics(),
    meter: new RateMeter(),
    logger: silentLogger(),
    seed: () => 7,
    clock: () => now,
  });
  const channel = new RecordingChannel();
  host.attach(channel);
  // Every token gone before the transfer starts: its first datagram waits for the pacer.
  expect(bucket.take(16 * 1200, 0)).toBe(true);
  channel.onMessage!(
    encodeRequest({
      transferId: 1,
      mode: 'uncoded',
      scheduler: 'partitioned',
      sourceIndex: 0,
      sourceCount: 1,
      window: 64,
      generationSize: 1,
      symbolSize: 1120,
      url: 'http://origin.test/object.bin',
    }),
  );
  // The object comes from the cache's (in-memory) fetch a few promise turns later.
  for (let turn = 0; turn < 50 && !pacer.isWaiting(hostResume(host)); turn++) await new Promise(setImmediate);
  return {
    host,
    channel,
    pacer,
    setNow: (ms: number) => (now = ms),
    /** Fires the pacer's armed timer (the one not cleared), as its setTimeout would. */
    firePacer() {
      const live = timers.filter((t) => !t.cleared);
      expect(live).toHaveLength(1);
      live[0].cleared = true;
      live[0].fire();
    },
  };
}

/** The function the host hands the pacer (the same one every time). */
function hostResume(host: TransferHost): () => void {
  return (host as unknown as { resume: () => void }).resume;
}

test('out of tokens, a datagram from the client does not send the few tokens since; the pacer sends the quantum back to back', async () => {
  const rig = await servingHost();
  try {
    expect(rig.pacer.isWaiting(hostResume(rig.host))).toBe(true);
    expect(rig.channel.sent).toHaveLength(0);
    // 1.5 ms later the bucket holds 1800 B, a datagram's worth: a datagram from the client (any,
    // here one it cannot read) must not send it alone.
    rig.setNow(1.5);
    rig.channel.onMessage!(new Uint8Array([0xff]));
    expect(rig.channel.sent).toHaveLength(0);
    // At the quantum's time the pacer's timer sends what the tokens allow, back to back: META and
    // DIGESTS first, then DATA (4800 B of tokens, datagrams of 1276 B at most).
    rig.setNow(4);
    rig.firePacer();
    expect(rig.channel.sent.length).toBeGreaterThanOrEqual(4);
    expect(rig.pacer.isWaiting(hostResume(rig.host))).toBe(true);
    // And the next quantum: DATA only now.
    rig.setNow(8);
    const before = rig.channel.dataSent;
    rig.firePacer();
    expect(rig.channel.dataSent - before).toBeGreaterThanOrEqual(4);
  } finally {
    rig.host.close();
  }
});
