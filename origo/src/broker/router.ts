/**
 * Origo's state and routing, independent of sockets: the proxy registry (heartbeats, load), the
 * clients, and the client–proxy connections whose signalling is relayed. Every message here has
 * already been validated against the schemas of @mutp/shared; the socket layer (sessions/)
 * handles framing, greeting order, rate limits and invalid frames.
 *
 * The broker is a router: each message, from a socket or from another instance, goes to the desk
 * whose job it is (registry.ts, client-desk.ts, signal-relay.ts, stage-relay.ts, conflict-desk.ts);
 * what several desks read is in state.ts.
 *
 * With several instances (cluster/), this broker owns the sockets connected to it; proxies on
 * other instances are offered from the shared registry, and a connection whose client and proxy
 * sit on different instances is relayed through the cluster bus: each end's instance keeps a
 * Connection naming the other end's instance.
 */
import type { ClientToOrigo, ProxyToOrigo } from '@mutp/shared';
import type { InstanceMessage } from '../cluster/cluster';
import type { OrigoConfig } from '../config';
import { ConflictDesk } from './conflict-desk';
import { ConflictJudge } from '../conflicts';
import type { ProxyKeys } from '../proxy-auth';
import { ClientDesk } from './client-desk';
import type { ClientPeer, ProxyPeer } from './peers';
import { ProxyRegistry, type ProxyStatus } from './registry';
import { SignalRelay } from './signal-relay';
import { StageRelay } from './stage-relay';
import { type BrokerDeps, BrokerState } from './state';
import { Withdrawals } from './withdrawals';

type Register = Extract<ProxyToOrigo, { type: 'register' }>;
type Hello = Extract<ClientToOrigo, { type: 'hello' }>;

export class Broker {
  private readonly state: BrokerState;
  private readonly relay: SignalRelay;
  private readonly withdrawals: Withdrawals;
  private readonly registry: ProxyRegistry;
  private readonly clients: ClientDesk;
  /** Staging hints from clients to proxies and the proxies' answers (stage-relay.ts). */
  private readonly stages: StageRelay;
  private readonly conflicts: ConflictDesk;

  constructor(config: OrigoConfig, deps: BrokerDeps) {
    const state = (this.state = new BrokerState(config, deps));
    this.relay = new SignalRelay(state);
    this.withdrawals = new Withdrawals(state);
    this.registry = new ProxyRegistry(state, this.relay, this.withdrawals);
    this.clients = new ClientDesk(state, this.relay, this.registry.offers);
    this.stages = new StageRelay({
      config,
      metrics: deps.metrics,
      log: deps.log,
      cluster: deps.cluster,
      localProxy: (proxyId) => state.proxies.get(proxyId)?.peer,
      remoteInstance: (proxyId) => state.remoteProxy(proxyId)?.instanceId,
      localClient: (clientId) => state.clients.get(clientId)?.peer,
    });
    this.conflicts = new ConflictDesk({
      judge: new ConflictJudge(deps.fetchOrigin, () => Date.now()),
      log: deps.log,
      metrics: deps.metrics,
      assertionKeyOf: (proxyId) => state.anyProxy(proxyId)?.assertionKey,
      wasOffered: (clientId, proxyId) => state.reports.wasOffered(clientId, proxyId),
      provenFalse: (proxyId, url) => this.registry.banProvenFalse(proxyId, url),
      stale: (proxyId, message) => this.registry.toProxyAnywhere(proxyId, message),
    });
  }

  /** Joins the cluster: messages from other instances arrive here from now on. */
  start(): Promise<void> {
    return this.state.deps.cluster.start({
      onMessage: (m) => this.instanceMessage(m),
      onResync: () => this.registry.shareAll(),
    });
  }

  get counts() {
    return { proxies: this.state.proxies.size, clients: this.state.clients.size, connections: this.relay.size };
  }

  get instanceId(): string {
    return this.state.instanceId;
  }

  // ------------------------------------------------------------------------------ proxies

  /** Registers a proxy; returns its id, or undefined when refused (the peer got an error and is being closed). */
  register(peer: ProxyPeer, m: Register): Promise<string | undefined> {
    return this.registry.register(peer, m);
  }

  proxyMessage(proxyId: string, m: ProxyToOrigo): void {
    const proxy = this.state.proxies.get(proxyId);
    if (proxy === undefined) return; // removed (timeout, replaced) while the frame was in flight
    switch (m.type) {
      case 'register':
        this.state.deps.metrics.invalidMessages.inc({ kind: 'unexpected' });
        proxy.peer.send({ type: 'error', code: 'unexpected-message', message: 'already registered' });
        return;
      case 'heartbeat':
        return this.registry.heartbeat(proxy, m);
      case 'signal':
        return this.relay.fromProxy(proxy, m);
      case 'connection-closed':
        return this.relay.closedByProxy(proxyId, m);
      case 'staged':
        return this.stages.fromProxy(proxyId, m);
    }
  }

  /** The proxy's socket closed. Ignored when the entry now belongs to a newer socket. */
  proxyGone(proxyId: string, peer: ProxyPeer): void {
    this.registry.proxyGone(proxyId, peer);
  }

  /** Keys were reloaded: proxies whose key the new file lacks are revoked everywhere (registry.ts). */
  revokeRemoved(previous: ProxyKeys | undefined, next: ProxyKeys): void {
    this.registry.revokeRemoved(previous, next);
  }

  /** Every proxy of the cluster: this instance's, then the others' as last read from the shared registry. */
  listProxies(): ProxyStatus[] {
    return this.registry.listProxies();
  }

  // ------------------------------------------------------------------------------ clients

  /** A client said hello: resolves with its client id, or undefined when refused (client-desk.ts). */
  hello(peer: ClientPeer, m: Hello): Promise<string | undefined> {
    return this.clients.hello(peer, m);
  }

  clientMessage(clientId: string, m: ClientToOrigo): void {
    const client = this.state.clients.get(clientId);
    if (client === undefined) return;
    switch (m.type) {
      case 'hello':
        this.state.deps.metrics.invalidMessages.inc({ kind: 'unexpected' });
        client.peer.send({ type: 'error', code: 'unexpected-message', message: 'hello already received' });
        return;
      case 'request-proxies':
        return this.clients.requestProxies(client, m);
      case 'signal':
        return this.relay.fromClient(client, m);
      case 'connection-closed':
        return this.relay.closedByClient(clientId, m);
      case 'record':
        return this.clients.record(client, m);
      case 'report':
        return this.clients.report(client, m);
      case 'conflict':
        return this.conflicts.handle(client, m);
      case 'stage':
        return this.stages.fromClient(client, m);
      case 'ping':
        client.peer.send({ type: 'pong', nonce: m.nonce });
        return;
    }
  }

  /** The client's socket closed: its proxies are told about each of its connections. */
  clientGone(clientId: string, peer?: ClientPeer): void {
    this.clients.clientGone(clientId, peer);
  }

  // ------------------------------------------------------------------------------ other instances

  /** A message from another origo instance (validated by the cluster). */
  private instanceMessage(m: InstanceMessage): void {
    switch (m.kind) {
      case 'to-proxy':
        return this.relay.fromInstanceToProxy(m.from, m.connection, m.message);
      case 'to-client':
        return this.relay.fromInstanceToClient(m.connection, m.message);
      case 'proxy-replaced':
        return this.registry.replacedElsewhere(m.proxyId, m.from);
      case 'client-replaced':
        return this.clients.replacedElsewhere(m.clientId);
      case 'keys-revoked':
        return this.registry.dropRevoked(m.fingerprints);
      case 'proxy-withdrawn':
        // A proven-false ban came with it (the cluster noted it) or comes with the next read.
        this.withdrawals.withdraw(m.proxyId, m.reason, false);
        if (m.reason === 'proven-false') this.registry.dropProvenFalse(m.proxyId);
        return;
      case 'stage':
        return this.stages.fromInstance(m.from, m.proxyId, m.message);
      case 'staged':
        return this.stages.fromInstanceStaged(m.clientId, m.message);
      case 'stale':
        return this.state.proxies.get(m.proxyId)?.peer.send(m.message);
    }
  }

  /**
   * Stops the heartbeat timers (origo is shutting down; the sockets are closed by the server).
   * Its proxies leave the shared registry at once so other instances stop offering them.
   */
  close(): void {
    this.clients.close();
    this.registry.close();
  }
}
