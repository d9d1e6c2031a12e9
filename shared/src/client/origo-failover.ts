/**
 * The client's origo session, over one or several origo instances (sharing state).
 *
 * With several instances the session goes to one of them, picked at random at first (clients
 * spread over the instances) and kept while it works; a failed connect or a lost session moves it
 * to the next one, presenting the token of the last session so the client keeps its id. A request
 * that loses origo before its proxies are connected retries on the next instance (withSession);
 * once connected it no longer needs origo.
 *
 * Origo away after it welcomed the client (killed, restarting): a request that needs it (new
 * offers) waits for its return within its own origo limit, trying again at growing pauses, instead
 * of failing at once on a refused connection (docs/deploy.md, "Origo outages"). A client that never
 * reached origo fails at once (a wrong URL is not an outage), and so does one with a back-off
 * policy (below: the extension's requests have a deadline, and the network answers them sooner).
 *
 * With a back-off policy (the extension sets one), a connection attempt that fails on every
 * instance marks origo down for a while (origo-backoff.ts): requests in that period fail at once
 * with 'origo-down' instead of each trying again. The attempt belongs to the client, not to the
 * request that started it: it runs to its own timeout even when every caller gave up, so a hung
 * origo is marked down however impatient the callers are.
 */
import { Mode, ProxyInfo, WithdrawReason } from '..';
import { featureNames, withoutFeatures } from '../wire';
import type { ClientConfig } from './client-config';
import { ClientError } from './errors';
import { ClientHost } from './host';
import { describeDown, OrigoBackoff, OrigoDown } from './origo-backoff';
import { OrigoSession } from './origo-session';

/**
 * After a disconnection origo has this long to answer a ping on the open session; when it does
 * not, a new session is made (a socket that sat through the gap can hold its messages for seconds
 * after the network is back, in TCP's retransmission back-off, while a new one goes through).
 */
const ORIGO_PROBE_MS = 1500;
/** While waiting for origo's return: the first pause between two attempts, doubling up to the maximum. */
const ORIGO_RETURN_FIRST_PAUSE_MS = 250;
const ORIGO_RETURN_MAX_PAUSE_MS = 2000;
/**
 * For this long after origo came back (a session welcomed after one was lost), an offer of no
 * proxy is asked again (offers()): a restarted origo's proxies are still re-registering.
 */
const RETURN_WINDOW_MS = 60_000;

export class OrigoFailover {
  private session?: OrigoSession;
  private connecting?: Promise<OrigoSession>;
  /** The origo instance (index in urls) the next session goes to. */
  private nextOrigo: number;
  /** The token of the last session that had one: presented to whichever instance comes next. */
  private token?: string;
  /** Per-proxy tokens (OrigoSession.tokenFor), kept across sessions. */
  private readonly proxyTokens = new Map<string, string>();
  private readonly backoff?: OrigoBackoff;
  /** The origo check after a disconnection, shared by the links reconnecting at once. */
  private probing?: Promise<OrigoSession>;
  /**
   * The last session origo welcomed, open or lost: what a download over links opened before an
   * outage reports on (its messages go to the session that replaced it, if any: liveSession()).
   */
  private lastWelcomed?: OrigoSession;
  /** When a session was last welcomed after an earlier one (origo came back, or the network changed). */
  private returnedAt = -Infinity;

  constructor(
    private readonly host: ClientHost,
    private readonly urls: readonly string[],
    private readonly config: Pick<
      ClientConfig,
      'insecureOrigo' | 'origoBackoff' | 'trace' | 'disabledFeatures' | 'region'
    >,
    /** Origo withdrew a proxy it offered (OrigoSession.onWithdrawn), on whichever session. */
    private readonly onWithdrawn: (proxyId: string, reason: WithdrawReason) => void,
  ) {
    this.nextOrigo = (host.random() >>> 0) % urls.length;
    if (config.origoBackoff) this.backoff = new OrigoBackoff(config.origoBackoff, host.clock);
  }

  /** The origo instance the client is on (or tries next). */
  get url(): string {
    return this.session?.url ?? this.urls[this.nextOrigo];
  }

  /** Whether the session is open now (no attempt is made). */
  get isOpen(): boolean {
    return this.session?.isOpen ?? false;
  }

  /** The last session origo welcomed (open, or lost since), if any. */
  lastSession(): OrigoSession | undefined {
    return this.lastWelcomed;
  }

  /** Undefined unless origo is in its back-off period (it is then not tried until it ends). */
  down(): OrigoDown | undefined {
    if (this.session?.isOpen || this.connecting) return undefined;
    return this.backoff?.down();
  }

  /** Opens the session now unless it is open, being opened or in its back-off period; never rejects. */
  prepare(timeoutMs: number): void {
    if (this.session?.isOpen || this.connecting || this.backoff?.down()) return;
    this.open(timeoutMs).catch(() => undefined);
  }

  /**
   * Closes the session, keeping its token for the next one, which goes to the same instance (the
   * session is let go, not lost).
   */
  drop(reason?: string): void {
    const session = this.session;
    this.token = session?.token ?? this.token;
    this.session = undefined;
    session?.close(reason);
  }

  /**
   * The origo session, opened (again) when needed: origo may restart between downloads. Each
   * instance is tried once, from the one the last session was on (or the one after it, when that
   * session was lost), until one welcomes the client.
   */
  open(timeoutMs: number): Promise<OrigoSession> {
    if (this.session?.isOpen) return Promise.resolve(this.session);
    // Concurrent downloads share one connection attempt.
    if (this.connecting) return this.connecting;
    const down = this.backoff?.down();
    if (down) return Promise.reject(new ClientError('origo-down', describeDown(down)));
    const lost = this.session;
    this.token = lost?.token ?? this.token;
    this.session = undefined;
    lost?.close();
    const attempt = this.openSession(timeoutMs).then(
      (session) => {
        this.backoff?.succeeded();
        return session;
      },
      (e: unknown) => {
        this.backoff?.failed(causeOf(e));
        throw e;
      },
    );
    this.connecting = attempt;
    void attempt.then(
      () => this.clearConnecting(attempt),
      () => this.clearConnecting(attempt),
    );
    return attempt;
  }

  private async openSession(timeoutMs: number): Promise<OrigoSession> {
    const errors: unknown[] = [];
    for (let tried = 0; tried < this.urls.length; tried++) {
      const index = this.nextOrigo;
      const session = new OrigoSession(
        this.urls[index],
        this.host.webSocket,
        this.host.clock,
        timeoutMs,
        this.token,
        this.config.insecureOrigo,
        this.proxyTokens,
        {
          capabilities: featureNames(withoutFeatures(this.config.disabledFeatures)),
          ...(this.config.region !== undefined ? { region: this.config.region } : {}),
        },
      );
      session.onWithdrawn = (proxyId, reason) => this.onWithdrawn(proxyId, reason);
      try {
        await session.connect();
      } catch (e) {
        errors.push(e);
        this.nextOrigo = (index + 1) % this.urls.length;
        continue;
      }
      session.onClose = () => {
        // Lost while in use (not replaced, not closed by us): the next session tries the next instance.
        if (this.session !== session) return;
        this.token = session.token ?? this.token;
        this.nextOrigo = (index + 1) % this.urls.length;
      };
      this.session = session;
      if (this.lastWelcomed !== undefined) this.returnedAt = this.host.clock.now();
      this.lastWelcomed = session;
      return session;
    }
    if (errors.length === 1) throw errors[0];
    const reasons = errors.map((e) => (e instanceof Error ? e.message : String(e)));
    throw new ClientError('origo-unreachable', `no origo instance answered: ${reasons.join('; ')}`);
  }

  private clearConnecting(attempt: Promise<OrigoSession>): void {
    if (this.connecting === attempt) this.connecting = undefined;
  }

  /**
   * Runs `step` on an origo session. When the session is lost under it (origo died or stopped
   * answering), `step` runs again on a new session, on the next instance, while attempts remain;
   * any other failure is the answer. The abort signal is honoured at every wait, and nothing new
   * starts once it has fired.
   */
  async withSession<T>(
    signal: AbortSignal | undefined,
    timeoutMs: number,
    step: (session: OrigoSession) => Promise<T>,
  ): Promise<T> {
    const attempts = Math.max(2, this.urls.length);
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw cancelledError();
      const session = await unlessAborted(this.openAwaitingReturn(timeoutMs, signal), signal);
      try {
        return await unlessAborted(step(session), signal);
      } catch (e) {
        if (session.isOpen || signal?.aborted || attempt >= attempts) throw e;
      }
    }
  }

  /**
   * open(), and when origo is away after it welcomed this client, open() again at growing pauses
   * until `timeoutMs` is spent: a restarting origo is back within seconds, and the request had that
   * long for origo anyway. Not before the first welcome, nor with a back-off policy (see the top).
   */
  private async openAwaitingReturn(timeoutMs: number, signal: AbortSignal | undefined): Promise<OrigoSession> {
    const clock = this.host.clock;
    const deadline = clock.now() + timeoutMs;
    let left = timeoutMs;
    for (let pause = ORIGO_RETURN_FIRST_PAUSE_MS; ; pause = Math.min(2 * pause, ORIGO_RETURN_MAX_PAUSE_MS)) {
      try {
        return await this.open(left);
      } catch (e) {
        const waits = this.backoff === undefined && this.lastWelcomed !== undefined;
        const away = e instanceof ClientError && e.code === 'origo-unreachable';
        if (!waits || !away || signal?.aborted || deadline - clock.now() <= pause) throw e;
        this.config.trace?.(`origo away (${causeOf(e)}): trying again in ${pause} ms`);
        await unlessAborted(new Promise<void>((resolve) => clock.setTimer(pause, resolve)), signal);
        left = Math.max(1, Math.round(deadline - clock.now()));
      }
    }
  }

  /**
   * `session.requestProxies(...)`, asked again at growing pauses while origo offers none within
   * `timeoutMs` of the first ask, when origo came back moments ago: a restarted origo knows only
   * the proxies that re-registered since, and a proxy's reconnection backs off while origo is down
   * (for seconds after its return). Otherwise the first answer.
   */
  async offers(
    session: OrigoSession,
    count: number,
    mode: Mode,
    exclude: string[],
    timeoutMs: number,
  ): Promise<ProxyInfo[]> {
    const clock = this.host.clock;
    const deadline = clock.now() + timeoutMs;
    for (let pause = ORIGO_RETURN_FIRST_PAUSE_MS; ; pause = Math.min(2 * pause, ORIGO_RETURN_MAX_PAUSE_MS)) {
      const left = Math.max(1, Math.round(deadline - clock.now()));
      const offered = await session.requestProxies(count, mode, exclude, Math.min(timeoutMs, left));
      const justBack = clock.now() - this.returnedAt < RETURN_WINDOW_MS;
      if (offered.length > 0 || !justBack || !session.isOpen || deadline - clock.now() <= pause) return offered;
      this.config.trace?.(`origo is back but offers no proxy yet: asking again in ${pause} ms`);
      await new Promise<void>((resolve) => clock.setTimer(pause, resolve));
    }
  }

  /** Where a download's record or report goes: its own session, or the one that replaced it since. */
  liveSession(session: OrigoSession): OrigoSession {
    return !session.isOpen && this.session?.isOpen ? this.session : session;
  }

  /**
   * Whether origo answers a ping on the open session now (without one there is nothing to tell:
   * true). A session that does not answer is closed, as live() would: the reconnection that
   * follows opens a new one at once instead of pinging this stuck one again.
   */
  async answers(): Promise<boolean> {
    const session = this.session;
    if (!session?.isOpen) return true;
    if (await session.ping(ORIGO_PROBE_MS)) return true;
    this.config.trace?.(`origo: no answer to a ping within ${ORIGO_PROBE_MS} ms, the network is down`);
    if (this.session === session) session.close(`no answer to a ping within ${ORIGO_PROBE_MS} ms`);
    return false;
  }

  /**
   * The origo session after a disconnection, known to work: the open one if origo answers a
   * ping within ORIGO_PROBE_MS, else a new one within `timeoutMs`. Links reconnecting at the
   * same time share one check.
   */
  live(timeoutMs: number): Promise<OrigoSession> {
    if (this.probing) return this.probing;
    const probe = (async () => {
      const current = this.session;
      if (current?.isOpen) {
        if (await current.ping(ORIGO_PROBE_MS)) return current;
        this.config.trace?.(`origo: no answer to a ping within ${ORIGO_PROBE_MS} ms, opening a new session`);
        if (this.session === current) current.close(`no answer to a ping within ${ORIGO_PROBE_MS} ms`);
      }
      return this.open(timeoutMs);
    })();
    this.probing = probe;
    const clear = () => {
      if (this.probing === probe) this.probing = undefined;
    };
    void probe.then(clear, clear);
    return probe;
  }
}

/**
 * `promise`, or ClientError cancelled as soon as `signal` aborts: a caller that gives up while
 * origo or a proxy connection is slow is answered at once, not after their timeouts. What was
 * under way goes on (a connection that opens later is kept for the next download).
 */
function unlessAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  const cancelled = cancelledError;
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(cancelled());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function cancelledError(): ClientError {
  return new ClientError('cancelled', 'aborted before the download started');
}

/** Why a connection attempt failed, without the 'origo-unreachable: ' its error message starts with. */
function causeOf(e: unknown): string {
  const message = e instanceof Error ? e.message : String(e);
  return message.replace(/^origo-unreachable: /, '').slice(0, 300);
}
