/**
 * The client–proxy connections whose signalling origo relays (SDP and ICE, then their end). A
 * connection whose client and proxy sit on different instances is relayed through the cluster
 * bus: each end's instance keeps a Connection naming the other end's instance.
 */
import type { ClientToOrigo, OrigoToClient, OrigoToProxy, ProxyToOrigo } from '@mutp/shared';
import type { ConnectionRef } from '../cluster/cluster';
import type { BrokerDeps, BrokerState, ClientEntry, ProxyEntry } from './state';

type ProxySignal = Extract<ProxyToOrigo, { type: 'signal' }>;
type ClientSignal = Extract<ClientToOrigo, { type: 'signal' }>;
type ClosedByProxy = Extract<ProxyToOrigo, { type: 'connection-closed' }>;
type ClosedByClient = Extract<ClientToOrigo, { type: 'connection-closed' }>;

interface Connection {
  connectionId: string;
  clientId: string;
  proxyId: string;
  /** The instance holding the client's socket, when not this one. */
  clientInstance?: string;
  /** The instance holding the proxy's socket, when not this one. */
  proxyInstance?: string;
}

export class SignalRelay {
  private readonly connections = new Map<string, Connection>();
  private readonly deps: BrokerDeps;

  constructor(private readonly state: BrokerState) {
    this.deps = state.deps;
  }

  get size(): number {
    return this.connections.size;
  }

  /** A client's offer, answer or candidate: the first offer opens the connection. */
  fromClient(client: ClientEntry, m: ClientSignal): void {
    const { config, reports } = this.state;
    const refuse = (code: string, message: string) => client.peer.send({ type: 'error', code, message });
    let connection = this.connections.get(m.connectionId);
    if (connection === undefined) {
      const proxy = this.state.proxies.get(m.proxyId);
      const remote = proxy === undefined ? this.state.remoteProxy(m.proxyId) : undefined;
      if (proxy === undefined && remote === undefined) {
        return refuse('unknown-proxy', `proxy ${m.proxyId} is not registered`);
      }
      if (m.description?.type !== 'offer') {
        return refuse(
          'unknown-connection',
          `connection ${m.connectionId} is unknown (a connection starts with an offer)`,
        );
      }
      if (client.connections.size >= config.maxConnectionsPerClient) {
        return refuse('too-many-connections', `at most ${config.maxConnectionsPerClient} connections per client`);
      }
      // A connection to a proxy this instance did not offer the client (a staged set kept across a
      // failover, or a client that never asks) costs its network an offer: the peer slot it holds
      // at the proxy is budgeted like the offers (issue 31), and nothing honest is refused.
      if (!reports.wasOffered(client.clientId, m.proxyId) && !this.state.takeOffers(client.network, 1)) {
        return refuse('rate-limited', `more than ${config.offerRatePerNetwork} proxies/s to this network`);
      }
      connection = {
        connectionId: m.connectionId,
        clientId: client.clientId,
        proxyId: m.proxyId,
        proxyInstance: remote?.instanceId,
      };
      this.connections.set(m.connectionId, connection);
      client.connections.add(m.connectionId);
      proxy?.connections.add(m.connectionId);
      this.deps.metrics.connections.set(this.connections.size);
    } else if (connection.clientId !== client.clientId || connection.proxyId !== m.proxyId) {
      return refuse('unknown-connection', `connection ${m.connectionId} is not yours to ${m.proxyId}`);
    }
    const sent = this.toProxy(connection, {
      type: 'signal',
      connectionId: m.connectionId,
      clientId: client.clientId,
      clientNetwork: client.network,
      description: m.description,
      candidate: m.candidate,
    });
    if (!sent)
      refuse('relay-unavailable', `proxy ${m.proxyId} is on another origo instance that cannot be reached now`);
  }

  /** A proxy's answer or candidate, on a connection a client opened to it. */
  fromProxy(proxy: ProxyEntry, m: ProxySignal): void {
    const connection = this.connections.get(m.connectionId);
    if (connection === undefined || connection.proxyId !== proxy.proxyId) {
      proxy.peer.send({
        type: 'error',
        code: 'unknown-connection',
        message: `no connection ${m.connectionId} to this proxy`,
      });
      return;
    }
    this.toClient(connection, {
      type: 'signal',
      connectionId: m.connectionId,
      description: m.description,
      candidate: m.candidate,
    });
  }

  /** The client ended a connection: its proxy is told. */
  closedByClient(clientId: string, m: ClosedByClient): void {
    const connection = this.connections.get(m.connectionId);
    if (connection === undefined || connection.clientId !== clientId) return;
    this.forget(connection);
    this.toProxy(connection, m);
  }

  /** The proxy ended a connection: its client is told. */
  closedByProxy(proxyId: string, m: ClosedByProxy): void {
    const connection = this.connections.get(m.connectionId);
    if (connection === undefined || connection.proxyId !== proxyId) return; // already gone: nothing to tell
    this.forget(connection);
    this.toClient(connection, m);
  }

  /** A proxy left this instance: the clients connected to it are told. */
  proxyGone(proxy: ProxyEntry): void {
    for (const connectionId of [...proxy.connections]) {
      const connection = this.connections.get(connectionId)!;
      this.forget(connection);
      this.toClient(connection, { type: 'connection-closed', connectionId, reason: 'proxy-gone' });
    }
  }

  /** A client left this instance: the proxies it was connected to are told. */
  clientGone(client: ClientEntry): void {
    for (const connectionId of [...client.connections]) {
      const connection = this.connections.get(connectionId)!;
      this.forget(connection);
      this.toProxy(connection, { type: 'connection-closed', connectionId, reason: 'client-gone' });
    }
  }

  /** Signalling from a client on instance `from` to a proxy of this one. */
  fromInstanceToProxy(from: string, c: ConnectionRef, message: OrigoToProxy): void {
    const proxy = this.state.proxies.get(c.proxyId);
    let connection = this.connections.get(c.connectionId);
    if (connection !== undefined && (connection.clientId !== c.clientId || connection.proxyId !== c.proxyId)) return;
    if (proxy === undefined) {
      // Gone or moved since the client's instance read the registry: its client learns it.
      if (message.type === 'signal') {
        const closed = { ...c, clientInstance: from };
        this.toClient(closed, { type: 'connection-closed', connectionId: c.connectionId, reason: 'proxy-gone' });
      }
      return;
    }
    if (message.type === 'connection-closed') {
      if (connection !== undefined) this.forget(connection);
    } else if (connection === undefined) {
      connection = { ...c, clientInstance: from };
      this.connections.set(c.connectionId, connection);
      proxy.connections.add(c.connectionId);
      this.deps.metrics.connections.set(this.connections.size);
    }
    proxy.peer.send(message);
    this.deps.metrics.signalsRelayed.inc({ direction: 'client-to-proxy' });
  }

  /** Signalling from a proxy on another instance to a client of this one. */
  fromInstanceToClient(c: ConnectionRef, message: OrigoToClient): void {
    const connection = this.connections.get(c.connectionId);
    if (connection === undefined || connection.clientId !== c.clientId || connection.proxyId !== c.proxyId) return;
    if (message.type === 'connection-closed') this.forget(connection);
    this.state.clients.get(c.clientId)?.peer.send(message);
    this.deps.metrics.signalsRelayed.inc({ direction: 'proxy-to-client' });
  }

  private forget(connection: Connection): void {
    this.connections.delete(connection.connectionId);
    this.state.clients.get(connection.clientId)?.connections.delete(connection.connectionId);
    this.state.proxies.get(connection.proxyId)?.connections.delete(connection.connectionId);
    this.deps.metrics.connections.set(this.connections.size);
  }

  /** Delivers to the connection's client, here or on its instance. */
  private toClient(connection: Connection, message: OrigoToClient): void {
    if (connection.clientInstance === undefined) {
      this.state.clients.get(connection.clientId)?.peer.send(message);
    } else {
      this.deps.cluster.send(connection.clientInstance, {
        kind: 'to-client',
        from: this.state.instanceId,
        connection: ref(connection),
        message,
      });
    }
    this.deps.metrics.signalsRelayed.inc({ direction: 'proxy-to-client' });
  }

  /** Delivers to the connection's proxy, here or on its instance; false when it cannot be sent. */
  private toProxy(connection: Connection, message: OrigoToProxy): boolean {
    let sent = true;
    if (connection.proxyInstance === undefined) {
      this.state.proxies.get(connection.proxyId)?.peer.send(message);
    } else {
      sent = this.deps.cluster.send(connection.proxyInstance, {
        kind: 'to-proxy',
        from: this.state.instanceId,
        connection: ref(connection),
        message,
      });
    }
    if (sent) this.deps.metrics.signalsRelayed.inc({ direction: 'client-to-proxy' });
    return sent;
  }
}

function ref(c: Connection): ConnectionRef {
  return { connectionId: c.connectionId, clientId: c.clientId, proxyId: c.proxyId };
}
