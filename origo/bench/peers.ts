/**
 * The simulated peers: proxies and clients speaking the real signalling protocol
 * (docs/signalling.md) over real WebSockets, each from its own loopback source address when
 * asked. Per-message work is kept small (one JSON.parse per frame, constant frames pre-encoded):
 * the generator shares the machine with the instances it measures.
 */
import WebSocket from 'ws';
import { SIGNALLING_VERSION } from '@mutp/shared';
import { decodeExchangeId, encodeExchangeId, monotonicMs, proxyInstanceOf } from './exchange-id';
import { BENCH_PROXY_SECRET } from './instances';
import { Samples, Tally } from './stats';

/**
 * One offer relayed client → origo → proxy, answered proxy → origo → client, as its client sees
 * it (the proxy, maybe in another generator process, reads what it needs from the connection id).
 */
interface Exchange {
  /** monotonicMs() when sent. */
  sentAt: number;
  /** Started inside the measured window: its times become samples. */
  measured: boolean;
  cross: boolean;
  client: SimClient;
}

/** What the peers of one generator process report into: latencies, counters, their clients' exchanges in flight. */
export class RunBook {
  readonly exchanges = new Map<string, Exchange>();
  measuring = false;
  readonly oneWay = { same: new Samples(), cross: new Samples() };
  readonly roundTrip = { same: new Samples(), cross: new Samples() };
  readonly requestProxies = new Samples();
  /** Offers started in the measured window (of them cross-instance), and offers due but not started. */
  readonly offers = { measured: 0, cross: 0, skipped: 0 };
  heartbeatsMeasured = 0;
  /** Everything that went wrong, by kind; none is dropped silently. */
  readonly failures = {
    proxyHandshake: new Tally(),
    clientHandshake: new Tally(),
    /** `error` messages origo sent to a peer after its greeting, by `<peer>:<code>`. */
    errors: new Tally(),
    /** Sockets origo (or the network) closed before the run closed them, by `<peer>:<code>`. */
    unexpectedCloses: new Tally(),
    missingAnswers: 0,
    /** Answers after their offer was given up as missing (counted there too). */
    lateAnswers: 0,
    missingProxyLists: 0,
    /** Proxy lists after their request was given up as missing (counted there too). */
    lateProxyLists: 0,
    emptyProxyLists: 0,
    offersToUnknownProxies: 0,
    unexpectedMessages: 0,
  };
}

/** Why a handshake failed: `connect:<error>`, `closed:<code>`, `error:<code>` or `timeout`. */
export class HandshakeError extends Error {
  constructor(readonly kind: string) {
    super(`handshake failed: ${kind}`);
  }
}

interface Frame {
  type?: string;
  code?: string;
  requestId?: string;
  connectionId?: string;
  proxies?: { proxyId: string }[];
  description?: { type: string };
}

/** An open, greeted socket; frames that came right after the greeting's answer wait in `early`. */
interface Greeted {
  socket: WebSocket;
  answer: Frame;
  early: string[];
  /** Stops the handshake's listeners (the peer installs its own, then replays `early`). */
  release(): void;
}

/**
 * Opens a socket, sends the greeting and resolves with the first answer of type `expect`;
 * anything else (an error, a close, no answer in time) rejects with a HandshakeError.
 */
function handshake(
  url: string,
  localAddress: string | undefined,
  greeting: string,
  expect: string,
  timeoutMs: number,
): Promise<Greeted> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { localAddress, perMessageDeflate: false });
    let greeted: Greeted | undefined;
    let failed = false;
    const onError = (err: NodeJS.ErrnoException) => fail(`connect:${err.code ?? err.message}`);
    const onClose = (code: number) => fail(`closed:${code}`);
    const onOpen = () => socket.send(greeting);
    const onMessage = (data: WebSocket.RawData) => {
      if (greeted !== undefined) {
        greeted.early.push(String(data));
        return;
      }
      const answer = JSON.parse(String(data)) as Frame;
      if (answer.type !== expect) {
        fail(answer.type === 'error' ? `error:${answer.code}` : `unexpected:${answer.type}`);
        return;
      }
      clearTimeout(timer);
      greeted = { socket, answer, early: [], release };
      resolve(greeted);
    };
    const release = () => {
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.off('open', onOpen);
      socket.off('message', onMessage);
    };
    const fail = (kind: string) => {
      if (failed || greeted !== undefined) return;
      failed = true;
      clearTimeout(timer);
      release();
      socket.on('error', () => {});
      socket.terminate();
      reject(new HandshakeError(kind));
    };
    const timer = setTimeout(() => fail('timeout'), timeoutMs);
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.on('open', onOpen);
    socket.on('message', onMessage);
  });
}

/**
 * A greeted socket handed to its peer: frames go to `onFrame` (those that came early first), and
 * a close the run did not ask for is counted.
 */
function takeOver(
  greeted: Greeted,
  book: RunBook,
  label: string,
  closing: () => boolean,
  onFrame: (text: string) => void,
): void {
  const { socket } = greeted;
  socket.on('error', () => {}); // the close event carries the outcome
  socket.on('close', (code) => {
    if (!closing()) book.failures.unexpectedCloses.add(`${label}:${code}`);
  });
  socket.on('message', (data) => onFrame(String(data)));
  greeted.release();
  for (const text of greeted.early.splice(0)) onFrame(text);
}

async function closeSocket(socket: WebSocket, timeoutMs: number): Promise<void> {
  if (socket.readyState === WebSocket.CLOSED) return;
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.close(1000, 'bench done');
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
  if ((await Promise.race([closed, late])) === 'late') socket.terminate();
  clearTimeout(timer);
}

export interface ProxySpec {
  url: string;
  localAddress?: string;
  proxyId: string;
  instance: number;
  timeoutMs: number;
  sdpBytes: number;
}

/** A registered proxy: heartbeats at the interval origo gave, answers every offer at once. */
export class SimProxy {
  readonly heartbeatIntervalMs: number;
  private readonly socket: WebSocket;
  private readonly answerSdp: string;
  private heartbeatTimer?: NodeJS.Timeout;
  private closing = false;

  private constructor(
    readonly spec: ProxySpec,
    greeted: Greeted,
    private readonly book: RunBook,
  ) {
    this.socket = greeted.socket;
    this.heartbeatIntervalMs = (greeted.answer as { heartbeatIntervalMs: number }).heartbeatIntervalMs;
    this.answerSdp = fakeSdp('answer', spec.sdpBytes);
    takeOver(
      greeted,
      book,
      'proxy',
      () => this.closing,
      (text) => this.onFrame(text),
    );
  }

  static async connect(spec: ProxySpec, book: RunBook): Promise<SimProxy> {
    const register = JSON.stringify({
      type: 'register',
      version: SIGNALLING_VERSION,
      secret: BENCH_PROXY_SECRET,
      proxyId: spec.proxyId,
      name: spec.proxyId,
      httpUrl: `http://${spec.localAddress ?? '127.0.0.1'}:8800/`,
      capacityBps: 2_000_000,
      maxTransfers: 1000,
      modes: ['uncoded', 'rlnc', 'fountain'],
      // A well-formed key: origo only passes it on (the simulated proxies send no METAs).
      assertionKey: 'A'.repeat(43),
    });
    const greeted = await handshake(`${spec.url}/v1/proxy`, spec.localAddress, register, 'registered', spec.timeoutMs);
    return new SimProxy(spec, greeted, book);
  }

  get open(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  /** Heartbeats every interval origo told, the first at a random phase (spread over the interval). */
  startHeartbeats(): void {
    const frame = JSON.stringify({ type: 'heartbeat', activeTransfers: 0, uploadBps: 0, capacityBps: 2_000_000 });
    const beat = () => {
      if (this.socket.readyState !== WebSocket.OPEN) return;
      this.socket.send(frame);
      if (this.book.measuring) this.book.heartbeatsMeasured++;
    };
    const first = setTimeout(() => {
      beat();
      this.heartbeatTimer = setInterval(beat, this.heartbeatIntervalMs);
    }, Math.random() * this.heartbeatIntervalMs);
    this.heartbeatTimer = first;
  }

  private onFrame(text: string): void {
    const m = JSON.parse(text) as Frame;
    if (m.type === 'signal' && m.description?.type === 'offer' && m.connectionId !== undefined) {
      const stamp = decodeExchangeId(m.connectionId);
      if (stamp === undefined) this.book.failures.unexpectedMessages++;
      else if (stamp.measured) {
        const cross = stamp.clientInstance !== this.spec.instance;
        (cross ? this.book.oneWay.cross : this.book.oneWay.same).push(monotonicMs() - stamp.sentAtMs);
      }
      // Answered at once, as fast as a proxy could: origo's relay is what is measured.
      this.socket.send(
        `{"type":"signal","connectionId":"${m.connectionId}","description":{"type":"answer","sdp":${this.answerSdp}}}`,
      );
      return;
    }
    if (m.type === 'connection-closed') return; // the client closed its finished exchange
    if (m.type === 'error') {
      this.book.failures.errors.add(`proxy:${m.code}`);
      return;
    }
    this.book.failures.unexpectedMessages++;
  }

  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    clearTimeout(this.heartbeatTimer);
    clearInterval(this.heartbeatTimer);
    await closeSocket(this.socket, timeoutMs);
  }
}

export interface ClientSpec {
  url: string;
  localAddress?: string;
  index: number;
  instance: number;
  timeoutMs: number;
}

export interface ExchangeSettings {
  /** `count` of request-proxies. */
  requestCount: number;
  /** Pre-encoded JSON string of the offer's SDP. */
  offerSdp: string;
  /** origo instances of the row: the proxy id names its instance (exchange-id.ts). */
  instances: number;
}

/**
 * A client session. When driven (`begin`), one exchange at a time: request-proxies, an offer to
 * one of the proxies offered, the answer, then connection-closed (the connection is done).
 */
export class SimClient {
  readonly clientId: string;
  /** An exchange (request or offer) is in flight. */
  busy = false;
  private readonly socket: WebSocket;
  private closing = false;
  private requestId?: string;
  private requestAt = 0;
  private connectionId?: string;
  private sequence = 0;

  private constructor(
    readonly spec: ClientSpec,
    greeted: Greeted,
    private readonly book: RunBook,
    private readonly settings: ExchangeSettings,
  ) {
    this.socket = greeted.socket;
    this.clientId = (greeted.answer as { clientId: string }).clientId;
    takeOver(
      greeted,
      book,
      'client',
      () => this.closing,
      (text) => this.onFrame(text),
    );
  }

  static async connect(spec: ClientSpec, book: RunBook, settings: ExchangeSettings): Promise<SimClient> {
    const hello = JSON.stringify({ type: 'hello', version: SIGNALLING_VERSION });
    const greeted = await handshake(`${spec.url}/v1/client`, spec.localAddress, hello, 'welcome', spec.timeoutMs);
    return new SimClient(spec, greeted, book, settings);
  }

  get open(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  /** Starts an exchange: asks for proxies (the offer follows their list). */
  begin(): void {
    this.busy = true;
    this.requestId = `r${++this.sequence}`;
    this.requestAt = monotonicMs();
    this.socket.send(
      `{"type":"request-proxies","requestId":"${this.requestId}","count":${this.settings.requestCount},"exclude":[]}`,
    );
  }

  /** Gives up the exchange in flight, if it started before `before` (called by the run's sweep). */
  expire(before: number): 'request' | undefined {
    if (this.requestId !== undefined && this.requestAt < before) {
      this.requestId = undefined;
      this.busy = false;
      return 'request';
    }
    return undefined;
  }

  /** The offer in flight timed out (the run counted it). */
  abandonOffer(): void {
    this.connectionId = undefined;
    this.busy = false;
  }

  private onFrame(text: string): void {
    const m = JSON.parse(text) as Frame;
    switch (m.type) {
      case 'proxies':
        return this.onProxies(m);
      case 'signal':
        if (m.description?.type === 'answer' && m.connectionId !== undefined) return this.onAnswer(m.connectionId);
        this.book.failures.unexpectedMessages++;
        return;
      case 'error':
        this.book.failures.errors.add(`client:${m.code}`);
        if (m.requestId !== undefined && m.requestId === this.requestId) {
          this.requestId = undefined;
          this.busy = false;
        }
        return;
      case 'token':
        return; // a renewed token: nothing to do in a short run
      case 'connection-closed':
        // The proxy or origo closed a connection the client still held (e.g. proxy-gone).
        if (m.connectionId !== undefined && m.connectionId === this.connectionId) {
          this.book.failures.errors.add('client:connection-closed');
        }
        return;
      default:
        this.book.failures.unexpectedMessages++;
    }
  }

  private onProxies(m: Frame): void {
    if (m.requestId !== this.requestId) {
      this.book.failures.lateProxyLists++;
      return;
    }
    const { book } = this;
    this.requestId = undefined;
    if (book.measuring) book.requestProxies.push(monotonicMs() - this.requestAt);
    const proxies = m.proxies ?? [];
    if (proxies.length === 0) {
      book.failures.emptyProxyLists++;
      this.busy = false;
      return;
    }
    const proxyId = proxies[Math.floor(Math.random() * proxies.length)].proxyId;
    const proxyInstance = proxyInstanceOf(proxyId, this.settings.instances);
    if (proxyInstance === undefined) book.failures.offersToUnknownProxies++;
    const sentAt = monotonicMs();
    const measured = book.measuring;
    const connectionId = encodeExchangeId({
      client: this.spec.index,
      sequence: this.sequence,
      measured,
      clientInstance: this.spec.instance,
      sentAtMs: sentAt,
    });
    this.connectionId = connectionId;
    const cross = proxyInstance !== undefined && proxyInstance !== this.spec.instance;
    book.exchanges.set(connectionId, { sentAt, measured, cross, client: this });
    if (measured) {
      book.offers.measured++;
      if (cross) book.offers.cross++;
    }
    this.socket.send(
      `{"type":"signal","proxyId":"${proxyId}","connectionId":"${connectionId}","description":{"type":"offer","sdp":${this.settings.offerSdp}}}`,
    );
  }

  private onAnswer(connectionId: string): void {
    const { book } = this;
    const exchange = book.exchanges.get(connectionId);
    if (exchange === undefined || connectionId !== this.connectionId) {
      book.failures.lateAnswers++;
      return;
    }
    book.exchanges.delete(connectionId);
    if (exchange.measured) {
      (exchange.cross ? book.roundTrip.cross : book.roundTrip.same).push(monotonicMs() - exchange.sentAt);
    }
    this.connectionId = undefined;
    this.busy = false;
    this.socket.send(`{"type":"connection-closed","connectionId":"${connectionId}","reason":"bench exchange done"}`);
  }

  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    await closeSocket(this.socket, timeoutMs);
  }
}

/** A JSON string literal of an SDP-like text of about `bytes` bytes (only its size matters to origo). */
export function fakeSdp(kind: 'offer' | 'answer', bytes: number): string {
  const head = `v=0\r\no=- ${kind === 'offer' ? 1 : 2} 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n`;
  const line = 'a=x-bench:0123456789abcdef0123456789abcdef0123456789abcdef\r\n';
  let sdp = head;
  while (sdp.length + line.length <= bytes) sdp += line;
  return JSON.stringify(sdp);
}
