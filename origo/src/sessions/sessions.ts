/**
 * The session layer: every WebSocket origo accepts, from the upgrade to its close. Admits sockets
 * against their budgets, holds the greeting to its deadline and its order (nothing before the
 * answer to it), rate-limits and validates frames, hands each message to its path's protocol, and
 * cuts sockets that stop answering pings. The broker sees only `Peer`s and messages.
 */
import { ClientToOrigo, MAX_SIGNAL_BYTES, ProxyToOrigo, SIGNALLING_VERSION } from '@mutp/shared';
import { Logger } from 'pino';
import { WebSocket, type RawData } from 'ws';
import { CLOSE } from '../broker/peers';
import { Broker } from '../broker/router';
import { OrigoConfig } from '../config';
import { InvalidKind, Metrics } from '../metrics';
import { SocketBudgets } from './budgets';
import { PingWheel } from './ping-wheel';
import { clientProtocol, Protocol, proxyProtocol } from './protocols';
import { Session } from './session';

export class Sessions {
  private readonly all = new Set<Session>();
  private readonly bySocket = new WeakMap<WebSocket, Session>();
  private readonly budgets: SocketBudgets<Session>;
  private readonly proxy: Protocol<ProxyToOrigo>;
  private readonly client: Protocol<ClientToOrigo>;
  private readonly pings: PingWheel<Session>;
  private stopped = false;
  private allClosed?: () => void;

  constructor(
    private readonly config: OrigoConfig,
    broker: Broker,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    this.budgets = new SocketBudgets(config);
    this.proxy = proxyProtocol(broker, config);
    this.client = clientProtocol(broker, config);
    // Liveness of client sockets (proxies also heartbeat): a socket that missed a ping is cut.
    this.pings = new PingWheel(config.pingIntervalMs, (session) => this.ping(session));
  }

  /** origo is shutting down: new sockets are refused. */
  get closing(): boolean {
    return this.stopped;
  }

  /** A socket upgraded on `/v1/proxy`, from `address`:`port`. */
  attachProxy(socket: WebSocket, address: string, port: number | undefined): void {
    this.attach(socket, address, port, this.proxy);
  }

  /** A socket upgraded on `/v1/client`. */
  attachClient(socket: WebSocket, address: string, port: number | undefined): void {
    this.attach(socket, address, port, this.client);
  }

  private attach<In extends { type: string }>(
    socket: WebSocket,
    address: string,
    port: number | undefined,
    p: Protocol<In>,
  ): void {
    const { config } = this;
    const session = new Session(p.kind, socket, address, `${address}:${port}`, config, (s) =>
      this.drop(s, 'too-slow', CLOSE.policy, `more than ${config.maxSocketBufferBytes} bytes queued`),
    );
    this.bySocket.set(socket, session);
    if (this.stopped) {
      session.close(CLOSE.goingAway, 'origo shutting down');
      return;
    }
    const refusal = this.budgets.refusal(p.kind, address, p.max);
    if (refusal === 'busy') {
      this.drop(session, 'busy', CLOSE.tryAgainLater, `too many ${p.kind} sockets`);
      return;
    }
    if (refusal === 'address-limit') {
      this.drop(session, 'address-limit', CLOSE.tryAgainLater, `too many ${p.kind} sockets from this address`);
      return;
    }
    const oldest = this.budgets.evictable(p.kind);
    if (oldest) {
      this.budgets.greeted(oldest);
      this.drop(oldest, 'pending-evicted', CLOSE.tryAgainLater, 'too many sockets greeting: the oldest is closed');
    }
    this.budgets.admit(session);
    this.all.add(session);
    this.pings.add(session);
    session.greetingTimer = setTimeout(
      () =>
        this.drop(
          session,
          'greeting-timeout',
          CLOSE.protocol,
          `no ${p.greeting} within ${config.greetingTimeoutMs} ms`,
        ),
      config.greetingTimeoutMs,
    );
    socket.on('message', (data) => this.onFrame(session, data, p));
    socket.on('pong', () => (session.alive = true));
    socket.on('close', (code, reason) => {
      session.closed = true;
      clearTimeout(session.greetingTimer);
      this.budgets.released(session);
      this.all.delete(session);
      this.pings.delete(session);
      if (session.id !== undefined) p.gone(session.id, session);
      this.log.debug({ peer: session.label, code, reason: reason.toString() }, 'socket closed');
      if (this.all.size === 0) this.allClosed?.();
    });
    this.log.debug({ peer: session.label }, 'socket opened');
  }

  /** An error @fastify/websocket reports on a socket. */
  onSocketError(error: Error & { code?: string }, socket: WebSocket): void {
    const session = this.bySocket.get(socket);
    if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') {
      // ws already answers with close 1009: the frame was larger than MAX_SIGNAL_BYTES.
      if (session) this.invalid(session, 'oversized', `frame larger than ${MAX_SIGNAL_BYTES} bytes`);
      if (session) session.closed = true;
      return;
    }
    this.log.warn({ peer: session?.label, err: error }, 'socket error');
    if (socket.readyState === WebSocket.OPEN) socket.terminate();
  }

  /** Refuses new sockets and stops the pings (the first step of shutting down). */
  stop(): void {
    this.stopped = true;
    this.pings.stop();
  }

  /** Closes every socket with 1001, waits up to the grace period, then cuts what is left. */
  async closeAll(): Promise<void> {
    const closed = new Promise<void>((resolve) => {
      this.allClosed = resolve;
      if (this.all.size === 0) resolve();
    });
    for (const session of this.all) session.close(CLOSE.goingAway, 'origo shutting down');
    let grace: NodeJS.Timeout | undefined;
    await Promise.race([
      closed,
      new Promise<void>((resolve) => (grace = setTimeout(resolve, this.config.shutdownGraceMs))),
    ]);
    clearTimeout(grace);
    for (const session of this.all) session.socket.terminate();
  }

  private onFrame<In extends { type: string }>(session: Session, data: RawData, p: Protocol<In>): void {
    const { config } = this;
    if (session.closed) return;
    if (!session.bucket.take()) {
      this.drop(session, 'rate-limited', CLOSE.policy, `more than ${config.messageRatePerSecond} messages/s`);
      return;
    }
    const frame = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    const parsed = p.parse(frame);
    if (!parsed.ok) {
      this.invalid(session, invalidKind(parsed.error), parsed.error);
      if (session.id === undefined) {
        // A bad greeting ends the session; an unsupported version gets its own code.
        const version = greetingVersion(frame, p.greeting);
        const code = version !== undefined && version !== SIGNALLING_VERSION ? 'unsupported-version' : 'bad-message';
        const message =
          code === 'unsupported-version'
            ? `origo speaks signalling version ${SIGNALLING_VERSION}, not ${version}`
            : truncate(parsed.error);
        if (p.kind === 'proxy') this.metrics.registrationsRefused.inc({ reason: code });
        session.send({ type: 'error', code, message });
        session.close(CLOSE.protocol, code);
        return;
      }
      session.send({ type: 'error', code: 'bad-message', message: truncate(parsed.error) });
      if (++session.invalid > config.maxInvalidMessages) {
        this.drop(session, 'too-many-invalid', CLOSE.policy, `more than ${config.maxInvalidMessages} invalid messages`);
      }
      return;
    }
    const message = parsed.value;
    if (session.greeting) {
      // Sent before origo answered the greeting: the peer did not wait for welcome/registered.
      this.invalid(session, 'unexpected', `${message.type} before the greeting was answered`);
      session.send({ type: 'error', code: 'unexpected-message', message: 'wait for the answer to your greeting' });
      return;
    }
    if (session.id === undefined) {
      this.greet(session, message, p);
      return;
    }
    p.message(session.id, message);
  }

  /** The first message: the path's greeting, checked (possibly asynchronously) by the broker. */
  private greet<In extends { type: string }>(session: Session, message: In, p: Protocol<In>): void {
    if (message.type !== p.greeting) {
      this.invalid(session, 'unexpected', `${message.type} before ${p.greeting}`);
      if (p.kind === 'proxy') this.metrics.registrationsRefused.inc({ reason: 'register-required' });
      const code = `${p.greeting}-required`;
      session.send({ type: 'error', code, message: `the first message must be ${p.greeting}` });
      session.close(CLOSE.protocol, code);
      return;
    }
    clearTimeout(session.greetingTimer);
    this.budgets.greeted(session);
    session.greeting = true;
    void new Promise<string | undefined>((resolve) => resolve(p.greet(session, message))).then(
      (id) => {
        session.greeting = false;
        if (id === undefined) return;
        // Closed while the greeting was checked: forget the id the broker just gave it.
        if (session.closed) p.gone(id, session);
        else session.id = id;
      },
      (err: unknown) => {
        session.greeting = false;
        this.log.error({ err, peer: session.label }, 'greeting failed');
        this.drop(session, 'internal', CLOSE.tryAgainLater, 'internal error');
      },
    );
  }

  /** Once per ping interval per socket (ping-wheel.ts): one that missed the last ping is cut. */
  private ping(session: Session): void {
    if (session.closed) return;
    if (!session.alive) {
      this.metrics.socketsDropped.inc({ reason: 'ping-timeout' });
      this.log.info({ peer: session.label }, 'socket did not answer ping: terminated');
      session.closed = true;
      session.socket.terminate();
      return;
    }
    session.alive = false;
    session.socket.ping();
  }

  private drop(session: Session, reason: string, closeCode: number, message: string): void {
    if (session.closed) return;
    this.metrics.socketsDropped.inc({ reason });
    this.log.warn({ peer: session.label, reason }, `closing socket: ${message}`);
    if (reason !== 'too-slow') session.send({ type: 'error', code: reason, message });
    session.close(closeCode, reason);
  }

  private invalid(session: Session, kind: InvalidKind, reason: string): void {
    this.metrics.invalidMessages.inc({ kind });
    this.log.warn({ peer: session.label, kind, reason }, 'invalid message');
  }
}

/** parseSignal's error text tells which stage failed. */
function invalidKind(error: string): InvalidKind {
  if (error.startsWith('frame of ')) return 'oversized';
  if (error === 'frame is not JSON') return 'json';
  return 'schema';
}

/** The version of a greeting that failed validation, to tell an old peer apart from garbage. */
function greetingVersion(frame: Uint8Array, greeting: string): unknown {
  try {
    const json: unknown = JSON.parse(Buffer.from(frame).toString('utf8'));
    if (typeof json === 'object' && json !== null && (json as { type?: unknown }).type === greeting) {
      return (json as { version?: unknown }).version;
    }
  } catch {
    // not JSON: a plain bad message
  }
  return undefined;
}

function truncate(text: string, max = 512): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
