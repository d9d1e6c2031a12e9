/**
 * A ClientHost for unit tests of the client orchestration (`@mutp/shared/client`): fake time, a
 * scripted origo behind a fake WebSocket, and fake WebRTC peers whose channels reach real
 * SourceEndpoints (the proxy's side of the core), so the MUTP exchange is the real one and only
 * the sockets and the clock are fakes. Every behaviour a test needs from origo or a proxy is a
 * named option (silent, unreachable, failing peer, proxy that never answers, ...).
 */
import {
  Admission,
  DatagramChannel,
  DeadlineTimer,
  IceCandidate,
  MessageType,
  decode,
  PeerState,
  ProxyInfo,
  RtcFactory,
  RtcPeer,
  rlncCodec,
  SessionDescription,
  SharedEncoders,
  SourceEndpoint,
  uncodedCodec,
} from '../../src';
import { sha256 } from '@noble/hashes/sha256';
import type { Clock, ClientHost, FetchLike, LinkTransport, QuicTarget, WebSocketLike } from '../../src/client';

/** Fake time: timers run only when the test advances the clock. */
export class FakeClock implements Clock {
  private t = 0;
  private seq = 0;
  private timers: { at: number; seq: number; run: () => void }[] = [];

  now(): number {
    return this.t;
  }

  setTimer(delayMs: number, callback: () => void): () => void {
    const timer = { at: this.t + Math.max(0, delayMs), seq: this.seq++, run: callback };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((x) => x !== timer);
    };
  }

  get pending(): number {
    return this.timers.length;
  }

  /** Runs the earliest timer (moving time to it); false when none is armed. */
  step(): boolean {
    if (this.timers.length === 0) return false;
    this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
    const next = this.timers.shift()!;
    this.t = Math.max(this.t, next.at);
    next.run();
    return true;
  }
}

const flushMicrotasks = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * Runs fake time until `promise` settles; fails (never hangs) if it has not after `maxMs` of fake
 * time or when nothing is left to run.
 */
export async function settle<T>(clock: FakeClock, promise: Promise<T>, maxMs = 120_000): Promise<T> {
  let done = false;
  const watched = promise.finally(() => (done = true));
  watched.catch(() => undefined);
  await flushMicrotasks();
  while (!done) {
    if (clock.now() > maxMs) throw new Error(`still pending after ${maxMs} ms of fake time`);
    if (!clock.step()) {
      await flushMicrotasks();
      if (!done) throw new Error(`still pending at ${clock.now()} ms of fake time with no timer left: a hang`);
      break;
    }
    await flushMicrotasks();
  }
  return watched;
}

/** How one fake proxy behaves. */
export type ProxyBehaviour =
  | 'ok'
  | 'peer-fails'
  /** The first two handshakes fail at once (libdatachannel's DTLS start race), later ones connect. */
  | 'fails-twice'
  | 'never-answers'
  | 'silent-channels';

/** What a proxy's QUIC endpoint does with a handshake: serve, never answer (UDP blocked), refuse at once. */
export type QuicBehaviour = 'ok' | 'blackhole' | 'refuses';

export interface FakeProxy {
  info: ProxyInfo;
  behaviour: ProxyBehaviour;
  /** Its QUIC endpoint, when it offers one. */
  quic?: QuicBehaviour;
}

/** How the fake origo behaves. */
export interface OrigoScript {
  /** The WebSocket factory throws (bad URL, no network). */
  unreachable?: boolean;
  /** The socket opens but origo never says a word. */
  silent?: boolean;
  /** The socket closes (1006) right after opening. */
  closesAtOnce?: boolean;
  proxies: FakeProxy[];
}

/** Objects the fake proxies serve, by URL. */
export type ObjectStore = Map<string, Uint8Array>;

const ONE_WAY_MS = 1;

/**
 * The client's access network: cut() takes it down for a while (a disconnection). Datagrams sent
 * meanwhile are lost, and so are those of a data channel that was open across the cut until
 * `stuckMs` after the network is back (SCTP's retransmission back-off); an origo socket open across
 * the cut holds what it carries until then (TCP's), and one opened during the cut opens when it ends.
 */
export class FakeNetwork {
  private downUntil = -Infinity;
  private stuckUntil = -Infinity;
  /** When the last cut started: sockets older than that are stuck. */
  cutAt = -Infinity;

  constructor(private readonly clock: FakeClock) {}

  cut(durationMs: number, stuckMs: number): void {
    this.cutAt = this.clock.now();
    this.downUntil = this.cutAt + durationMs;
    this.stuckUntil = this.downUntil + stuckMs;
  }

  /** When the network is up again (now, if it is). */
  get upAt(): number {
    return Math.max(this.clock.now(), this.downUntil);
  }

  /** Whether a channel made at `createdAt` loses what is sent now: down, or in back-off after a cut it sat through. */
  channelLoses(createdAt: number): boolean {
    const now = this.clock.now();
    return now < this.downUntil || (createdAt < this.cutAt && now < this.stuckUntil);
  }

  /** When a socket opened at `openedAt` can next deliver: after the back-off if it sat through the cut. */
  socketDeliversAt(openedAt: number): number {
    const now = this.clock.now();
    return openedAt < this.cutAt && now < this.stuckUntil ? this.stuckUntil : Math.max(now, this.downUntil);
  }
}

/** A data channel pair end: send() delivers to the other end after ONE_WAY_MS of fake time. */
class FakeChannel implements DatagramChannel {
  bufferedAmount = 0;
  isOpen = false;
  other?: FakeChannel;
  onOpen?: () => void;
  onMessage?: (bytes: Uint8Array) => void;
  onClose?: (reason?: string) => void;
  /** Datagrams into this end are dropped (a proxy that never answers on its channels). */
  deaf = false;
  private readonly createdAt: number;

  constructor(
    readonly label: string,
    private readonly clock: FakeClock,
    private readonly network?: FakeNetwork,
  ) {
    this.createdAt = clock.now();
  }

  send(bytes: Uint8Array): boolean {
    if (!this.isOpen) return false;
    if (this.network?.channelLoses(this.createdAt)) return true; // lost on the way
    const other = this.other;
    const copy = bytes.slice();
    this.clock.setTimer(ONE_WAY_MS, () => {
      if (other?.isOpen && !other.deaf) other.onMessage?.(copy);
    });
    return true;
  }

  setLowWaterMark(): void {
    // Nothing is ever buffered here: sends are delivered on the fake clock.
  }

  open(): void {
    this.isOpen = true;
    this.onOpen?.();
  }

  close(): void {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.onClose?.('closed');
    const other = this.other;
    if (other?.isOpen) this.clock.setTimer(ONE_WAY_MS, () => other.close());
  }
}

class FakePeer implements RtcPeer {
  state: PeerState = 'new';
  readonly channels: FakeChannel[] = [];
  onLocalDescription?: (description: SessionDescription) => void;
  onLocalCandidate?: (candidate: IceCandidate) => void;
  onChannel?: (channel: DatagramChannel) => void;
  onStateChange?: (state: PeerState) => void;

  constructor(
    readonly id: number,
    private readonly clock: FakeClock,
    private readonly network: FakeNetwork,
  ) {}

  createChannel(label: 'mutp-data' | 'mutp-feedback'): DatagramChannel {
    const channel = new FakeChannel(label, this.clock, this.network);
    this.channels.push(channel);
    return channel;
  }

  startOffer(): void {
    this.setState('connecting');
    this.onLocalDescription?.({ type: 'offer', sdp: `fake-offer-${this.id}` });
    this.onLocalCandidate?.({ candidate: `candidate:${this.id}`, mid: '0' });
  }

  /** The answer came back (through origo): the fake proxy holds the other ends. */
  remote?: (description: SessionDescription) => void;

  setRemoteDescription(description: SessionDescription): void {
    this.remote?.(description);
  }

  addRemoteCandidate(): void {}

  setState(state: PeerState): void {
    this.state = state;
    this.onStateChange?.(state);
  }

  close(): void {
    if (this.state === 'closed') return;
    for (const c of this.channels) c.close();
    this.setState('closed');
  }
}

/** The proxy's side of one peer connection: a real SourceEndpoint over the fake channels. */
class FakeProxyPeer {
  private readonly endpoint: SourceEndpoint;
  private readonly timer: DeadlineTimer;
  private readonly data: FakeChannel;
  private readonly admission: Admission;

  constructor(
    private readonly clock: FakeClock,
    client: FakePeer,
    private readonly objects: ObjectStore,
    deaf: boolean,
    readonly stats: { requests: number; stops: number; windows: number[] },
    network: FakeNetwork,
  ) {
    const admission = new Admission({ maxTransfers: 16, maxPerClient: 8, memoryBytes: 64 << 20 });
    this.admission = admission;
    this.endpoint = new SourceEndpoint({
      clientKey: 'fake-client',
      codecs: { rlnc: rlncCodec, uncoded: uncodedCodec },
      admission,
      seed: () => 7,
      now: clock.now(),
    });
    this.timer = new DeadlineTimer(
      this.endpoint,
      (at, fire) => clock.setTimer(at - clock.now(), fire),
      () => clock.now(),
      () => this.flush(objects, admission),
    );
    const ends = client.channels.map((c) => {
      const end = new FakeChannel(c.label, clock, network);
      end.other = c;
      c.other = end;
      end.deaf = deaf;
      end.onMessage = (bytes) => {
        if (bytes[1] === MessageType.Request) {
          this.stats.requests++;
          const m = decode(bytes);
          if (m.ok && m.value.type === MessageType.Request) this.stats.windows.push(m.value.window);
        }
        if (bytes[1] === MessageType.Stop) this.stats.stops++;
        this.endpoint.handleDatagram(bytes, clock.now());
        this.flush(objects, admission);
      };
      return end;
    });
    this.data = ends.find((e) => e.label === 'mutp-data')!;
    for (const end of ends) end.isOpen = true;
  }

  /** The proxy drains: ERROR GoingAway to the client; transfers under way go on. */
  goAway(reason: string): void {
    this.endpoint.goAway(reason);
    this.flush(this.objects, this.admission);
  }

  private flush(objects: ObjectStore, admission: Admission): void {
    const now = this.clock.now();
    for (let e = this.endpoint.pollEvent(); e; e = this.endpoint.pollEvent()) {
      if (e.type !== 'fetch') continue;
      const bytes = objects.get(e.url);
      if (bytes) {
        const object = {
          bytes,
          digest: sha256(bytes),
          encoders: new SharedEncoders(bytes, admission.memory),
          cached: true,
        };
        this.endpoint.objectReady(e.transferId, object, now);
      } else this.endpoint.objectFailed(e.transferId, 2, 'origin answered 404', now);
    }
    for (let c = this.endpoint.pollControl(); c; c = this.endpoint.pollControl()) this.data.send(c);
    // Paced by the fake clock: at most 64 datagrams per call, the rest after a millisecond.
    for (let i = 0; i < 64; i++) {
      const d = this.endpoint.pollDatagram(now);
      if (!d) break;
      this.data.send(d);
      if (i === 63) this.clock.setTimer(1, () => this.flush(objects, admission));
    }
    this.timer.arm();
  }
}

/** The scripted origo on the far side of the fake WebSocket. */
class FakeOrigoSocket implements WebSocketLike {
  readyState = 0;
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;

  private readonly openedAt: number;

  constructor(
    private readonly host: FakeHost,
    private readonly script: OrigoScript,
  ) {
    this.openedAt = host.clock.now();
    host.clock.setTimer(host.network.upAt - host.clock.now() + ONE_WAY_MS, () => {
      if (this.readyState !== 0) return;
      this.readyState = 1;
      this.onopen?.({});
      if (script.closesAtOnce) this.drop(1006, '');
    });
  }

  send(data: string): void {
    const m = JSON.parse(data) as Record<string, unknown>;
    this.host.origoHeard.push(m);
    if (this.script.silent) return;
    // Both ways wait out a cut (and the back-off, if this socket sat through it).
    const at = this.host.network.socketDeliversAt(this.openedAt) - this.host.clock.now() + ONE_WAY_MS;
    this.host.clock.setTimer(at, () => this.answer(m));
  }

  close(code = 1000, reason = ''): void {
    if (this.readyState >= 2) return;
    this.readyState = 3;
    this.host.clock.setTimer(ONE_WAY_MS, () => this.onclose?.({ code, reason }));
  }

  /** origo ends the session. */
  drop(code: number, reason: string): void {
    if (this.readyState >= 2) return;
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }

  /** Origo says something of its own accord (not an answer), if the session is open. */
  push(m: Record<string, unknown>): void {
    this.reply(m);
  }

  private reply(m: Record<string, unknown>): void {
    if (this.readyState === 1) this.onmessage?.({ data: JSON.stringify(m) });
  }

  private answer(m: Record<string, unknown>): void {
    switch (m.type) {
      case 'hello':
        this.reply({ type: 'welcome', clientId: 'c-1', token: 'eyJ0.eyJ1.c2ln', expiresAt: 300_000 });
        break;
      case 'ping':
        this.reply({ type: 'pong', nonce: m.nonce });
        break;
      case 'request-proxies': {
        const exclude = new Set([...(m.exclude as string[]), ...this.host.unoffered]);
        const offered = this.script.proxies.filter((p) => !exclude.has(p.info.proxyId)).slice(0, m.count as number);
        this.reply({ type: 'proxies', requestId: m.requestId, proxies: offered.map((p) => p.info) });
        break;
      }
      case 'signal': {
        const proxy = this.script.proxies.find((p) => p.info.proxyId === m.proxyId);
        const description = m.description as SessionDescription | undefined;
        if (!proxy || !description) break;
        this.host.connect(proxy, description, m.connectionId as string, (answer) =>
          this.reply({ type: 'signal', connectionId: m.connectionId, description: answer }),
        );
        break;
      }
    }
  }
}

export class FakeHost implements ClientHost {
  readonly clock = new FakeClock();
  readonly network = new FakeNetwork(this.clock);
  readonly objects: ObjectStore = new Map();
  /** Everything the client sent origo, in order. */
  readonly origoHeard: Record<string, unknown>[] = [];
  readonly peers: FakePeer[] = [];
  readonly sockets: FakeOrigoSocket[] = [];
  /** REQUESTs and STOPs each proxy's endpoint received, by proxy id. */
  /** Per proxy: REQUESTs and STOPs it received, and the window of each REQUEST. */
  readonly proxyStats = new Map<string, { requests: number; stops: number; windows: number[] }>();
  private nextPeer = 0;
  private nextRandom = 1;

  constructor(readonly script: OrigoScript) {}

  random = () => (this.nextRandom = (Math.imul(this.nextRandom, 1103515245) + 12345) >>> 0);

  webSocket = (): WebSocketLike => {
    if (this.script.unreachable) throw new Error('getaddrinfo ENOTFOUND origo.invalid');
    const socket = new FakeOrigoSocket(this, this.script);
    this.sockets.push(socket);
    return socket;
  };

  rtc: RtcFactory = {
    createPeer: () => {
      const peer = new FakePeer(this.nextPeer++, this.clock, this.network);
      this.peers.push(peer);
      return peer;
    },
  };

  fetch: FetchLike = () => Promise.reject(new Error('no HTTP in this fake'));

  /** QUIC handshakes each proxy was sent, by proxy id, with the URL (and token) presented. */
  readonly quicAttempts = new Map<string, string[]>();

  /**
   * The host's QUIC: a session to a fake proxy's endpoint is the same pair of fake channels to a
   * real SourceEndpoint that WebRTC gets, without signalling, opening after one round trip.
   */
  quic = (target: QuicTarget): Promise<LinkTransport> => {
    const proxy = this.script.proxies.find((p) => p.info.quic?.url === `${new URL(target.url).origin}/mutp`);
    if (!proxy?.quic) return Promise.reject(new Error('no such QUIC endpoint'));
    const id = proxy.info.proxyId;
    this.quicAttempts.set(id, [...(this.quicAttempts.get(id) ?? []), target.url]);
    if (proxy.quic === 'blackhole') return new Promise(() => undefined);
    if (proxy.quic === 'refuses')
      return new Promise((_, reject) => this.clock.setTimer(2 * ONE_WAY_MS, () => reject(new Error('refused (403)'))));
    const peer = new FakePeer(this.nextPeer++, this.clock, this.network);
    this.peers.push(peer);
    const feedback = peer.createChannel('mutp-feedback') as FakeChannel;
    const data = peer.createChannel('mutp-data') as FakeChannel;
    const stats = this.proxyStats.get(id) ?? { requests: 0, stops: 0, windows: [] };
    this.proxyStats.set(id, stats);
    return new Promise((resolve) =>
      this.clock.setTimer(2 * ONE_WAY_MS, () => {
        const served = new FakeProxyPeer(this.clock, peer, this.objects, false, stats, this.network);
        this.proxyPeers.set(id, [...(this.proxyPeers.get(id) ?? []), served]);
        peer.setState('connected');
        feedback.open();
        data.open();
        resolve(new FakeQuicTransport(peer, feedback, data));
      }),
    );
  };

  private readonly networkListeners = new Set<() => void>();

  onNetworkChange = (listener: () => void): (() => void) => {
    this.networkListeners.add(listener);
    return () => this.networkListeners.delete(listener);
  };

  /** The host's network changes (Wi-Fi to cellular): its listeners hear it. */
  changeNetwork(): void {
    for (const listener of [...this.networkListeners]) listener();
  }

  /** Offers each proxy was sent, by proxy id. */
  readonly handshakes = new Map<string, number>();
  /** The proxy side of every connection, by proxy id. */
  private readonly proxyPeers = new Map<string, FakeProxyPeer[]>();
  /** Proxies draining: they refuse new peers and their connected clients were told. */
  readonly draining = new Set<string>();
  /** Proxies origo no longer offers (draining or withdrawn). */
  readonly unoffered = new Set<string>();

  /** `proxyId` drains (SIGTERM): origo stops offering it and it tells every client connected to it. */
  drain(proxyId: string, reason = 'proxy draining: shutting down'): void {
    this.draining.add(proxyId);
    this.unoffered.add(proxyId);
    for (const served of this.proxyPeers.get(proxyId) ?? []) served.goAway(reason);
  }

  /** Origo withdraws `proxyId` (`withdrawn`: reports stopped it, say) and offers it no more. */
  withdraw(proxyId: string, reason: 'draining' | 'revoked'): void {
    this.unoffered.add(proxyId);
    for (const socket of this.sockets) socket.push({ type: 'withdrawn', proxyId, reason });
  }

  /** origo relayed an offer to `proxy`: the fake proxy answers as its behaviour says. */
  connect(proxy: FakeProxy, offer: SessionDescription, _connectionId: string, answer: (d: SessionDescription) => void) {
    const peer = this.peers.find((p) => offer.sdp === `fake-offer-${p.id}`);
    if (!peer) return;
    const handshakes = (this.handshakes.get(proxy.info.proxyId) ?? 0) + 1;
    this.handshakes.set(proxy.info.proxyId, handshakes);
    if (proxy.behaviour === 'never-answers') return;
    if (this.draining.has(proxy.info.proxyId)) {
      // A draining proxy refuses new peers (origo relays its connection-closed).
      this.clock.setTimer(5, () => peer.setState('failed'));
      return;
    }
    if (proxy.behaviour === 'peer-fails' || (proxy.behaviour === 'fails-twice' && handshakes <= 2)) {
      this.clock.setTimer(5, () => peer.setState('failed'));
      return;
    }
    const stats = this.proxyStats.get(proxy.info.proxyId) ?? { requests: 0, stops: 0, windows: [] };
    this.proxyStats.set(proxy.info.proxyId, stats);
    peer.remote = () => {
      const served = new FakeProxyPeer(
        this.clock,
        peer,
        this.objects,
        proxy.behaviour === 'silent-channels',
        stats,
        this.network,
      );
      this.proxyPeers.set(proxy.info.proxyId, [...(this.proxyPeers.get(proxy.info.proxyId) ?? []), served]);
      peer.setState('connected');
      for (const c of peer.channels) c.open();
    };
    answer({ type: 'answer', sdp: `fake-answer-${peer.id}` });
  }

  /** Peers not closed yet (a test's cleanup check). */
  get openPeers(): number {
    return this.peers.filter((p) => p.state !== 'closed' && p.state !== 'failed').length;
  }
}

export function proxy(id: string, behaviour: ProxyBehaviour = 'ok', quic?: QuicBehaviour): FakeProxy {
  const endpoint = { url: `https://${id}.example:4433/mutp`, certificateHashes: [btoa('x'.repeat(32))] };
  return {
    info: {
      proxyId: id,
      name: id,
      httpUrl: `https://${id}.example/`,
      capacityBps: 1_000_000,
      ...(quic !== undefined ? { quic: endpoint } : {}),
    },
    behaviour,
    ...(quic !== undefined ? { quic } : {}),
  };
}

/** A fake QUIC session: one peer's two channels seen as a datagram transport. */
class FakeQuicTransport implements LinkTransport {
  readonly kind = 'quic';
  onDatagram?: (bytes: Uint8Array) => void;
  onClose?: (reason: string) => void;
  private closed = false;

  constructor(
    private readonly peer: FakePeer,
    private readonly feedback: FakeChannel,
    data: FakeChannel,
  ) {
    for (const ch of [feedback, data]) {
      ch.onMessage = (bytes) => this.onDatagram?.(bytes);
      ch.onClose = () => {
        if (this.closed) return;
        this.closed = true;
        this.onClose?.('session closed');
      };
    }
  }

  get isOpen(): boolean {
    return !this.closed && this.feedback.isOpen;
  }

  send(bytes: Uint8Array): boolean {
    return this.isOpen && this.feedback.send(bytes);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.peer.close();
  }
}

export function objectOf(size: number, seed = 1): Uint8Array {
  const bytes = new Uint8Array(size);
  let x = seed;
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}
