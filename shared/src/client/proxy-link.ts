/**
 * One client–proxy link, shared by every transfer to that proxy (told apart by transferId): the
 * host of the core's LinkEndpoint. It moves datagrams between the endpoint and the current
 * transport (WebRTC or QUIC, link-transport.ts), keeps the endpoint's timer with the host's clock,
 * and carries out what the endpoint decides: open a new transport after a loss, close a dead one,
 * ask whether the network answers.
 */
import {
  DeadlineTimer,
  LinkEndpoint,
  LinkState,
  LinkTransfer,
  LivenessLimits,
  ProxyInfo,
  ReconnectionPolicy,
  SourceStats,
} from '..';
import { ClientError } from './errors';
import { Clock } from './host';
import { ConnectTimeoutError, LinkTransport } from './link-transport';

/** One attempt at a transport to the proxy, within `timeoutMs`. */
export type TransportConnector = (timeoutMs: number) => Promise<LinkTransport>;

/** A connector's failure that says when to try again (e.g. origo is not reachable yet). */
export class RetrySoon extends Error {
  constructor(
    message: string,
    readonly retryInMs: number,
  ) {
    super(message);
  }
}

export interface ProxyLinkOptions {
  clock: Clock;
  /** Opens a new transport after a loss; absent, a lost link closes and its transfers lose the proxy. */
  reconnect?: TransportConnector;
  /** Whether the network answers at all now (origo answers a ping); see LinkEvent probe-network. */
  networkAnswers?: () => Promise<boolean>;
  /** Each reconnection attempt gets at most this long (shorter when the window is nearly spent). */
  reconnectAttemptMs?: number;
  liveness?: Partial<LivenessLimits>;
  reconnection?: Partial<ReconnectionPolicy>;
  trace?: (line: string) => void;
}

const why = (e: unknown) => (e instanceof Error ? e.message : String(e));

export class ProxyLink {
  private readonly endpoint: LinkEndpoint;
  private readonly timer: DeadlineTimer;
  private readonly clock: Clock;
  private transport?: LinkTransport;
  private connectTimedOut = false;
  private readonly readyWaiters: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  /** Called once, when the proxy first says it is going away. */
  onGoingAway?: () => void;
  /**
   * The shortest REQUEST-to-META time a transfer on this link saw, ms: the round trip (an origin
   * fetch only adds to it, and the minimum drops those). Infinity until one answered.
   */
  private shortestAnswerMs = Infinity;
  /** The delivery rate the last transfer on this link measured, bytes/s (0: none yet). */
  private measuredRateBps = 0;

  constructor(
    readonly proxy: ProxyInfo,
    private readonly opts: ProxyLinkOptions,
  ) {
    this.clock = opts.clock;
    this.endpoint = new LinkEndpoint({
      now: this.clock.now(),
      liveness: opts.liveness,
      reconnection: { ...opts.reconnection, ...(opts.reconnect ? {} : { enabled: false }) },
    });
    this.timer = new DeadlineTimer(
      this.endpoint,
      (at, fire) => this.clock.setTimer(Math.max(0, at - this.clock.now()), fire, true),
      () => this.clock.now(),
      () => this.pump(),
    );
  }

  get state(): LinkState {
    return this.endpoint.state;
  }

  /** Open: datagrams go through now. */
  get alive(): boolean {
    return this.endpoint.state === 'open' && this.transport?.isOpen === true;
  }

  /** Why the link closed, once it has. */
  get closeReason(): string | undefined {
    return this.endpoint.closeReason;
  }

  /** The proxy said it is going away (ERROR GoingAway: it drains), with its reason. */
  get goingAway(): string | undefined {
    return this.endpoint.goingAway;
  }

  /** Whether the first connection gave up for want of an answer within its time (not a refusal). */
  get timedOut(): boolean {
    return this.connectTimedOut;
  }

  /** Which transport carries the link now ('webrtc', 'quic'), undefined when none. */
  get transportKind(): string | undefined {
    return this.transport?.kind;
  }

  get stats() {
    return this.endpoint.stats;
  }

  /** The first transport: resolves once it is open, rejects (and closes the link) when it is not. */
  async connect(connector: TransportConnector, timeoutMs: number): Promise<void> {
    let transport: LinkTransport;
    try {
      transport = await connector(timeoutMs);
    } catch (e) {
      this.connectTimedOut = e instanceof ConnectTimeoutError;
      this.endpoint.close(why(e), this.clock.now());
      this.pump();
      throw e;
    }
    if (this.endpoint.state === 'closed') {
      transport.close(this.endpoint.closeReason);
      throw new ClientError('connect-failed', `proxy ${this.proxy.name}: ${this.endpoint.closeReason ?? 'closed'}`);
    }
    this.use(transport);
  }

  /**
   * Resolves when the link is open (at once, or when a reconnection under way succeeds); rejects
   * when it closes instead.
   */
  ready(): Promise<void> {
    if (this.alive) return Promise.resolve();
    if (this.endpoint.state === 'closed')
      return Promise.reject(
        new ClientError('connect-failed', `proxy ${this.proxy.name}: ${this.closeReason ?? 'closed'}`),
      );
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** Client-to-proxy messages: false when no transport is open (dropped, as on the network). */
  send(bytes: Uint8Array): boolean {
    const queued = this.endpoint.send(bytes, this.clock.now());
    this.pump();
    return queued;
  }

  attach(transferId: number, transfer: LinkTransfer): void {
    this.endpoint.attach(transferId, transfer, this.clock.now());
    this.timer.arm();
  }

  detach(transferId: number): void {
    this.endpoint.detach(transferId);
  }

  /** Learns the path from a finished transfer's view of this proxy, for the next transfer's window. */
  observe(stats: Pick<SourceStats, 'answerMs' | 'rateBps'>): void {
    if (stats.answerMs !== undefined && stats.answerMs >= 0)
      this.shortestAnswerMs = Math.min(this.shortestAnswerMs, stats.answerMs);
    if (stats.rateBps > 0) this.measuredRateBps = stats.rateBps;
  }

  /**
   * The path as transfers on this link measured it: the round trip (undefined before any), and
   * the larger of the rate last measured and the capacity origo reported for the proxy.
   */
  get path(): { rttMs?: number; capacityBps: number } {
    const reported = Number.isFinite(this.proxy.capacityBps) && this.proxy.capacityBps > 0 ? this.proxy.capacityBps : 0;
    return {
      rttMs: Number.isFinite(this.shortestAnswerMs) ? this.shortestAnswerMs : undefined,
      capacityBps: Math.max(reported, this.measuredRateBps),
    };
  }

  /**
   * The host knows the transport is dead (its network changed): it is closed now, and the link
   * reconnects when transfers wait for it, or closes.
   */
  transportLost(reason: string): void {
    if (this.endpoint.state !== 'open') return;
    this.dropTransport(reason);
    this.endpoint.transportClosed(reason, this.clock.now());
    this.pump();
  }

  close(reason = 'closed by the client'): void {
    this.endpoint.close(reason, this.clock.now());
    this.pump();
  }

  // ---------------------------------------------------------------- host loop

  private use(transport: LinkTransport): void {
    this.transport = transport;
    transport.onDatagram = (bytes, receivedAt) => {
      if (this.transport !== transport) return;
      const now = this.clock.now();
      this.endpoint.handleDatagram(bytes, now, receivedAt ?? now);
      this.pump();
    };
    transport.onClose = (reason) => {
      if (this.transport !== transport) return;
      this.transport = undefined;
      this.endpoint.transportClosed(reason, this.clock.now());
      this.pump();
    };
    this.endpoint.transportOpened(this.clock.now());
    this.pump();
  }

  /** Sends what the endpoint queued, acts on its events, re-arms its timer. */
  private pump(): void {
    for (let d = this.endpoint.pollTransmit(); d; d = this.endpoint.pollTransmit()) this.transport?.send(d);
    for (let e = this.endpoint.pollEvent(); e; e = this.endpoint.pollEvent()) {
      switch (e.type) {
        case 'connect':
          this.reconnect(e.attempt, e.timeLeftMs);
          break;
        case 'disconnect':
          this.opts.trace?.(`${this.proxy.name}: connection judged dead (${e.reason})`);
          this.dropTransport(e.reason);
          break;
        case 'probe-network':
          this.probe();
          break;
        case 'going-away':
          this.onGoingAway?.();
          break;
        case 'closed':
          this.dropTransport(e.reason);
          this.timer.stop();
          for (const w of this.readyWaiters.splice(0))
            w.reject(new ClientError('connect-failed', `proxy ${this.proxy.name}: ${e.reason}`));
          break;
      }
    }
    if (this.alive) for (const w of this.readyWaiters.splice(0)) w.resolve();
    this.timer.arm();
  }

  private dropTransport(reason: string): void {
    const t = this.transport;
    this.transport = undefined;
    t?.close(reason);
  }

  private reconnect(attempt: number, timeLeftMs: number): void {
    const connector = this.opts.reconnect;
    if (!connector) return;
    if (attempt === 1) this.opts.trace?.(`${this.proxy.name}: connection lost, reconnecting`);
    this.dropTransport('replaced');
    const timeoutMs = Math.max(1, Math.min(this.opts.reconnectAttemptMs ?? 5000, timeLeftMs));
    connector(timeoutMs).then(
      (transport) => {
        if (this.endpoint.state !== 'reconnecting') {
          transport.close(this.endpoint.closeReason ?? 'not needed');
          return;
        }
        this.opts.trace?.(`${this.proxy.name}: reconnected`);
        this.use(transport);
      },
      (e: unknown) => {
        this.opts.trace?.(`${this.proxy.name}: reconnection attempt failed: ${why(e)}`);
        this.endpoint.transportFailed(why(e), this.clock.now(), e instanceof RetrySoon ? e.retryInMs : undefined);
        this.pump();
      },
    );
  }

  private probe(): void {
    const ask = this.opts.networkAnswers;
    if (!ask) return;
    void ask().then((answers) => {
      this.endpoint.networkAnswered(answers, this.clock.now());
      this.pump();
    });
  }
}
