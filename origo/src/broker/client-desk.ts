/**
 * The client desk: a client's session (hello, token renewal, replacement, departure) and what it
 * asks of origo besides signalling: proxy offers, download records and pollution reports.
 */
import { LRUCache } from 'lru-cache';
import { addressPrefix, ClientToOrigo, MAX_RENEWED_PROXY_TOKENS, ProxyInfo } from '@mutp/shared';
import { reachesOtherInstances } from '../cluster/cluster';
import { DepartedOffers } from '../departed-offers';
import { operatorKey, operatorsConcentrated } from '../operator-spread';
import { BudgetBook } from '../limits';
import type { OfferIndex } from '../offer-index';
import { CLOSE, type ClientPeer } from './peers';
import type { SignalRelay } from './signal-relay';
import { type BrokerDeps, type BrokerState, type ClientEntry, newId } from './state';

type Hello = Extract<ClientToOrigo, { type: 'hello' }>;
type RequestProxies = Extract<ClientToOrigo, { type: 'request-proxies' }>;
type ClientRecord = Extract<ClientToOrigo, { type: 'record' }>;
type ClientReport = Extract<ClientToOrigo, { type: 'report' }>;

/** (proxy, network) offer notes kept (pickedBy); beyond, the oldest count again. */
const MAX_PICK_NOTES = 100_000;
/** Proxy ids remembered per client as offered to it (records may only name these). */
const MAX_OFFERED_PER_CLIENT = 256;
/**
 * Proxy requests held in the start-up grace at once (startupGrace(): one per client), and how
 * often they are checked against the proxies registered by then. Beyond the cap, answered at once.
 */
const MAX_GRACE_WAITERS = 1024;
const GRACE_CHECK_MS = 100;

export class ClientDesk {
  private readonly deps: BrokerDeps;
  /** What clients whose session ended were offered, for a resuming session (departed-offers.ts). */
  private readonly departed = new DepartedOffers();
  /** Record budgets outlive sockets: per client id (kept across reconnects by its token) and per network. */
  private readonly recordBudgets = new BudgetBook();
  /**
   * (proxy, client network) pairs offered within about a heartbeat: an offer lowers a proxy's
   * score like a transfer would (selection.ts), so one network's offers count once, or asking
   * for an honest proxy again and again would push it down for every other client (issue 31).
   */
  private readonly pickedBy: LRUCache<string, true>;
  private closed = false;
  /** When this instance started: the start-up grace (startupGrace()) counts from here. */
  private readonly startedAt = Date.now();
  /** Clients that resumed a session (presented a valid token) within the start-up grace. */
  private readonly resumedEarly = new WeakSet<ClientEntry>();
  /** Proxy requests held in the start-up grace: how many proxies each waits for. */
  private readonly graceWaiters = new Map<ClientEntry, { need: number; done: () => void }>();
  private graceTimer?: NodeJS.Timeout;

  constructor(
    private readonly state: BrokerState,
    private readonly relay: SignalRelay,
    /** What request-proxies offers from (offer-index.ts), kept by the registry. */
    private readonly offers: OfferIndex,
  ) {
    this.deps = state.deps;
    this.pickedBy = new LRUCache<string, true>({ max: MAX_PICK_NOTES, ttl: state.config.heartbeatIntervalMs });
  }

  private get config() {
    return this.state.config;
  }

  private get clients() {
    return this.state.clients;
  }

  /**
   * A client said hello. It keeps the client id of the token it presents when origo signed that
   * token (expired at most tokenGraceMs ago); otherwise it gets a new id. Resolves with the id,
   * or undefined when refused (origo is full). The welcome carries a fresh token.
   */
  async hello(peer: ClientPeer, m: Hello): Promise<string | undefined> {
    const previousId =
      m.token === undefined ? undefined : await this.deps.tokens.subject(m.token, this.config.tokenGraceMs);
    if (this.closed) return undefined;
    const old = previousId === undefined ? undefined : this.clients.get(previousId);
    if (previousId !== undefined && old === undefined) {
      // Its older session may be on another instance (the client failed over): that one goes.
      this.deps.cluster.broadcast({ kind: 'client-replaced', from: this.state.instanceId, clientId: previousId });
    }
    // The same client on a new socket (its old one is half-dead, as after a disconnection): the
    // newer one wins, and keeps what it was offered, so its hints, records and reports about the
    // proxies it holds connections to are not refused as not offered. (Its old session may have
    // ended here first: then what it was offered was kept for a while.)
    if (old !== undefined) {
      this.clientGone(old.clientId);
      old.peer.send({ type: 'error', code: 'replaced', message: 'a newer session presented this token' });
      old.peer.close(CLOSE.replaced, 'replaced');
    }
    const inherited = previousId === undefined ? [] : this.departed.take(previousId, Date.now());
    if (this.clients.size >= this.config.maxClients) {
      this.deps.log.warn({ peer: peer.label, maxClients: this.config.maxClients }, 'client refused: origo is full');
      peer.send({ type: 'error', code: 'busy', message: `origo already has ${this.config.maxClients} clients` });
      peer.close(CLOSE.tryAgainLater, 'busy');
      return undefined;
    }
    const clientId = previousId ?? newId('c', this.clients);
    const entry: ClientEntry = {
      clientId,
      peer,
      network: addressPrefix(peer.address),
      connectedAt: Date.now(),
      connections: new Set(),
      offered: new Set(inherited),
      proxyTokens: new Map(),
    };
    this.clients.set(clientId, entry);
    if (previousId !== undefined && Date.now() < this.graceEndsAt) this.resumedEarly.add(entry);
    if (inherited.length > 0) this.state.reports.noteOffered(clientId, inherited);
    this.deps.metrics.clients.set(this.clients.size);
    const issued = await this.deps.tokens.issue(clientId, Date.now(), undefined, entry.network);
    if (this.clients.get(clientId) !== entry) return undefined; // gone while signing
    peer.send({ type: 'welcome', clientId, ...issued });
    this.scheduleRenewal(entry);
    this.deps.log.info({ clientId, resumed: previousId !== undefined }, 'client connected');
    return clientId;
  }

  /** The client's socket closed: its proxies are told about each of its connections. */
  clientGone(clientId: string, peer?: ClientPeer): void {
    const client = this.clients.get(clientId);
    if (client === undefined || (peer !== undefined && client.peer !== peer)) return;
    clearTimeout(client.renewTimer);
    this.clients.delete(clientId);
    this.departed.remember(clientId, client.offered, Date.now());
    this.state.reports.forgetClient(clientId);
    this.deps.metrics.clients.set(this.clients.size);
    this.relay.clientGone(client);
    this.deps.log.info({ clientId }, 'client disconnected');
  }

  /** The client's token was presented to another instance (`client-replaced`): its session here goes. */
  replacedElsewhere(clientId: string): void {
    const client = this.clients.get(clientId);
    if (client === undefined) return;
    this.clientGone(client.clientId);
    client.peer.send({ type: 'error', code: 'replaced', message: 'a newer session presented this token' });
    client.peer.close(CLOSE.replaced, 'replaced');
  }

  /** Offers proxies in the background (timed; a failure is logged, never thrown). */
  requestProxies(client: ClientEntry, m: RequestProxies): void {
    const timer = this.deps.metrics.requestProxiesSeconds.startTimer();
    void this.startupGrace(client, m)
      .then(() => this.offerProxies(client, m))
      .catch((err: unknown) => this.deps.log.error({ err, clientId: client.clientId }, 'offering proxies failed'))
      .finally(timer);
  }

  report(client: ClientEntry, m: ClientReport): void {
    const { reports } = this.state;
    // Reporters count per network: the addresses of one /24 (or /48) are one reporter.
    const reporter = client.network;
    const outcome = reports.report(client.clientId, reporter, m.proxyId, Date.now());
    const fields = { clientId: client.clientId, proxyId: m.proxyId, kind: m.kind, outcome };
    this.deps.log.info(fields, 'pollution report');
    // Not a ban: the clients that proved it avoid it themselves; its operator can look at it.
    if (outcome === 'flagged')
      this.deps.log.warn(
        { proxyId: m.proxyId, networks: reports.policy.threshold },
        'proxy reported as a polluter by clients of several networks: check it (reports alone do not stop offers)',
      );
  }

  /**
   * A download record. It is bound to the client's token (the session's client id), may only
   * name proxies origo offered this client, and is budgeted per client and per address; it is
   * queued for the database (RecordWriter), never written here.
   */
  record(client: ClientEntry, m: ClientRecord): void {
    const refuse = (code: string, message: string) => {
      this.deps.metrics.recordsRefused.inc({ reason: code });
      client.peer.send({ type: 'error', code, message });
    };
    // A record about no proxy says nothing anyone can check, only that something failed somewhere.
    if (m.record.proxies.length === 0) return refuse('empty-record', 'record dropped: it names no proxy');
    const foreign = m.record.proxies.find((p) => !client.offered.has(p.proxyId));
    if (foreign !== undefined) {
      return refuse('forged-record', `record dropped: proxy ${foreign.proxyId} was not offered to this client`);
    }
    if (!this.recordBudgets.take(`c:${client.clientId}`, this.config.recordRatePerSecond, this.config.recordBurst)) {
      return refuse('rate-limited', `record dropped: more than ${this.config.recordRatePerSecond} records/s`);
    }
    const network = `n:${client.network}`;
    if (!this.recordBudgets.take(network, this.config.recordRatePerAddress, this.config.recordBurstPerAddress)) {
      return refuse(
        'rate-limited',
        `record dropped: more than ${this.config.recordRatePerAddress} records/s from this network`,
      );
    }
    if (!this.deps.records.offer(client.clientId, m.record, Date.now())) {
      this.deps.log.debug({ clientId: client.clientId }, 'record shed');
      return;
    }
    this.state.throughput.observe(client.network, m.record);
    for (const p of m.record.proxies) this.offers.changed(p.proxyId);
  }

  /** Stops the renewal timers; a hello still being checked is refused (origo is shutting down). */
  close(): void {
    this.closed = true;
    for (const client of this.clients.values()) clearTimeout(client.renewTimer);
    this.checkGrace();
  }

  /** The start-up grace lasts one heartbeat interval: every live proxy re-registers within it. */
  private get graceEndsAt(): number {
    return this.startedAt + this.config.heartbeatIntervalMs;
  }

  /**
   * Right after this instance started (a restart, as far as a client that resumed its session can
   * tell), proxies are still re-registering: its request for more proxies than are registered
   * waits until enough are, or the grace ends, instead of being answered with too few (none, at
   * first). Fresh clients are answered at once. Waiting costs a map entry: one request per client,
   * MAX_GRACE_WAITERS in all, beyond which requests are answered at once.
   */
  private startupGrace(client: ClientEntry, m: RequestProxies): Promise<void> {
    const need = m.count + (m.exclude?.length ?? 0);
    if (!this.resumedEarly.has(client) || Date.now() >= this.graceEndsAt || this.registered() >= need)
      return Promise.resolve();
    if (this.graceWaiters.has(client) || this.graceWaiters.size >= MAX_GRACE_WAITERS) return Promise.resolve();
    return new Promise<void>((done) => {
      this.graceWaiters.set(client, { need, done });
      if (this.graceTimer === undefined) {
        this.graceTimer = setInterval(() => this.checkGrace(), GRACE_CHECK_MS);
        this.graceTimer.unref();
      }
    });
  }

  /** Proxies registered anywhere in the cluster (an upper bound on what selection could offer). */
  private registered(): number {
    const { cluster } = this.deps;
    return this.state.proxies.size + (reachesOtherInstances(cluster) ? cluster.remoteProxies().size : 0);
  }

  /** Releases the held requests that have their proxies, whose client left, or all once the grace is over. */
  private checkGrace(): void {
    const over = this.closed || Date.now() >= this.graceEndsAt;
    const registered = this.registered();
    for (const [client, waiter] of this.graceWaiters) {
      if (!over && registered < waiter.need && this.clients.get(client.clientId) === client) continue;
      this.graceWaiters.delete(client);
      waiter.done();
    }
    if (this.graceWaiters.size > 0) return;
    clearInterval(this.graceTimer);
    this.graceTimer = undefined;
  }

  private async offerProxies(client: ClientEntry, m: RequestProxies): Promise<void> {
    const now = Date.now();
    const cluster = this.deps.cluster;
    const chosen = this.offers.choose(
      client.peer.address,
      { count: m.count, mode: m.mode, exclude: m.exclude, regionHint: m.region },
      this.deps.random,
    );
    const network = client.network;
    if (chosen.length > 0 && !this.state.takeOffers(network, chosen.length)) {
      const message = `no proxies offered: more than ${this.config.offerRatePerNetwork} offered proxies/s to this network`;
      client.peer.send({ type: 'error', code: 'rate-limited', requestId: m.requestId, message });
      return;
    }
    for (const p of chosen) {
      const note = `${p.proxyId}\n${network}`;
      if (this.pickedBy.has(note)) continue;
      this.pickedBy.set(note, true);
      cluster.notePick(p.proxyId, this.config.heartbeatTimeoutMs);
      this.offers.changed(p.proxyId);
    }
    // Each offered proxy gets a token valid at it alone: the session token never reaches a proxy.
    const tokens = await Promise.all(chosen.map((p) => this.proxyToken(client, p.proxyId, now)));
    if (this.clients.get(client.clientId) !== client) return; // gone while signing
    const proxies: ProxyInfo[] = chosen.map((p, i) => ({
      proxyId: p.proxyId,
      name: p.name,
      httpUrl: p.httpUrl,
      capacityBps: p.capacityBps,
      ...(p.quic !== undefined ? { quic: p.quic } : {}),
      ...(p.assertionKey !== undefined ? { assertionKey: p.assertionKey } : {}),
      ...(p.capabilities !== undefined ? { capabilities: [...p.capabilities] } : {}),
      // Absent means the proxy is its own operator (as from an older origo): clients read it so.
      ...(operatorKey(p) !== p.proxyId ? { operator: operatorKey(p) } : {}),
      token: tokens[i],
    }));
    this.state.reports.noteOffered(
      client.clientId,
      proxies.map((p) => p.proxyId),
    );
    for (const p of proxies) {
      client.offered.delete(p.proxyId);
      client.offered.add(p.proxyId);
      if (client.offered.size > MAX_OFFERED_PER_CLIENT) {
        const forgotten = client.offered.values().next().value!;
        client.offered.delete(forgotten);
        client.proxyTokens.delete(forgotten);
      }
    }
    // Selection spread the offer over operators where it could (rule 7): when it could not, say so.
    const concentrated = operatorsConcentrated(chosen);
    client.peer.send({
      type: 'proxies',
      requestId: m.requestId,
      proxies,
      ...(concentrated ? { operatorsConcentrated: true as const } : {}),
    });
    this.deps.log.debug(
      { clientId: client.clientId, requestId: m.requestId, mode: m.mode, chosen: proxies.map((p) => p.proxyId) },
      'proxies selected',
    );
  }

  /**
   * The client's token for `proxyId` alone: the one it holds while that is at most a third into
   * its lifetime (the renewal period, so a renewal hands out nothing older), else a new one.
   */
  private async proxyToken(client: ClientEntry, proxyId: string, now: number): Promise<string> {
    const held = client.proxyTokens.get(proxyId);
    if (held !== undefined && held.expiresAt - now > (2 / 3) * this.config.tokenTtlMs) return held.token;
    const issued = await this.deps.tokens.issue(client.clientId, now, proxyId, client.network);
    client.proxyTokens.set(proxyId, issued);
    return issued.token;
  }

  /** Sends a renewed token a third into the lifetime of the current one (time to spare for a slow socket). */
  private scheduleRenewal(entry: ClientEntry): void {
    entry.renewTimer = setTimeout(() => {
      // The most recently offered proxies' tokens too: a link to one of them may reconnect later.
      const recent = [...entry.offered].slice(-MAX_RENEWED_PROXY_TOKENS);
      const now = Date.now();
      void Promise.all([
        this.deps.tokens.issue(entry.clientId, now, undefined, entry.network),
        ...recent.map((proxyId) => this.proxyToken(entry, proxyId, now)),
      ]).then(([issued, ...perProxy]) => {
        if (this.clients.get(entry.clientId) !== entry) return;
        const proxyTokens = perProxy.map((token, i) => ({ proxyId: recent[i], token }));
        entry.peer.send({ type: 'token', ...issued, ...(proxyTokens.length > 0 ? { proxyTokens } : {}) });
        this.scheduleRenewal(entry);
      });
    }, this.config.tokenTtlMs / 3);
    entry.renewTimer.unref();
  }
}
