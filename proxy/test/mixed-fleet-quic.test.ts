/**
 * A mixed fleet on real sockets (issue 34): two proxies (createProxy, registered with an
 * in-process origo, serving MUTP over their QUIC endpoints) of which one runs with
 * `disabledFeatures` (`--disable-features`), and the client orchestration's runDownload over QUIC
 * sessions opened with origo's per-proxy tokens; the client one release behind too. Downloads are
 * byte-exact, and each proxy answered (no source lost to a datagram it could not read). The
 * offers' capability lists are set here as origo passes them once a proxy's registration
 * declares them (proxy/test/mixed-fleet-origo.test.ts checks origo's part).
 */
import { QuicClient, QuicSession } from '@mutp/quic';
import { rlncCodec, SourceEndpoint, type ProxyInfo } from '@mutp/shared';
import { type Clock, type LinkTransport, ProxyLink, runDownload } from '@mutp/shared/client';
import { makeObject, objectOrigin, type TestServer } from '@mutp/testing/origin';
import { closeAll, connectClient, SECRET, startOrigo } from '@mutp/testing/origo';
import { createTestProxy, type Proxy } from '@mutp/testing/proxy';
import { until, within } from '@mutp/testing/wait';

jest.setTimeout(60_000);

const OBJECT = makeObject(400_000, 34);
type Features = Parameters<typeof SourceEndpoint.declaredFeatures>[0];

const clock: Clock = {
  now: () => performance.now(),
  setTimer: (delayMs, callback, background) => {
    const timer = setTimeout(callback, delayMs);
    if (background) timer.unref();
    return () => clearTimeout(timer);
  },
};

/** A QUIC session as a proxy link's transport. */
class QuicTransport implements LinkTransport {
  readonly kind = 'quic';
  onDatagram?: (bytes: Uint8Array, receivedAt?: number) => void;
  onClose?: (reason: string) => void;
  session?: QuicSession;
  private ended = false;

  get isOpen(): boolean {
    return !this.ended && this.session !== undefined;
  }

  send(bytes: Uint8Array): boolean {
    return this.isOpen && this.session!.queueDatagram(bytes);
  }

  close(reason = 'closed'): void {
    if (this.ended) return;
    this.ended = true;
    this.session?.close(0, reason);
  }

  static async open(proxy: ProxyInfo): Promise<QuicTransport> {
    const transport = new QuicTransport();
    const url = new URL(proxy.quic!.url);
    url.searchParams.set('token', proxy.token!);
    transport.session = await QuicClient.connect({
      url: url.toString(),
      serverCertificateHashes: proxy.quic!.certificateHashes!.map((h) => new Uint8Array(Buffer.from(h, 'base64'))),
      connectTimeoutMs: 5000,
      onDatagram: (data, receivedAt) => !transport.ended && transport.onDatagram?.(data, receivedAt),
      onClosed: (_code, reason) => {
        if (transport.ended) return;
        transport.ended = true;
        transport.onClose?.(reason || 'session closed');
      },
    });
    return transport;
  }
}

let origin: TestServer;
let proxies: Proxy[] = [];

beforeAll(async () => {
  origin = await objectOrigin({ '/seg.bin': OBJECT });
});

afterAll(async () => {
  await origin.close();
});

afterEach(async () => {
  await Promise.all(proxies.map((p) => p.close()));
  proxies = [];
  await closeAll();
});

/** Proxies with these features off, registered with a new origo; the offers, as a client gets them. */
async function fleet(disabled: Features[]): Promise<ProxyInfo[]> {
  const { origo, port } = await startOrigo({ allowLocalProxies: true });
  for (const [i, off] of disabled.entries()) {
    const proxy = await createTestProxy(
      {
        name: `edge-${i}`,
        origoUrl: `ws://127.0.0.1:${port}/v1/proxy`,
        secret: SECRET,
        quicPort: 0,
        ...(off && off.length > 0 ? { disabledFeatures: off } : {}),
      },
      { codecs: { rlnc: rlncCodec } },
    );
    proxies.push(proxy);
    await proxy.start();
  }
  await until(() => origo.counts().proxies === disabled.length, 10_000, 'the proxies to register');
  const client = await connectClient(port);
  client.send({ type: 'request-proxies', requestId: 'q1', count: disabled.length, mode: 'rlnc' });
  const offered = (await client.next('proxies')).proxies as ProxyInfo[];
  return offered.map((p) => {
    const i = Number(p.name.replace('edge-', ''));
    return { ...p, capabilities: SourceEndpoint.declaredFeatures(disabled[i]) };
  });
}

async function download(offered: ProxyInfo[], clientDisabled: Features) {
  const links = offered.map((p) => new ProxyLink(p, { clock }));
  try {
    await Promise.all(links.map((link) => link.connect(() => QuicTransport.open(link.proxy), 5000)));
    return await within(
      runDownload(links, clock, {
        url: `${origin.url}/seg.bin`,
        mode: 'rlnc',
        window: 240,
        generationSize: 24,
        symbolSize: 1120,
        codec: rlncCodec,
        transferId: 34,
        disabledFeatures: clientDisabled,
      }),
      30_000,
      'the download',
    );
  } finally {
    links.forEach((link) => link.close());
  }
}

function expectServedByAll(result: Awaited<ReturnType<typeof download>>, count: number): void {
  expect(Buffer.from(result.object).equals(Buffer.from(OBJECT))).toBe(true);
  expect(result.sources).toHaveLength(count);
  for (const s of result.sources) {
    expect([s.name, s.malformed, s.polluter, s.useful > 0]).toEqual([s.name, 0, false, true]);
    expect(s.state).not.toBe('failed');
  }
}

test('a proxy one release behind beside a current one: byte-exact, both serve', async () => {
  const offered = await fleet([[], ['resume', 'weights', 'partitioned', 'attributes', 'extensions']]);
  const result = await download(offered, []);
  expectServedByAll(result, 2);
  // The old proxy has no attributes: no Content-Type is agreed on (docs/protocol.md §13).
  expect(result.attributes?.contentType).toBeUndefined();
});

test('a client one release behind on current proxies: byte-exact, sent unsigned METAs it can read', async () => {
  const offered = await fleet([[], []]);
  const result = await download(offered, ['signatures', 'weights', 'partitioned', 'symbol-digests']);
  expectServedByAll(result, 2);
  expect(result.attributes?.contentType).toBe('video/mp4');
});
