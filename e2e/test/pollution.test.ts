/**
 * A polluting proxy over real processes (issue 9, finding 5): origo and two honest proxies as
 * child processes, plus a hostile proxy played by this test. It registers with origo like any
 * proxy, answers WebRTC offers, speaks MUTP with a real Sender over the real object, and corrupts
 * every third DATA payload it sends. The download must complete byte-exact from the honest
 * proxies (no HTTP fallback), name the hostile one, and the client must report it to origo.
 *
 * Then a liar (issue 31, evidence): a proxy that registers an assertion key and signs a META for
 * another object under the origin's own ETag. The download fails (`metadata-conflict`, the
 * caller falls back), the client hands origo both signed METAs, origo fetches the origin, finds
 * the liar's statement contradicted and stops offering it.
 *
 * Last, an origin that changed an object between two honest proxies' fetches: their signed METAs
 * differ, origo finds which one the origin still serves and tells the other proxy its copy is
 * stale (`stale`); that proxy drops it and the next download agrees.
 */
import { createHash, generateKeyPairSync, KeyObject, sign } from 'node:crypto';
import WebSocket from 'ws';
import {
  Codec,
  DATA_FOUNTAIN_HEADER_BYTES,
  DATA_RLNC_HEADER_BYTES,
  DATA_UNCODED_HEADER_BYTES,
  DatagramChannel,
  decode,
  MessageType,
  MetaSigner,
  Mode,
  RtcPeer,
  seededRandom,
  Sender,
  SIGNALLING_VERSION,
} from '@mutp/shared/internal';
import { ClientError, DownloadResult, MutpClient } from '@mutp/shared/client';
import { createNodeRtcFactory, releaseNodeRtc } from '@mutp/node-rtc';
import { loadNodeCodecs } from '@mutp/wasm/node';
import { createNodeHost } from '@mutp/client';
import { Cluster, startCluster } from '../src/cluster';
import { Origin, startOrigin, syntheticObject } from '../src/origin';

const sha = (d: Uint8Array) => createHash('sha256').update(d).digest('hex');
const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());

let codecs: Record<Mode, Codec>;
let origin: Origin;
let cluster: Cluster;
let hostile: HostileProxy;

/** What a hostile proxy does: corrupt every third DATA payload, or sign a META for another object. */
type Hostility = 'corrupt-data' | 'signed-lie';

/** A proxy that pollutes: real signalling, real WebRTC, real MUTP, corrupt payloads or a signed lie. */
class HostileProxy {
  private readonly ws: WebSocket;
  private readonly peers = new Map<string, RtcPeer>();
  private readonly rtc = createNodeRtcFactory({ name: 'hostile' });
  private heartbeat?: NodeJS.Timeout;
  private pump?: NodeJS.Timeout;
  private readonly senders: { sender: Sender; data: DatagramChannel }[] = [];
  proxyId?: string;
  corrupted = 0;
  private readonly key: KeyObject;
  private readonly publicKey: string;

  constructor(
    url: string,
    proxyId: string,
    secret: string,
    private readonly hostility: Hostility = 'corrupt-data',
  ) {
    const pair = generateKeyPairSync('ed25519');
    this.key = pair.privateKey;
    this.publicKey = pair.publicKey.export({ format: 'jwk' }).x as string;
    this.ws = new WebSocket(url);
    this.ws.on('open', () =>
      this.send({
        type: 'register',
        version: SIGNALLING_VERSION,
        proxyId,
        secret,
        name: proxyId,
        // Every proxy registers the key it signs its METAs with.
        assertionKey: this.publicKey,
        httpUrl: 'http://127.0.0.1:9/',
        // Claims the most capacity, so origo offers it first (finding 1's other half).
        capacityBps: 1e9,
        maxTransfers: 16,
        modes: ['uncoded', 'rlnc', 'fountain'],
      }),
    );
    this.ws.on('message', (raw) => this.onSignal(JSON.parse(String(raw)) as Record<string, unknown>));
    this.ws.on('error', () => {});
    // Late binding as the real proxy does it, but simply: every 2 ms, while the channel takes it.
    this.pump = setInterval(() => this.pumpAll(), 2);
  }

  async registered(): Promise<void> {
    for (let i = 0; i < 250 && !this.proxyId; i++) await new Promise((r) => setTimeout(r, 20));
    if (!this.proxyId) throw new Error('the hostile proxy did not register with origo within 5 s');
  }

  private send(m: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
  }

  private onSignal(m: Record<string, unknown>): void {
    if (m.type === 'registered') {
      this.proxyId = m.proxyId as string;
      this.heartbeat = setInterval(
        () => this.send({ type: 'heartbeat', activeTransfers: 0, uploadBps: 0, capacityBps: 1e9 }),
        m.heartbeatIntervalMs as number,
      );
      return;
    }
    if (m.type !== 'signal') return;
    const connectionId = m.connectionId as string;
    let peer = this.peers.get(connectionId);
    if (m.description) {
      peer = this.rtc.createPeer('answerer');
      this.peers.set(connectionId, peer);
      peer.onLocalDescription = (description) => this.send({ type: 'signal', connectionId, description });
      peer.onLocalCandidate = (candidate) => this.send({ type: 'signal', connectionId, candidate });
      const channels: Partial<Record<string, DatagramChannel>> = {};
      peer.onChannel = (channel) => {
        channels[channel.label] = channel;
        if (channel.label === 'mutp-feedback')
          channel.onMessage = (bytes) => void this.onClientDatagram(bytes, channels);
      };
      peer.setRemoteDescription(m.description as { type: 'offer'; sdp: string });
    } else if (peer && m.candidate) {
      peer.addRemoteCandidate(m.candidate as { candidate: string; mid: string });
    }
  }

  private async onClientDatagram(bytes: Uint8Array, channels: Partial<Record<string, DatagramChannel>>) {
    const m = decode(bytes);
    if (!m.ok) return;
    const known = this.senders.find((s) => s.sender.transferId === m.value.transferId);
    if (known) return known.sender.handleDatagram(bytes, performance.now());
    if (m.value.type !== MessageType.Request || !channels['mutp-data']) return;
    const request = m.value;
    const response = await fetch(request.url);
    const real = new Uint8Array(await response.arrayBuffer());
    if (this.senders.some((s) => s.sender.transferId === request.transferId)) return;
    // The corrupter states the honest proxies' identity (Content-Type included) and pollutes data;
    // the liar states another object of the same length under the origin's own ETag, and signs it.
    const lie = this.hostility === 'signed-lie';
    const object = lie ? syntheticObject(real.length, 4242) : real;
    const contentType = response.headers.get('content-type') ?? undefined;
    const etag = response.headers.get('etag') ?? undefined;
    const signer: MetaSigner = {
      proxyId: this.proxyId!,
      sign: (message) => new Uint8Array(sign(null, message, this.key)),
    };
    const sender = new Sender({
      request,
      object,
      ...(contentType !== undefined ? { attributes: { contentType } } : {}),
      digest: sha256(object),
      codec: codecs[request.mode],
      random: seededRandom(7),
      now: performance.now(),
      sha256,
      // Both sign what they state, as any registered proxy does (an unsigned META would not count).
      signer,
      provenance: { fetchedAt: Date.now(), ...(etag ? { validator: { kind: 'etag' as const, value: etag } } : {}) },
    });
    this.senders.push({ sender, data: channels['mutp-data']! });
  }

  private pumpAll(): void {
    const now = performance.now();
    for (const { sender, data } of this.senders) {
      const deadline = sender.nextDeadline();
      if (deadline !== null && deadline <= now) sender.handleTimeout(now);
      while (data.isOpen && data.bufferedAmount < 64 * 1024) {
        const d = sender.pollDatagram(now);
        if (!d) break;
        const header = { 3: DATA_UNCODED_HEADER_BYTES, 4: DATA_RLNC_HEADER_BYTES, 5: DATA_FOUNTAIN_HEADER_BYTES }[d[1]];
        if (this.hostility === 'corrupt-data' && header !== undefined && sender.stats.dataSent % 3 === 0) {
          d[header] ^= 0xa5;
          this.corrupted++;
        }
        data.send(d);
      }
    }
  }

  close(): void {
    clearInterval(this.heartbeat);
    clearInterval(this.pump);
    for (const s of this.senders) s.sender.close();
    for (const p of this.peers.values()) p.close();
    this.ws.close();
  }
}

beforeAll(async () => {
  codecs = await loadNodeCodecs();
  origin = await startOrigin();
  cluster = await startCluster({
    proxies: [0, 1].map((i) => ({ name: `honest${i}`, uploadKBps: 0 })),
    allowPrivateOrigins: true,
    logLevel: 'info',
    extraProxyIds: ['hostile', 'liar'],
  });
  hostile = new HostileProxy(
    `${cluster.origoUrl.replace(/^http/, 'ws')}/v1/proxy`,
    'hostile',
    cluster.proxyKeys.hostile,
  );
  await hostile.registered();
});

afterAll(async () => {
  hostile?.close();
  await cluster?.stop();
  await origin?.close();
  releaseNodeRtc();
});

test.each<Mode>(['rlnc', 'uncoded', 'fountain'])(
  '%s: a polluting proxy is identified and excluded, the download completes byte-exact from the honest ones, origo gets the report',
  async (mode) => {
    const client = new MutpClient(createNodeHost(), {
      origoUrl: `${cluster.origoUrl.replace(/^http/, 'ws')}/v1/client`,
      codecs,
    });
    try {
      const bytes = 300_000;
      const seed = { rlnc: 1, uncoded: 2, fountain: 3 }[mode];
      const result = (await client.get(`${origin.url}/object/${bytes}/${seed}`, {
        mode,
        proxies: 3,
      })) as DownloadResult;
      expect(sha(result.object)).toBe(sha(syntheticObject(bytes, seed)));
      const bad = result.sources.find((s) => s.proxyId === hostile.proxyId);
      if (!bad)
        throw new Error(
          `the hostile proxy ${hostile.proxyId} took no part: ${JSON.stringify(result.sources.map((s) => [s.proxyId, s.state, s.error]))}`,
        );
      expect(bad).toMatchObject({ polluter: true, state: 'dropped' });
      expect(result.sources.filter((s) => s.polluter)).toHaveLength(1);
      expect(hostile.corrupted).toBeGreaterThan(0);
      const until = Date.now() + 10_000;
      while (!cluster.origoLog.some((l) => l.includes('pollution report') && l.includes(hostile.proxyId!))) {
        if (Date.now() > until) throw new Error('origo logged no pollution report for the hostile proxy within 10 s');
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      client.close();
    }
  },
);

test("a proxy that signs a META for another object under the origin's ETag is proven false by origo and no longer offered", async () => {
  const liar = new HostileProxy(
    `${cluster.origoUrl.replace(/^http/, 'ws')}/v1/proxy`,
    'liar',
    cluster.proxyKeys.liar,
    'signed-lie',
  );
  const client = new MutpClient(createNodeHost(), {
    origoUrl: `${cluster.origoUrl.replace(/^http/, 'ws')}/v1/client`,
    codecs,
  });
  try {
    await liar.registered();
    const url = `${origin.url}/object/200000/9`;
    // The two honest proxies and the liar (the data polluter is left out).
    const failure = await client.get(url, { mode: 'rlnc', proxies: 3, exclude: ['hostile'] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(ClientError);
    expect((failure as ClientError).code).toBe('download-failed');
    expect((failure as ClientError).message).toMatch(/disagrees|disagree/);
    const until = Date.now() + 15_000;
    while (!cluster.origoLog.some((l) => l.includes('proxy proven false') && l.includes('liar'))) {
      if (Date.now() > until)
        throw new Error(
          `origo proved nothing within 15 s:\n${cluster.origoLog.filter((l) => l.includes('conflict')).join('\n')}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
    // Not offered any more: the same download now completes from the honest proxies alone.
    const result = (await client.get(url, { mode: 'rlnc', proxies: 3, exclude: ['hostile'] })) as DownloadResult;
    expect(sha(result.object)).toBe(sha(syntheticObject(200_000, 9)));
    expect(result.sources.map((s) => s.proxyId)).not.toContain('liar');
  } finally {
    client.close();
    liar.close();
  }
});

test("an object the origin changed between two proxies' fetches: origo finds the stale copy, its proxy drops it, the next download agrees", async () => {
  const client = new MutpClient(createNodeHost(), {
    origoUrl: `${cluster.origoUrl.replace(/^http/, 'ws')}/v1/client`,
    codecs,
  });
  try {
    const ids = Object.fromEntries((await cluster.listProxies()).map((p) => [p.name, p.proxyId]));
    const path = '/changing/150000/40';
    const url = `${origin.url}${path}`;
    const others = ['hostile', 'liar'];
    // honest0 caches version 0; the origin changes; honest1 caches version 1.
    await client.get(url, { mode: 'rlnc', proxies: 1, exclude: [...others, ids.honest1] });
    origin.change(path);
    const v1 = (await client.get(url, {
      mode: 'rlnc',
      proxies: 1,
      exclude: [...others, ids.honest0],
    })) as DownloadResult;
    expect(sha(v1.object)).toBe(sha(syntheticObject(150_000, 1040)));
    const both = { mode: 'rlnc' as const, proxies: 2, exclude: others };
    const failure = await client.get(url, both).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((failure as ClientError).message).toMatch(/disagree/);
    const until = Date.now() + 15_000;
    while (!cluster.origoLog.some((l) => l.includes('conflict judged') && l.includes(path))) {
      if (Date.now() > until)
        throw new Error(
          `origo judged no conflict within 15 s:\n${cluster.origoLog.filter((l) => l.includes('conflict')).join('\n')}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
    // The stale message travels origo -> honest0 after the verdict: a download may still meet
    // the old copy for a moment, so try a few times (bounded).
    let agreed: DownloadResult | undefined;
    for (let attempt = 0; attempt < 20 && !agreed; attempt++) {
      agreed = await client.get(url, both).then(
        (r) => r as DownloadResult,
        () => undefined,
      );
      if (!agreed) await new Promise((r) => setTimeout(r, 250));
    }
    if (!agreed) throw new Error('downloads from both honest proxies still disagree 5 s after the verdict');
    expect(sha(agreed.object)).toBe(sha(syntheticObject(150_000, 1040)));
    expect(agreed.sources.map((s) => s.proxyId).sort()).toEqual([ids.honest0, ids.honest1].sort());
  } finally {
    client.close();
  }
});
