/**
 * Origo's state and routing, independent of sockets: the proxy registry (heartbeats, load), the
 * clients, and the client–proxy connections whose signalling is relayed. Every message here has
 * already been validated against the schemas of @mutp/shared; the socket layer (server.ts)
 * handles framing, greeting order, rate limits and invalid frames.
 */
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { ClientToOrigo, OrigoToClient, OrigoToProxy, ProxyInfo, ProxyToOrigo, Random } from '@mutp/shared';
import { OrigoConfig } from './config';
import { TokenBucket } from './limits';
import { Metrics } from './metrics';
import { authenticateProxy, httpUrlProblem, ProxyKeys } from './proxy-auth';
import { RecordWriter } from './record-writer';
import { ThroughputBook } from './throughput';
import { TokenIssuer } from './tokens';
import { ProxyLoad, selectProxies, SelectableMode } from './selection';
import { ProxyReports } from './reports';

/** WebSocket close codes origo uses (docs/signalling.md, "Limits and errors"). */
export const CLOSE = {
  goingAway: 1001,
  policy: 1008,
  tryAgainLater: 1013,
  protocol: 4000,
  unauthorized: 4001,
  replaced: 4002,
  heartbeatTimeout: 4003,
} as const;

/** One end of a socket, as the broker sees it. */
export interface Peer<Out> {
  /** For logs: the peer's kind and id (or address before its greeting). */
  readonly label: string;
  /** The remote IP address (per-address budgets). */
  readonly address: string;
  send(message: Out): void;
  close(code: number, reason: string): void;
}
export type ProxyPeer = Peer<OrigoToProxy>;
export type ClientPeer = Peer<OrigoToClient>;

type Register = Extract<ProxyToOrigo, { type: 'register' }>;
type Heartbeat = Extract<ProxyToOrigo, { type: 'heartbeat' }>;
type ProxySignal = Extract<ProxyToOrigo, { type: 'signal' }>;
type ClientSignal = Extract<ClientToOrigo, { type: 'signal' }>;
type ClientRecord = Extract<ClientToOrigo, { type: 'record' }>;
type Hello = Extract<ClientToOrigo, { type: 'hello' }>;

/** Proxy ids remembered per client as offered to it (records may only name these). */
const MAX_OFFERED_PER_CLIENT = 256;
type RequestProxies = Extract<ClientToOrigo, { type: 'request-proxies' }>;
type ClientReport = Extract<ClientToOrigo, { type: 'report' }>;

interface ProxyEntry extends ProxyLoad {
  peer: ProxyPeer;
  name: string;
  httpUrl: string;
  registeredAt: number;
  lastHeartbeatAt?: number;
  connections: Set<string>;
  timer: NodeJS.Timeout;
}

interface ClientEntry {
  clientId: string;
  peer: ClientPeer;
  connectedAt: number;
  connections: Set<string>;
  /** Proxies origo offered this client (insertion order: the oldest is forgotten first). */
  offered: Set<string>;
  renewTimer?: NodeJS.Timeout;
}

interface Connection {
  connectionId: string;
  clientId: string;
  proxyId: string;
}

/** What GET /v1/admin/proxies lists for each proxy. */
export interface ProxyStatus {
  proxyId: string;
  name: string;
  httpUrl: string;
  modes: SelectableMode[];
  capacityBps: number;
  /** Median throughput clients measured (download records); null until enough reported. */
  measuredBps: number | null;
  uploadBps: number;
  activeTransfers: number;
  maxTransfers: number;
  connections: number;
  registeredAt: string;
  lastHeartbeatAt: string | null;
}

export interface BrokerDeps {
  log: Logger;
  metrics: Metrics;
  records: RecordWriter;
  random: Random;
  tokens: TokenIssuer;
  /** The current per-proxy keys (undefined in shared-secret dev mode). */
  proxyKeys: () => ProxyKeys | undefined;
}

export class Broker {
  private readonly proxies = new Map<string, ProxyEntry>();
  private readonly clients = new Map<string, ClientEntry>();
  private readonly connections = new Map<string, Connection>();
  /** Pollution reports; a proxy reported by enough distinct clients is not offered (reports.ts). */
  readonly reports = new ProxyReports();
  /** Record budgets outlive sockets: per client id (kept across reconnects by its token) and per address. */
  private readonly recordBudgets = new LRUCache<string, TokenBucket>({ max: 100_000 });
  private readonly throughput = new ThroughputBook();
  private closed = false;

  constructor(
    private readonly config: OrigoConfig,
    private readonly deps: BrokerDeps,
  ) {}

  get counts() {
    return { proxies: this.proxies.size, clients: this.clients.size, connections: this.connections.size };
  }

  // ------------------------------------------------------------------------------ proxies

  /** Registers a proxy; returns its id, or undefined when refused (the peer got an error and is being closed). */
  register(peer: ProxyPeer, m: Register): string | undefined {
    const refuse = (code: string, closeCode: number, message: string) => {
      this.deps.metrics.registrationsRefused.inc({ reason: code });
      this.deps.log.warn({ peer: peer.label, name: m.name, code }, `registration refused: ${message}`);
      peer.send({ type: 'error', code, message });
      peer.close(closeCode, code);
      return undefined;
    };
    const auth = authenticateProxy(
      { keys: this.deps.proxyKeys(), sharedSecret: this.config.proxySecret },
      m.proxyId,
      m.secret,
    );
    if (!auth.ok) return refuse('unauthorized', CLOSE.unauthorized, auth.reason);
    const urlProblem = httpUrlProblem(m.httpUrl, this.config.allowLocalProxies);
    if (urlProblem !== undefined) {
      return refuse('unauthorized', CLOSE.unauthorized, `httpUrl refused: ${urlProblem}`);
    }
    const proxyId = auth.proxyId ?? this.newId('p', this.proxies);
    const previous = this.proxies.get(proxyId);
    if (previous !== undefined && !auth.mayReplace) {
      // Shared-secret mode cannot tell the owner of an id from another holder of the secret.
      return refuse('id-in-use', CLOSE.tryAgainLater, `proxy id ${proxyId} is registered on a live socket`);
    }
    if (previous === undefined && this.proxies.size >= this.config.maxProxies) {
      return refuse('busy', CLOSE.tryAgainLater, `origo already has ${this.config.maxProxies} proxies`);
    }
    if (previous !== undefined) {
      // The same proxy reconnecting (e.g. after a network blip) while its old socket still looks alive.
      this.deps.log.info({ proxyId, old: previous.peer.label }, 'proxy re-registered: replacing its old socket');
      this.removeProxy(previous);
      previous.peer.send({ type: 'error', code: 'replaced', message: 'a newer registration took this proxyId' });
      previous.peer.close(CLOSE.replaced, 'replaced');
    }
    const entry: ProxyEntry = {
      proxyId,
      peer,
      name: m.name,
      httpUrl: m.httpUrl,
      modes: new Set(m.modes),
      capacityBps: m.capacityBps,
      uploadBps: 0,
      activeTransfers: 0,
      maxTransfers: m.maxTransfers,
      registeredAt: Date.now(),
      connections: new Set(),
      timer: setTimeout(() => this.heartbeatTimeout(proxyId), this.config.heartbeatTimeoutMs),
    };
    entry.timer.unref();
    this.proxies.set(proxyId, entry);
    this.deps.metrics.proxies.set(this.proxies.size);
    peer.send({
      type: 'registered',
      proxyId,
      heartbeatIntervalMs: this.config.heartbeatIntervalMs,
      tokenKey: this.deps.tokens.publicJwk,
    });
    this.deps.log.info(
      { proxyId, name: m.name, httpUrl: m.httpUrl, modes: m.modes, capacityBps: m.capacityBps },
      'proxy registered',
    );
    return proxyId;
  }

  proxyMessage(proxyId: string, m: ProxyToOrigo): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined) return; // removed (timeout, replaced) while the frame was in flight
    switch (m.type) {
      case 'register':
        this.deps.metrics.invalidMessages.inc({ kind: 'unexpected' });
        proxy.peer.send({ type: 'error', code: 'unexpected-message', message: 'already registered' });
        return;
      case 'heartbeat':
        return this.heartbeat(proxy, m);
      case 'signal':
        return this.proxySignal(proxy, m);
      case 'connection-closed': {
        const connection = this.connections.get(m.connectionId);
        if (connection === undefined || connection.proxyId !== proxyId) return; // already gone: nothing to tell
        this.forget(connection);
        this.clients.get(connection.clientId)?.peer.send(m);
        this.deps.metrics.signalsRelayed.inc({ direction: 'proxy-to-client' });
        return;
      }
    }
  }

  /** The proxy's socket closed. Ignored when the entry now belongs to a newer socket. */
  proxyGone(proxyId: string, peer: ProxyPeer): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined || proxy.peer !== peer) return;
    this.deps.log.info({ proxyId }, 'proxy disconnected');
    this.removeProxy(proxy);
  }

  /** Keys were reloaded: proxies whose id lost its key are dropped (revocation). */
  revokeMissing(keys: ProxyKeys): void {
    for (const proxy of [...this.proxies.values()]) {
      if (keys.has(proxy.proxyId)) continue;
      this.deps.log.warn({ proxyId: proxy.proxyId }, 'proxy key revoked: proxy removed');
      this.removeProxy(proxy);
      proxy.peer.send({ type: 'error', code: 'unauthorized', message: 'this proxy key was revoked' });
      proxy.peer.close(CLOSE.unauthorized, 'revoked');
    }
  }

  listProxies(): ProxyStatus[] {
    return [...this.proxies.values()].map((p) => ({
      proxyId: p.proxyId,
      name: p.name,
      httpUrl: p.httpUrl,
      modes: [...p.modes],
      capacityBps: p.capacityBps,
      measuredBps: this.throughput.measured(p.proxyId) ?? null,
      uploadBps: p.uploadBps,
      activeTransfers: p.activeTransfers,
      maxTransfers: p.maxTransfers,
      connections: p.connections.size,
      registeredAt: new Date(p.registeredAt).toISOString(),
      lastHeartbeatAt: p.lastHeartbeatAt === undefined ? null : new Date(p.lastHeartbeatAt).toISOString(),
    }));
  }

  private heartbeat(proxy: ProxyEntry, m: Heartbeat): void {
    proxy.activeTransfers = m.activeTransfers;
    proxy.uploadBps = m.uploadBps;
    proxy.capacityBps = m.capacityBps;
    proxy.lastHeartbeatAt = Date.now();
    proxy.timer.refresh();
  }

  private heartbeatTimeout(proxyId: string): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined) return;
    this.deps.metrics.heartbeatTimeouts.inc();
    this.deps.log.warn({ proxyId, timeoutMs: this.config.heartbeatTimeoutMs }, 'proxy missed its heartbeats: removed');
    this.removeProxy(proxy);
    proxy.peer.send({
      type: 'error',
      code: 'heartbeat-timeout',
      message: `no heartbeat for ${this.config.heartbeatTimeoutMs} ms`,
    });
    proxy.peer.close(CLOSE.heartbeatTimeout, 'heartbeat timeout');
  }

  private proxySignal(proxy: ProxyEntry, m: ProxySignal): void {
    const connection = this.connections.get(m.connectionId);
    if (connection === undefined || connection.proxyId !== proxy.proxyId) {
      proxy.peer.send({
        type: 'error',
        code: 'unknown-connection',
        message: `no connection ${m.connectionId} to this proxy`,
      });
      return;
    }
    const client = this.clients.get(connection.clientId)!;
    client.peer.send({
      type: 'signal',
      connectionId: m.connectionId,
      description: m.description,
      candidate: m.candidate,
    });
    this.deps.metrics.signalsRelayed.inc({ direction: 'proxy-to-client' });
  }

  /** Forgets a proxy and tells the clients connected to it. */
  private removeProxy(proxy: ProxyEntry): void {
    clearTimeout(proxy.timer);
    this.proxies.delete(proxy.proxyId);
    this.deps.metrics.proxies.set(this.proxies.size);
    for (const connectionId of [...proxy.connections]) {
      const connection = this.connections.get(connectionId)!;
      this.forget(connection);
      this.clients
        .get(connection.clientId)
        ?.peer.send({ type: 'connection-closed', connectionId, reason: 'proxy-gone' });
    }
  }

  // ------------------------------------------------------------------------------ clients

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
    if (old !== undefined) {
      // The same client on a new socket (its old one is half-dead): the newer one wins.
      this.clientGone(old.clientId);
      old.peer.send({ type: 'error', code: 'replaced', message: 'a newer session presented this token' });
      old.peer.close(CLOSE.replaced, 'replaced');
    }
    if (this.clients.size >= this.config.maxClients) {
      this.deps.log.warn({ peer: peer.label, maxClients: this.config.maxClients }, 'client refused: origo is full');
      peer.send({ type: 'error', code: 'busy', message: `origo already has ${this.config.maxClients} clients` });
      peer.close(CLOSE.tryAgainLater, 'busy');
      return undefined;
    }
    const clientId = previousId ?? this.newId('c', this.clients);
    const entry: ClientEntry = {
      clientId,
      peer,
      connectedAt: Date.now(),
      connections: new Set(),
      offered: new Set(),
    };
    this.clients.set(clientId, entry);
    this.deps.metrics.clients.set(this.clients.size);
    const issued = await this.deps.tokens.issue(clientId);
    if (this.clients.get(clientId) !== entry) return undefined; // gone while signing
    peer.send({ type: 'welcome', clientId, ...issued });
    this.scheduleRenewal(entry);
    this.deps.log.info({ clientId, resumed: previousId !== undefined }, 'client connected');
    return clientId;
  }

  /** Sends a renewed token a third into the lifetime of the current one (time to spare for a slow socket). */
  private scheduleRenewal(entry: ClientEntry): void {
    entry.renewTimer = setTimeout(() => {
      void this.deps.tokens.issue(entry.clientId).then((issued) => {
        if (this.clients.get(entry.clientId) !== entry) return;
        entry.peer.send({ type: 'token', ...issued });
        this.scheduleRenewal(entry);
      });
    }, this.config.tokenTtlMs / 3);
    entry.renewTimer.unref();
  }

  clientMessage(clientId: string, m: ClientToOrigo): void {
    const client = this.clients.get(clientId);
    if (client === undefined) return;
    switch (m.type) {
      case 'hello':
        this.deps.metrics.invalidMessages.inc({ kind: 'unexpected' });
        client.peer.send({ type: 'error', code: 'unexpected-message', message: 'hello already received' });
        return;
      case 'request-proxies':
        return this.requestProxies(client, m);
      case 'signal':
        return this.clientSignal(client, m);
      case 'connection-closed': {
        const connection = this.connections.get(m.connectionId);
        if (connection === undefined || connection.clientId !== clientId) return;
        this.forget(connection);
        this.proxies.get(connection.proxyId)?.peer.send(m);
        this.deps.metrics.signalsRelayed.inc({ direction: 'client-to-proxy' });
        return;
      }
      case 'record':
        return this.record(client, m);
      case 'report':
        return this.report(client, m);
    }
  }

  /** The client's socket closed: its proxies are told about each of its connections. */
  clientGone(clientId: string, peer?: ClientPeer): void {
    const client = this.clients.get(clientId);
    if (client === undefined || (peer !== undefined && client.peer !== peer)) return;
    clearTimeout(client.renewTimer);
    this.clients.delete(clientId);
    this.reports.forgetClient(clientId);
    this.deps.metrics.clients.set(this.clients.size);
    for (const connectionId of [...client.connections]) {
      const connection = this.connections.get(connectionId)!;
      this.forget(connection);
      this.proxies
        .get(connection.proxyId)
        ?.peer.send({ type: 'connection-closed', connectionId, reason: 'client-gone' });
    }
    this.deps.log.info({ clientId }, 'client disconnected');
  }

  private requestProxies(client: ClientEntry, m: RequestProxies): void {
    const now = Date.now();
    const measured = (p: ProxyEntry) => ({ ...p, measuredBps: this.throughput.measured(p.proxyId) });
    const offerable = [...this.proxies.values()].filter((p) => !this.reports.isBanned(p.proxyId, now));
    const chosen = selectProxies(
      offerable.map(measured),
      { count: m.count, mode: m.mode, exclude: m.exclude },
      this.deps.random,
    );
    const proxies: ProxyInfo[] = chosen.map((p) => ({
      proxyId: p.proxyId,
      name: p.name,
      httpUrl: p.httpUrl,
      capacityBps: p.capacityBps,
    }));
    this.reports.noteOffered(
      client.clientId,
      proxies.map((p) => p.proxyId),
    );
    for (const p of proxies) {
      client.offered.delete(p.proxyId);
      client.offered.add(p.proxyId);
      if (client.offered.size > MAX_OFFERED_PER_CLIENT) client.offered.delete(client.offered.values().next().value!);
    }
    client.peer.send({ type: 'proxies', requestId: m.requestId, proxies });
    this.deps.log.debug(
      { clientId: client.clientId, requestId: m.requestId, mode: m.mode, chosen: proxies.map((p) => p.proxyId) },
      'proxies selected',
    );
  }

  private clientSignal(client: ClientEntry, m: ClientSignal): void {
    const refuse = (code: string, message: string) => client.peer.send({ type: 'error', code, message });
    let connection = this.connections.get(m.connectionId);
    if (connection === undefined) {
      const proxy = this.proxies.get(m.proxyId);
      if (proxy === undefined) return refuse('unknown-proxy', `proxy ${m.proxyId} is not registered`);
      if (m.description?.type !== 'offer') {
        return refuse(
          'unknown-connection',
          `connection ${m.connectionId} is unknown (a connection starts with an offer)`,
        );
      }
      if (client.connections.size >= this.config.maxConnectionsPerClient) {
        return refuse('too-many-connections', `at most ${this.config.maxConnectionsPerClient} connections per client`);
      }
      connection = { connectionId: m.connectionId, clientId: client.clientId, proxyId: proxy.proxyId };
      this.connections.set(m.connectionId, connection);
      client.connections.add(m.connectionId);
      proxy.connections.add(m.connectionId);
      this.deps.metrics.connections.set(this.connections.size);
    } else if (connection.clientId !== client.clientId || connection.proxyId !== m.proxyId) {
      return refuse('unknown-connection', `connection ${m.connectionId} is not yours to ${m.proxyId}`);
    }
    this.proxies.get(connection.proxyId)!.peer.send({
      type: 'signal',
      connectionId: m.connectionId,
      clientId: client.clientId,
      description: m.description,
      candidate: m.candidate,
    });
    this.deps.metrics.signalsRelayed.inc({ direction: 'client-to-proxy' });
  }

  private report(client: ClientEntry, m: ClientReport): void {
    const reporter = client.peer.address;
    const outcome = this.reports.report(client.clientId, reporter, m.proxyId, Date.now());
    const log = outcome === 'banned' ? this.deps.log.warn.bind(this.deps.log) : this.deps.log.info.bind(this.deps.log);
    log({ clientId: client.clientId, proxyId: m.proxyId, kind: m.kind, outcome }, 'pollution report');
  }

  /**
   * A download record. It is bound to the client's token (the session's client id), may only
   * name proxies origo offered this client, and is budgeted per client and per address; it is
   * queued for the database (RecordWriter), never written here.
   */
  private record(client: ClientEntry, m: ClientRecord): void {
    const refuse = (code: string, message: string) => {
      this.deps.metrics.recordsRefused.inc({ reason: code });
      client.peer.send({ type: 'error', code, message });
    };
    const foreign = m.record.proxies.find((p) => !client.offered.has(p.proxyId));
    if (foreign !== undefined) {
      return refuse('forged-record', `record dropped: proxy ${foreign.proxyId} was not offered to this client`);
    }
    if (!this.budget(`c:${client.clientId}`, this.config.recordRatePerSecond, this.config.recordBurst).take()) {
      return refuse('rate-limited', `record dropped: more than ${this.config.recordRatePerSecond} records/s`);
    }
    const address = `a:${client.peer.address}`;
    if (!this.budget(address, this.config.recordRatePerAddress, this.config.recordBurstPerAddress).take()) {
      return refuse(
        'rate-limited',
        `record dropped: more than ${this.config.recordRatePerAddress} records/s from this address`,
      );
    }
    if (!this.deps.records.offer(client.clientId, m.record, Date.now())) {
      this.deps.log.debug({ clientId: client.clientId }, 'record shed');
      return;
    }
    this.throughput.observe(client.clientId, m.record);
  }

  private budget(key: string, rate: number, burst: number): TokenBucket {
    let bucket = this.recordBudgets.get(key);
    if (bucket === undefined) {
      bucket = new TokenBucket(rate, burst);
      this.recordBudgets.set(key, bucket);
    }
    return bucket;
  }

  // ------------------------------------------------------------------------------ shared

  private forget(connection: Connection): void {
    this.connections.delete(connection.connectionId);
    this.clients.get(connection.clientId)?.connections.delete(connection.connectionId);
    this.proxies.get(connection.proxyId)?.connections.delete(connection.connectionId);
    this.deps.metrics.connections.set(this.connections.size);
  }

  private newId(prefix: string, taken: Map<string, unknown>): string {
    for (;;) {
      const id = `${prefix}-${randomBytes(12).toString('base64url')}`;
      if (!taken.has(id)) return id;
    }
  }

  /** Stops the heartbeat timers (origo is shutting down; the sockets are closed by the server). */
  close(): void {
    this.closed = true;
    for (const proxy of this.proxies.values()) clearTimeout(proxy.timer);
    for (const client of this.clients.values()) clearTimeout(client.renewTimer);
  }
}
