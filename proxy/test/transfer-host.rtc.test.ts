/**
 * TransferHost end to end without origo: real node-datachannel peers on loopback (client side
 * from @mutp/node-rtc as offerer), the shared Receiver on the client, objects from a local
 * origin through the cache and the SSRF guard (private origins allowed for the test).
 */
import {
  Admission,
  Codec,
  decode,
  encodeRequest,
  encodeStop,
  ErrorCode,
  MessageType,
  Mode,
  seededRandom,
  StopReason,
} from '@mutp/shared/internal';
import { createNodeRtcFactory, releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { ProxyMetrics } from '../src/metrics';
import { ObjectCache } from '../src/object-cache';
import { ObjectSource } from '../src/object-source';
import { fetchOrigin } from '@mutp/origin-fetch';
import { RateMeter } from '../src/rate-meter';
import { TokenBucket } from '../src/token-bucket';
import { TransferHost, TransferServices } from '../src/transfer-host';
import {
  ClientSource,
  connectedLoopbackPair,
  download,
  LoopbackPair,
  makeObject,
  silentLogger,
  startServer,
  TestServer,
  until,
  within,
} from './helpers';

const OBJECT = makeObject(300_000, 1);
const BIG = makeObject(1024 * 1024, 2);
let codecs: Record<Mode, Codec>;
let origin: TestServer;
/** Origin requests to /hang… still open (the origin never answers them). */
let hanging = 0;
const factory = createNodeRtcFactory({ bindAddress: '127.0.0.1' });

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startServer((req, res) => {
    if (req.url?.startsWith('/hang')) {
      // Never answers; counts the connection until the proxy gives up on it.
      hanging++;
      req.socket.once('close', () => hanging--);
      return;
    }
    const body = req.url === '/object.bin' ? OBJECT : req.url === '/big.bin' ? BIG : undefined;
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': body.length }).end(body);
  });
});

afterAll(async () => {
  await origin.close();
  releaseNodeRtc();
});

function services(
  options: { uploadBps?: number; maxPerClient?: number; seed?: number; idleTimeoutMs?: number } = {},
): TransferServices {
  const policy = {
    allowedOrigins: '*' as const,
    allowPrivateOrigins: false,
    allowedClasses: new Set(['loopback' as const]),
  };
  const cache = new ObjectCache({
    maxBytes: 16 << 20,
    fetch: (url, control) =>
      fetchOrigin(url, {
        ...policy,
        maxBytes: 8 << 20,
        headersTimeoutMs: 5000,
        totalTimeoutMs: 5000,
        signal: control.signal,
        reserve: control.reserve,
      }),
  });
  const seeds = seededRandom(options.seed ?? 42);
  return {
    codecs,
    objects: new ObjectSource(policy, cache),
    bucket: new TokenBucket(options.uploadBps ?? 0, undefined, performance.now()),
    admission: new Admission({ maxTransfers: 64, maxPerClient: options.maxPerClient ?? 16, memoryBytes: 256 << 20 }),
    metrics: new ProxyMetrics(),
    meter: new RateMeter(),
    logger: silentLogger(),
    seed: seeds,
    endpointLimits: { idleTimeoutMs: options.idleTimeoutMs ?? 30_000 },
  };
}

interface Rig {
  hosts: TransferHost[];
  pairs: LoopbackPair[];
  sources: ClientSource[];
  close(): void;
}

/** N proxies' transfer hosts, each with its own loopback connection to the client. */
async function rig(all: TransferServices[]): Promise<Rig> {
  const hosts = all.map((s, i) => new TransferHost(`client-${i}`, s));
  const settled = await Promise.allSettled(
    hosts.map((host) => connectedLoopbackPair(factory, (channel) => host.attach(channel))),
  );
  const pairs = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const result: Rig = {
    hosts,
    pairs,
    sources: pairs.map((p) => ({ data: p.data, feedback: p.feedback })),
    close() {
      for (const h of hosts) h.close();
      for (const p of pairs) p.close();
    },
  };
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    result.close();
    throw failed.reason;
  }
  return result;
}

describe.each([1, 2])('N = %i transfer hosts', (n) => {
  test.each(['uncoded', 'rlnc', 'fountain'] as Mode[])('downloads 300 KB byte-exact in %s mode', async (mode) => {
    const all = Array.from({ length: n }, (_, i) => services({ seed: 100 + i }));
    const r = await rig(all);
    try {
      const rx = await within(
        download(r.sources, { url: `${origin.url}/object.bin`, mode, codec: codecs[mode] }),
        30_000,
        `${mode} download from ${n} hosts`,
      );
      expect(rx.error?.message).toBeUndefined();
      expect(rx.status).toBe('complete');
      expect(Buffer.from(rx.takeObject()).equals(Buffer.from(OBJECT))).toBe(true);
      const stats = rx.stats();
      // Every host contributed (with two, each serves part of the object).
      for (const s of stats.sources) expect(s.useful).toBeGreaterThan(0);
      // The STOPs end the senders; their slots are released.
      await until(() => r.hosts.every((h) => h.stats().transfersActive === 0), 10_000, 'senders ended');
      for (const s of all) expect(s.admission.activeTransfers).toBe(0);
      for (const h of r.hosts) {
        expect(h.stats().transfersStarted).toBe(1);
        expect(h.stats().malformed).toBe(0);
      }
    } finally {
      r.close();
    }
  });
});

test('an origin 404 reaches the client as ERROR OriginNotFound and fails the source', async () => {
  const r = await rig([services()]);
  try {
    const rx = await within(
      download(r.sources, { url: `${origin.url}/missing.bin`, mode: 'rlnc', codec: codecs.rlnc }),
      15_000,
      'download of a missing object',
    );
    expect(rx.status).toBe('failed');
    expect(rx.error?.code).toBe('all-sources-failed');
    const source = rx.stats().sources[0];
    expect(source.state).toBe('failed');
    expect(source.error).toContain(`origin not found (${ErrorCode.OriginNotFound})`);
    expect(source.error).toContain('404');
    expect(r.hosts[0].stats().errorsSent).toBeGreaterThanOrEqual(1);
  } finally {
    r.close();
  }
});

test('malformed datagrams are counted and ignored; the download completes', async () => {
  const r = await rig([services(), services()]);
  const garbage = [
    new Uint8Array([0xff]),
    new Uint8Array([1, 0x7f, 0, 0, 0, 7]), // unknown type
    new Uint8Array([1, 0x11, 0, 0, 0, 7, 0]), // truncated feedback
    new Uint8Array(2000), // too large
    encodeRequest({
      transferId: 999,
      mode: 'uncoded',
      scheduler: 'partitioned',
      sourceIndex: 0,
      sourceCount: 1,
      window: 16,
      generationSize: 1,
      symbolSize: 1120,
      url: `${origin.url}/object.bin`,
    }).subarray(0, 10), // truncated request
  ];
  let k = 0;
  try {
    const rx = await within(
      download(r.sources, {
        url: `${origin.url}/object.bin`,
        mode: 'rlnc',
        codec: codecs.rlnc,
        beforeSend: (_source, send) => send(garbage[k++ % garbage.length]),
      }),
      30_000,
      'download with garbage on the feedback channel',
    );
    expect(rx.status).toBe('complete');
    expect(Buffer.from(rx.takeObject()).equals(Buffer.from(OBJECT))).toBe(true);
    // Garbage on the data channel too (the proxy accepts messages on either channel).
    r.pairs[0].data.send(new Uint8Array([0, 1, 2, 3]));
    await until(() => r.hosts.every((h) => h.stats().malformed > 0), 5000, 'malformed datagrams counted');
    const total = r.hosts.reduce((sum, h) => sum + h.stats().malformed, 0);
    expect(total).toBeGreaterThanOrEqual(k * 0.5); // unreliable channels may drop a few
  } finally {
    r.close();
  }
});

/** Sends raw REQUESTs and collects what comes back on the data channel. */
function rawClient(pair: LoopbackPair) {
  const received: Uint8Array[] = [];
  const onMessage = (bytes: Uint8Array) => received.push(bytes);
  pair.data.onMessage = onMessage;
  pair.feedback.onMessage = onMessage;
  return {
    received,
    request(transferId: number, url: string, mode: Mode = 'rlnc', scheduler: 'partitioned' | 'rarest' = 'partitioned') {
      pair.feedback.send(
        encodeRequest({
          transferId,
          mode,
          scheduler,
          sourceIndex: 0,
          sourceCount: 1,
          window: 64,
          generationSize: 16,
          symbolSize: 1120,
          url,
        }),
      );
    },
    errorFor(transferId: number) {
      for (const bytes of received) {
        const d = decode(bytes);
        if (d.ok && d.value.type === MessageType.Error && d.value.transferId === transferId) return d.value;
      }
      return undefined;
    },
  };
}

/** Repeats `send` until `done()` (datagrams may be lost), bounded. */
async function retry(send: () => void, done: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 100 && !done(); i++) {
    send();
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!done()) throw new Error(`no answer: ${what}`);
}

test('unsupported scheduler, refused URL and the per-client limit are answered with ERROR', async () => {
  const r = await rig([services({ maxPerClient: 1 })]);
  const client = rawClient(r.pairs[0]);
  try {
    await retry(
      () => client.request(1, `${origin.url}/object.bin`, 'uncoded', 'rarest'),
      () => client.errorFor(1) !== undefined,
      'uncoded + rarest',
    );
    expect(client.errorFor(1)!.code).toBe(ErrorCode.Unsupported);

    await retry(
      () => client.request(2, 'file:///etc/passwd'),
      () => client.errorFor(2) !== undefined,
      'file: URL',
    );
    expect(client.errorFor(2)!.code).toBe(ErrorCode.BadRequest);

    // Transfer 3 hangs at the origin and holds this client's only slot: 4 is refused.
    client.request(3, `${origin.url}/hang`);
    await until(() => r.hosts[0].stats().transfersPending === 1, 5000, 'transfer 3 pending');
    await retry(
      () => client.request(4, `${origin.url}/object.bin`),
      () => client.errorFor(4) !== undefined,
      'over the per-client limit',
    );
    expect(client.errorFor(4)!.code).toBe(ErrorCode.Overloaded);
    // Datagrams for transfers the host does not have are counted, not answered.
    r.pairs[0].feedback.send(new Uint8Array([1, 0x20, 0, 0, 1, 0, 0])); // STOP for transfer 256
    await until(() => r.hosts[0].stats().unknownTransfer > 0, 5000, 'unknown transfer counted');
  } finally {
    r.close();
  }
});

test('the upload limit is shared through the token bucket and holds the sender back', async () => {
  const svc = services({ uploadBps: 896 * 1024 });
  const r = await rig([svc]);
  try {
    const rx = await within(
      download(r.sources, { url: `${origin.url}/big.bin`, mode: 'rlnc', codec: codecs.rlnc }),
      30_000,
      '1 MiB download at 896 KB/s',
    );
    expect(rx.status).toBe('complete');
    expect(Buffer.from(rx.takeObject()).equals(Buffer.from(BIG))).toBe(true);
    const bucket = svc.bucket.stats();
    expect(bucket.rateBps).toBe(896 * 1024);
    expect(bucket.bytesTaken).toBeGreaterThanOrEqual(BIG.length);
    expect(bucket.waits).toBeGreaterThan(0);
    expect(r.hosts[0].stats().uploadLimited).toBeGreaterThan(0);
  } finally {
    r.close();
  }
});

test('REQUEST/STOP storms leave no origin fetch behind: a STOP withdraws the fetch it started', async () => {
  const r = await rig([services({ maxPerClient: 4 })]);
  const client = rawClient(r.pairs[0]);
  try {
    for (let id = 1; id <= 300; id++) {
      client.request(id, `${origin.url}/hang?n=${id}`);
      r.pairs[0].feedback.send(encodeStop({ transferId: id, reason: StopReason.Cancelled }));
      if (id % 10 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Every REQUEST was either refused (the client at its limit of 4) or started a fetch its STOP
    // withdrew; a STOP that overtook its REQUEST leaves at most the 4 slots' worth hanging.
    await until(() => r.hosts[0].stats().transfersStarted > 0, 5000, 'the storm reached the host');
    const afterStorm = hanging;
    await until(
      () => hanging <= 4,
      3000,
      `origin fetches to drop to 4 or fewer (still ${hanging}, ${afterStorm} after the storm)`,
    );
    expect(r.hosts[0].stats().transfersPending).toBeLessThanOrEqual(4);
    r.hosts[0].close();
    await until(() => hanging === 0, 3000, `every origin fetch to close with the peer (still ${hanging})`);
  } finally {
    r.close();
  }
});

test('a peer without transfers is closed after the idle timeout', async () => {
  const r = await rig([services({ idleTimeoutMs: 1000 })]);
  try {
    let closed = false;
    r.hosts[0].onClosed = () => (closed = true);
    await until(() => closed, 5000, 'the idle peer to be closed');
    expect(r.hosts[0].isClosed).toBe(true);
  } finally {
    r.close();
  }
});
