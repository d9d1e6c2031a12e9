/**
 * MUTP over QUIC datagrams end to end: proxies run their WebTransport endpoint (@mutp/quic), origo
 * hands clients its URL and certificate hashes, the Node client connects to it directly with its
 * origo token, and downloads are byte-exact in every mode; a proxy whose QUIC endpoint cannot be
 * reached is served over WebRTC instead; the QUIC port refuses what has no valid token, and the
 * token origo gave for another proxy.
 */
import { createHash } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { Mode } from '@mutp/shared';
import { GetResult, MutpClient, TransportPreference } from '@mutp/shared/client';
import { releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { QuicClient, QuicConnectError } from '@mutp/quic';
import { createNodeHost } from '@mutp/client';
import { Cluster, clientToken, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';

jest.setTimeout(120_000);

let codecs: Awaited<ReturnType<typeof loadNodeCodecs>>;
let origin: Origin;

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startOrigin();
});

afterAll(async () => {
  await origin.close();
  releaseNodeRtc();
});

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const transports = (r: GetResult) => r.sources.map((s) => ('transport' in s ? s.transport : 'http'));

function newClient(cluster: Cluster, transport: TransportPreference, trace?: (line: string) => void): MutpClient {
  // A QUIC handshake that WebRTC overtook runs on to this timeout (it cannot be cancelled): short,
  // so the blackholed one ends with its test.
  return new MutpClient(createNodeHost(), {
    origoUrl: cluster.clientUrl,
    codecs,
    transport,
    trace,
    connectTimeoutMs: 2000,
  });
}

/** Opens a raw session (no MUTP client) and closes it at once: 'admitted', or why it was not. */
function connectOutcome(url: string, hashes: Uint8Array[], connectTimeoutMs?: number): Promise<string> {
  return QuicClient.connect({
    url,
    serverCertificateHashes: hashes,
    connectTimeoutMs,
    onDatagram: () => undefined,
  }).then(
    (s) => {
      s.close();
      return 'admitted';
    },
    (e: unknown) => (e instanceof QuicConnectError ? e.code : String(e)),
  );
}

interface OfferedProxy {
  proxyId: string;
  quic?: { url: string; certificateHashes: string[] };
  /** The client's token for this proxy alone. */
  token?: string;
  /** The key the proxy signs its METAs with. */
  assertionKey?: string;
}

describe('three proxies with QUIC endpoints', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({
      proxies: [0, 1, 2].map((i) => ({ name: `q${i}`, uploadKBps: 0 })),
      allowPrivateOrigins: true,
      quic: true,
    });
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test.each(['uncoded', 'rlnc', 'fountain'] as Mode[])(
    '%s over QUIC only: byte-exact, every source on QUIC',
    async (mode) => {
      const client = newClient(cluster, 'quic');
      try {
        const bytes = 900_000 + mode.length;
        const url = `${origin.url}/object/${bytes}/${mode.length}`;
        const result = (await client.get(url, { mode, proxies: 3 })) as GetResult;
        expect(sha(result.object)).toBe(sha(syntheticObject(bytes, mode.length)));
        expect(transports(result)).toEqual(['quic', 'quic', 'quic']);
      } finally {
        client.close();
      }
    },
  );

  test('every offered proxy publishes its own assertion key, and downloads count only METAs it signed', async () => {
    const offered = await offeredProxies(cluster);
    const keys = offered.map((p) => p.assertionKey);
    expect(keys.every((k) => typeof k === 'string' && /^[A-Za-z0-9_-]{43}$/.test(k))).toBe(true);
    expect(new Set(keys).size).toBe(offered.length);
    const client = newClient(cluster, 'auto');
    try {
      const result = (await client.get(`${origin.url}/object/300000/31`, { mode: 'rlnc', proxies: 3 })) as GetResult;
      // A source whose META failed its signature would be 'dropped' ("not signed by the key ...").
      expect(result.sources.map((s) => ('state' in s ? s.state : 'http'))).toEqual(['active', 'active', 'active']);
    } finally {
      client.close();
    }
  });

  test('auto prefers QUIC; webrtc uses none; both verify the same object', async () => {
    const url = `${origin.url}/object/700000/77`;
    for (const [transport, expected] of [
      ['auto', 'quic'],
      ['webrtc', 'webrtc'],
    ] as const) {
      const client = newClient(cluster, transport);
      try {
        const result = (await client.get(url, { mode: 'rlnc', proxies: 3 })) as GetResult;
        expect(sha(result.object)).toBe(sha(syntheticObject(700_000, 77)));
        expect(transports(result)).toEqual([expected, expected, expected]);
      } finally {
        client.close();
      }
    }
  });

  test('the QUIC port refuses a session without a token, with a forged one, and to another path', async () => {
    const offered = await offeredProxies(cluster);
    const endpoint = offered[0].quic!;
    const hashes = endpoint.certificateHashes.map((h) => new Uint8Array(Buffer.from(h, 'base64')));
    const token = await clientToken(cluster.clientUrl);
    const [head, body] = token.split('.');
    const attempts = [
      endpoint.url,
      `${endpoint.url}?token=${head}.${body}.AAAA`,
      `${endpoint.url.replace(/\/mutp$/, '/other')}?token=${token}`,
    ];
    for (const url of attempts) {
      expect(await connectOutcome(url, hashes)).toBe('refused');
    }
    // A valid token is admitted: the refusals above were about the token and the path.
    const session = await QuicClient.connect({
      url: `${endpoint.url}?token=${token}`,
      serverCertificateHashes: hashes,
      onDatagram: () => undefined,
    });
    // Garbage on an admitted session: ignored by the endpoint, the proxy keeps serving.
    for (let i = 0; i < 200; i++) session.sendDatagram(new Uint8Array(1 + (i % 1100)).fill(i));
    session.close();
    const client = newClient(cluster, 'quic');
    try {
      const result = (await client.get(`${origin.url}/object/300000/5`, { mode: 'rlnc', proxies: 3 })) as GetResult;
      expect(sha(result.object)).toBe(sha(syntheticObject(300_000, 5)));
    } finally {
      client.close();
    }
  });

  test("a proxy's token from the offer is admitted there and refused at every other proxy", async () => {
    const offered = await offeredProxies(cluster);
    expect(offered).toHaveLength(3);
    const [a, b] = offered;
    const hashesOf = (p: OfferedProxy) =>
      p.quic!.certificateHashes.map((h) => new Uint8Array(Buffer.from(h, 'base64')));
    expect(await connectOutcome(`${a.quic!.url}?token=${a.token}`, hashesOf(a))).toBe('admitted');
    // What a hostile proxy could do with the token its client presented to it: nothing elsewhere.
    expect(await connectOutcome(`${b.quic!.url}?token=${a.token}`, hashesOf(b))).toBe('refused');
    expect(await connectOutcome(`${b.quic!.url}?token=${b.token}`, hashesOf(b))).toBe('admitted');
  });

  test('a flood of sessions with forged tokens is refused and costs the proxy nothing lasting', async () => {
    const offered = await offeredProxies(cluster);
    const endpoint = offered[0].quic!;
    const hashes = endpoint.certificateHashes.map((h) => new Uint8Array(Buffer.from(h, 'base64')));
    const token = await clientToken(cluster.clientUrl);
    const [head, body] = token.split('.');
    // 150 handshakes at once, beyond the 64 that may wait for their token check: each is refused
    // (by the check, or by the native side's bound on pending requests), none is served.
    const outcomes = await Promise.all(
      Array.from({ length: 150 }, (_, i) =>
        connectOutcome(
          `${endpoint.url}?token=${head}.${body}.${Buffer.from(`forged-${i}`).toString('base64url')}`,
          hashes,
          20_000,
        ),
      ),
    );
    expect(outcomes.filter((o) => o === 'admitted')).toEqual([]);
    // Refused by the token check (HTTP 403), or past the pending bound by the QUIC stack (the
    // connection closed: 'failed'); none waited out its timeout.
    expect(outcomes.filter((o) => o !== 'refused' && o !== 'failed')).toEqual([]);
    expect(outcomes.filter((o) => o === 'refused').length).toBeGreaterThan(0);
    const client = newClient(cluster, 'quic');
    try {
      const result = (await client.get(`${origin.url}/object/400000/6`, { mode: 'fountain', proxies: 3 })) as GetResult;
      expect(sha(result.object)).toBe(sha(syntheticObject(400_000, 6)));
    } finally {
      client.close();
    }
  });

  test('a certificate hash origo did not hand out is not accepted', async () => {
    const offered = await offeredProxies(cluster);
    const token = await clientToken(cluster.clientUrl);
    const outcome = await connectOutcome(`${offered[0].quic!.url}?token=${token}`, [new Uint8Array(32).fill(7)]);
    expect(outcome).toBe('certificate');
  });
});

describe('a proxy whose QUIC port is unreachable', () => {
  let cluster: Cluster;
  let blackhole: ReturnType<typeof createSocket>;

  beforeAll(async () => {
    // A UDP port that swallows everything: the advertised QUIC endpoint never answers.
    blackhole = createSocket('udp4');
    await new Promise<void>((resolve) => blackhole.bind(0, '127.0.0.1', resolve));
    const port = blackhole.address().port;
    cluster = await startCluster({
      proxies: [
        { name: 'open', uploadKBps: 0 },
        { name: 'blocked', uploadKBps: 0, extraArgs: ['--advertised-quic-url', `https://127.0.0.1:${port}/mutp`] },
      ],
      allowPrivateOrigins: true,
      quic: true,
    });
  });

  afterAll(async () => {
    await cluster?.stop();
    blackhole?.close();
  });

  test('is served over WebRTC while the other stays on QUIC, in one download', async () => {
    const trace: string[] = [];
    const client = newClient(cluster, 'auto', (line) => trace.push(line));
    try {
      const result = (await client.get(`${origin.url}/object/600000/3`, { mode: 'rlnc', proxies: 2 })) as GetResult;
      expect(sha(result.object)).toBe(sha(syntheticObject(600_000, 3)));
      const byName = Object.fromEntries(result.sources.map((s, i) => [s.name, transports(result)[i]]));
      expect(byName).toEqual({ open: 'quic', blocked: 'webrtc' });
    } finally {
      client.close();
    }
  });
});

/** What origo offers a fresh client, QUIC endpoints included. */
async function offeredProxies(cluster: Cluster): Promise<OfferedProxy[]> {
  const { OrigoSession, systemClock } = await import('@mutp/shared/client');
  const { default: WebSocket } = await import('ws');
  const session = new OrigoSession(
    cluster.clientUrl,
    (url) => new WebSocket(url) as unknown as import('@mutp/shared/client').WebSocketLike,
    systemClock,
    10_000,
  );
  try {
    await session.connect();
    return (await session.requestProxies(3, 'rlnc')) as OfferedProxy[];
  } finally {
    session.close();
  }
}
