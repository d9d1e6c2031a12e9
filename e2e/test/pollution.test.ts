/**
 * A polluting proxy over real processes (issue 9, finding 5): origo and two honest proxies as
 * child processes, plus a hostile proxy played by this test. It registers with origo like any
 * proxy, answers WebRTC offers, speaks MUTP with a real Sender over the real object, and corrupts
 * every third DATA payload it sends. The download must complete byte-exact from the honest
 * proxies (no HTTP fallback), name the hostile one, and the client must report it to origo.
 */
import { createHash } from 'node:crypto';
import WebSocket from 'ws';
import {
  Codec,
  DATA_FOUNTAIN_HEADER_BYTES,
  DATA_RLNC_HEADER_BYTES,
  DATA_UNCODED_HEADER_BYTES,
  DatagramChannel,
  decode,
  MessageType,
  Mode,
  RtcPeer,
  seededRandom,
  Sender,
  SIGNALLING_VERSION,
} from '@mutp/shared';
import { DownloadResult, MutpClient } from '@mutp/shared/client';
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

/** A proxy that pollutes: real signalling, real WebRTC, real MUTP, corrupt payloads. */
class HostileProxy {
  private readonly ws: WebSocket;
  private readonly peers = new Map<string, RtcPeer>();
  private readonly rtc = createNodeRtcFactory({ name: 'hostile' });
  private heartbeat?: NodeJS.Timeout;
  private pump?: NodeJS.Timeout;
  private readonly senders: { sender: Sender; data: DatagramChannel }[] = [];
  proxyId?: string;
  corrupted = 0;

  constructor(url: string, proxyId: string, secret: string) {
    this.ws = new WebSocket(url);
    this.ws.on('open', () =>
      this.send({
        type: 'register',
        version: SIGNALLING_VERSION,
        proxyId,
        secret,
        name: 'hostile',
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
    const object = new Uint8Array(await response.arrayBuffer());
    if (this.senders.some((s) => s.sender.transferId === request.transferId)) return;
    // The same identity as the honest proxies state (Content-Type included): this proxy pollutes
    // data, not META (a META that disagrees fails the download instead: wasm/test/integrity.test.ts).
    const contentType = response.headers.get('content-type') ?? undefined;
    const sender = new Sender({
      request,
      object,
      ...(contentType !== undefined ? { attributes: { contentType } } : {}),
      digest: sha256(object),
      codec: codecs[request.mode],
      random: seededRandom(7),
      now: performance.now(),
      sha256,
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
        if (header !== undefined && sender.stats.dataSent % 3 === 0) {
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
    extraProxyIds: ['hostile'],
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
