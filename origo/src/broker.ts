/**
 * Origo's state and routing, independent of sockets: the proxy registry (heartbeats, load), the
 * clients, and the client–proxy connections whose signalling is relayed. Every message here has
 * already been validated against the schemas of @mutp/shared; the socket layer (server.ts)
 * handles framing, greeting order, rate limits and invalid frames.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { ClientToOrigo, OrigoToClient, OrigoToProxy, ProxyInfo, ProxyToOrigo, Random } from '@mutp/shared';
import { secretsEqual } from './auth';
import { OrigoConfig } from './config';
import { TokenBucket } from './limits';
import { Metrics } from './metrics';
import { RecordStore } from './records';
import { ProxyLoad, selectProxies, SelectableMode } from './selection';
import { ProxyReports, reporterAddress } from './reports';

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
  /** "ip:port" of the socket, when known (pollution reports count distinct addresses). */
  readonly remote?: string;
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
  records: TokenBucket;
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
  records: RecordStore;
  random: Random;
}

export class Broker {
  private readonly proxies = new Map<string, ProxyEntry>();
  private readonly clients = new Map<string, ClientEntry>();
  private readonly connections = new Map<string, Connection>();
  /** Pollution reports; a proxy reported by enough distinct clients is not offered (reports.ts). */
  readonly reports = new ProxyReports();

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
    if (!secretsEqual(m.secret, this.config.proxySecret)) {
      return refuse('unauthorized', CLOSE.unauthorized, 'wrong proxy secret');
    }
    const proxyId = m.proxyId ?? this.newId('p', this.proxies);
    const previous = this.proxies.get(proxyId);
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
    peer.send({ type: 'registered', proxyId, heartbeatIntervalMs: this.config.heartbeatIntervalMs });
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

  listProxies(): ProxyStatus[] {
    return [...this.proxies.values()].map((p) => ({
      proxyId: p.proxyId,
      name: p.name,
      httpUrl: p.httpUrl,
      modes: [...p.modes],
      capacityBps: p.capacityBps,
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

  /** A client said hello; returns its id, or undefined when refused (origo is full). */
  hello(peer: ClientPeer): string | undefined {
    if (this.clients.size >= this.config.maxClients) {
      this.deps.log.warn({ peer: peer.label, maxClients: this.config.maxClients }, 'client refused: origo is full');
      peer.send({ type: 'error', code: 'busy', message: `origo already has ${this.config.maxClients} clients` });
      peer.close(CLOSE.tryAgainLater, 'busy');
      return undefined;
    }
    const clientId = this.newId('c', this.clients);
    this.clients.set(clientId, {
      clientId,
      peer,
      connectedAt: Date.now(),
      connections: new Set(),
      records: new TokenBucket(this.config.recordRatePerSecond, this.config.recordBurst),
    });
    this.deps.metrics.clients.set(this.clients.size);
    peer.send({ type: 'welcome', clientId });
    this.deps.log.info({ clientId }, 'client connected');
    return clientId;
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
  clientGone(clientId: string): void {
    const client = this.clients.get(clientId);
    if (client === undefined) return;
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
    const offerable = [...this.proxies.values()].filter((p) => !this.reports.isBanned(p.proxyId, now));
    const chosen = selectProxies(offerable, { count: m.count, mode: m.mode, exclude: m.exclude }, this.deps.random);
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
    const reporter = reporterAddress(client.peer.remote ?? client.peer.label);
    const outcome = this.reports.report(client.clientId, reporter, m.proxyId, Date.now());
    const log = outcome === 'banned' ? this.deps.log.warn.bind(this.deps.log) : this.deps.log.info.bind(this.deps.log);
    log({ clientId: client.clientId, proxyId: m.proxyId, kind: m.kind, outcome }, 'pollution report');
  }

  private record(client: ClientEntry, m: ClientRecord): void {
    if (!client.records.take()) {
      client.peer.send({
        type: 'error',
        code: 'rate-limited',
        message: `record dropped: more than ${this.config.recordRatePerSecond} records/s`,
      });
      return;
    }
    try {
      this.deps.records.insert(client.clientId, m.record, Date.now());
      this.deps.metrics.recordsStored.inc();
    } catch (err) {
      this.deps.log.error({ err, clientId: client.clientId }, 'storing a record failed');
      client.peer.send({ type: 'error', code: 'internal', message: 'the record could not be stored' });
    }
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
    for (const proxy of this.proxies.values()) clearTimeout(proxy.timer);
  }
}
