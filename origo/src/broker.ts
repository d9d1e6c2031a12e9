/**
 * Origo's state and routing, independent of sockets: the proxy registry (heartbeats, load), the
 * clients, and the client–proxy connections whose signalling is relayed. Every message here has
 * already been validated against the schemas of @mutp/shared; the socket layer (server.ts)
 * handles framing, greeting order, rate limits and invalid frames.
 *
 * With several instances (cluster/), this broker owns the sockets connected to it; proxies on
 * other instances are offered from the shared registry, and a connection whose client and proxy
 * sit on different instances is relayed through the cluster bus: each end's instance keeps a
 * Connection naming the other end's instance.
 */
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import {
  addressPrefix,
  ClientToOrigo,
  MAX_RENEWED_PROXY_TOKENS,
  OrigoToClient,
  OrigoToProxy,
  ProxyInfo,
  QuicEndpoint,
  ProxyToOrigo,
  Random,
  WithdrawReason,
} from '@mutp/shared';
import { OrigoConfig } from './config';
import { BudgetBook } from './limits';
import { Metrics } from './metrics';
import { Cluster, ConnectionRef, InstanceMessage, SharedProxy } from './cluster/cluster';
import {
  authenticateProxy,
  httpPortProblem,
  httpUrlProblem,
  Lookup,
  ProxyKeys,
  quicUrlProblem,
  removedKeys,
  resolvedHostProblem,
} from './proxy-auth';
import { RecordWriter } from './records/record-writer';
import { ThroughputBook } from './throughput';
import { IssuedToken, TokenIssuer } from './tokens';
import { ProxyLoad, selectProxies, SelectableMode } from './selection';
import { DepartedOffers } from './departed-offers';
import { ProxyReports } from './reports';
import { ConflictDesk } from './conflict-desk';
import { ConflictJudge, OriginFetcher } from './conflicts';
import { StageRelay } from './stage-relay';
import { bannedUntil, banSubjects, PROVEN_FALSE_BAN_MS } from './proven-false-bans';

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

/** (proxy, network) offer notes kept (pickedBy); beyond, the oldest count again. */
const MAX_PICK_NOTES = 100_000;
/** Proxy ids remembered per client as offered to it (records may only name these). */
const MAX_OFFERED_PER_CLIENT = 256;
/**
 * A proxy's withdrawal is told to clients at most this often (a proxy flipping `draining` in its
 * heartbeats cannot make origo message every client it was offered to at heartbeat rate).
 */
const WITHDRAW_NOTICE_INTERVAL_MS = 60_000;
/** Withdrawals remembered for that interval; past this many, older ones are forgotten first. */
const MAX_WITHDRAW_NOTICES = 10_000;
type RequestProxies = Extract<ClientToOrigo, { type: 'request-proxies' }>;
type ClientReport = Extract<ClientToOrigo, { type: 'report' }>;

interface ProxyEntry extends ProxyLoad {
  peer: ProxyPeer;
  /** The fingerprint of the per-proxy key it registered with (revocation). */
  keyFingerprint?: string;
  name: string;
  httpUrl: string;
  quic?: QuicEndpoint;
  /** The key its METAs are signed with (register), published to clients. */
  assertionKey?: string;
  registeredAt: number;
  lastHeartbeatAt?: number;
  /** When its httpUrl name was last resolved (registration, then recheckName). */
  nameCheckedAt: number;
  connections: Set<string>;
  timer: NodeJS.Timeout;
}

interface ClientEntry {
  clientId: string;
  peer: ClientPeer;
  /** The client's network (addressPrefix of its address): what shares, budgets and votes count. */
  network: string;
  connectedAt: number;
  connections: Set<string>;
  /** Proxies origo offered this client (insertion order: the oldest is forgotten first). */
  offered: Set<string>;
  /**
   * The tokens signed for it per offered proxy (only proxies in `offered`): an offer reuses one
   * signed in the last third of its lifetime, so asking for proxies again and again (200
   * messages/s per socket) costs no signature per proxy each time.
   */
  proxyTokens: Map<string, IssuedToken>;
  renewTimer?: NodeJS.Timeout;
}

interface Connection {
  connectionId: string;
  clientId: string;
  proxyId: string;
  /** The instance holding the client's socket, when not this one. */
  clientInstance?: string;
  /** The instance holding the proxy's socket, when not this one. */
  proxyInstance?: string;
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
  /** The origo instance holding its socket. */
  instanceId: string;
  /** Shutting down (its last heartbeat said so): finishing its transfers, not offered. */
  draining: boolean;
}

export interface BrokerDeps {
  log: Logger;
  metrics: Metrics;
  records: RecordWriter;
  random: Random;
  tokens: TokenIssuer;
  /** The current per-proxy keys (undefined in shared-secret dev mode). */
  proxyKeys: () => ProxyKeys | undefined;
  /** State shared with other origo instances (SoloCluster when alone). */
  cluster: Cluster;
  /** How proxies' httpUrl names resolve (default: the system's resolver). */
  lookup?: Lookup;
  /** How often a registered proxy's httpUrl name is resolved again (default NAME_RECHECK_MS). */
  nameRecheckMs?: number;
  /** How origo fetches an object to judge a conflict (server.ts: the SSRF-guarded origin fetch). */
  fetchOrigin: OriginFetcher;
}

/** How often a registered proxy's httpUrl name is resolved again (recheckName). */
export const NAME_RECHECK_MS = 10 * 60_000;

export class Broker {
  private readonly proxies = new Map<string, ProxyEntry>();
  private readonly clients = new Map<string, ClientEntry>();
  private readonly connections = new Map<string, Connection>();
  /** Pollution reports: told to the operator, never a ban (reports.ts). */
  readonly reports = new ProxyReports();
  /** What clients whose session ended were offered, for a resuming session (departed-offers.ts). */
  private readonly departed = new DepartedOffers();
  /** Record budgets outlive sockets: per client id (kept across reconnects by its token) and per network. */
  private readonly recordBudgets = new BudgetBook();
  /** Proxies offered per client network: its client ids are free, its offers are not (issue 31). */
  private readonly offerBudgets = new BudgetBook();
  /**
   * (proxy, client network) pairs offered within about a heartbeat: an offer lowers a proxy's
   * score like a transfer would (selection.ts), so one network's offers count once, or asking
   * for an honest proxy again and again would push it down for every other client (issue 31).
   */
  private readonly pickedBy: LRUCache<string, true>;
  private readonly throughput = new ThroughputBook();
  /** Selection's view of each remote proxy, per registry read (candidate()). */
  private readonly remoteCandidates = new WeakMap<SharedProxy, Candidate>();
  private closed = false;
  /** When each proxy's withdrawal was last told to this instance's clients (withdraw()). */
  private readonly withdrawNotices = new Map<string, number>();
  /** Staging hints from clients to proxies and the proxies' answers (stage-relay.ts). */
  private readonly stages: StageRelay;
  private readonly conflicts: ConflictDesk;

  constructor(
    private readonly config: OrigoConfig,
    private readonly deps: BrokerDeps,
  ) {
    this.pickedBy = new LRUCache<string, true>({ max: MAX_PICK_NOTES, ttl: config.heartbeatIntervalMs });
    this.stages = new StageRelay({
      config,
      metrics: deps.metrics,
      log: deps.log,
      cluster: deps.cluster,
      localProxy: (proxyId) => this.proxies.get(proxyId)?.peer,
      remoteInstance: (proxyId) => this.remoteProxy(proxyId)?.instanceId,
      localClient: (clientId) => this.clients.get(clientId)?.peer,
    });
    this.conflicts = new ConflictDesk({
      judge: new ConflictJudge(deps.fetchOrigin, () => Date.now()),
      log: deps.log,
      metrics: deps.metrics,
      assertionKeyOf: (proxyId) => (this.proxies.get(proxyId) ?? this.remoteProxy(proxyId))?.assertionKey,
      wasOffered: (clientId, proxyId) => this.reports.wasOffered(clientId, proxyId),
      provenFalse: (proxyId, url) => {
        // Evidence is global: banned by id and key in the cluster's shared state (proven-false-bans.ts).
        const keyFingerprint = (this.proxies.get(proxyId) ?? this.remoteProxy(proxyId))?.keyFingerprint;
        this.deps.cluster.banProvenFalse(banSubjects({ proxyId, keyFingerprint }), Date.now() + PROVEN_FALSE_BAN_MS);
        this.deps.log.warn({ proxyId, url }, 'proxy proven false against the origin: not offered for a day');
        this.withdraw(proxyId, 'proven-false', true);
        this.dropProvenFalse(proxyId);
      },
      stale: (proxyId, message) => this.toProxyAnywhere(proxyId, message),
    });
  }

  /** A message for a proxy of this instance or, through the cluster, of the one holding its socket. */
  private toProxyAnywhere(proxyId: string, message: Extract<OrigoToProxy, { type: 'stale' }>): void {
    const local = this.proxies.get(proxyId);
    if (local !== undefined) {
      local.peer.send(message);
      return;
    }
    const instance = this.remoteProxy(proxyId)?.instanceId;
    if (instance !== undefined)
      this.deps.cluster.send(instance, { kind: 'stale', from: this.instanceId, proxyId, message });
  }

  /** Joins the cluster: messages from other instances arrive here from now on. */
  start(): Promise<void> {
    return this.deps.cluster.start({
      onMessage: (m) => this.instanceMessage(m),
      onResync: () => {
        for (const proxy of this.proxies.values()) this.share(proxy);
      },
    });
  }

  get counts() {
    return { proxies: this.proxies.size, clients: this.clients.size, connections: this.connections.size };
  }

  // ------------------------------------------------------------------------------ proxies

  /** Registers a proxy; returns its id, or undefined when refused (the peer got an error and is being closed). */
  async register(peer: ProxyPeer, m: Register): Promise<string | undefined> {
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
      return refuse('unauthorized', CLOSE.unauthorized, `httpUrl refused: ${this.withLocalHint(urlProblem)}`);
    }
    const quicProblem = m.quic === undefined ? undefined : quicUrlProblem(m.quic.url, m.httpUrl);
    if (quicProblem !== undefined) {
      return refuse('unauthorized', CLOSE.unauthorized, `quic.url refused: ${quicProblem}`);
    }
    // Only an authenticated proxy costs origo a name lookup.
    const hostProblem =
      httpPortProblem(m.httpUrl, this.config.allowLocalProxies) ??
      (await resolvedHostProblem(m.httpUrl, this.config.allowLocalProxies, this.deps.lookup));
    if (hostProblem !== undefined) {
      return refuse('unauthorized', CLOSE.unauthorized, `httpUrl refused: ${this.withLocalHint(hostProblem)}`);
    }
    const remote = this.deps.cluster.remoteProxies();
    const proxyId = auth.proxyId ?? this.newId('p', this.proxies, remote);
    if (auth.keyFingerprint !== undefined && this.deps.cluster.isKeyRevoked(auth.keyFingerprint)) {
      // Revoked on some instance (this file may be stale): revocations only ever accumulate.
      return refuse('unauthorized', CLOSE.unauthorized, `proxy key of ${proxyId} was revoked`);
    }
    const banned = bannedUntil(this.deps.cluster, { proxyId, keyFingerprint: auth.keyFingerprint }, Date.now());
    if (banned !== undefined) {
      const why = `${proxyId} was proven false against the origin (banned until ${new Date(banned).toISOString()})`;
      return refuse('unauthorized', CLOSE.unauthorized, why);
    }
    const previous = this.proxies.get(proxyId);
    const elsewhere = previous === undefined ? this.remoteProxy(proxyId) : undefined;
    if ((previous !== undefined || elsewhere !== undefined) && !auth.mayReplace) {
      // Shared-secret mode cannot tell the owner of an id from another holder of the secret.
      return refuse('id-in-use', CLOSE.tryAgainLater, `proxy id ${proxyId} is registered on a live socket`);
    }
    if (
      previous === undefined &&
      elsewhere === undefined &&
      // remote.size may still count a proxy that moved here since the last read: a bound, not a census.
      this.proxies.size + remote.size >= this.config.maxProxies
    ) {
      return refuse('busy', CLOSE.tryAgainLater, `origo already has ${this.config.maxProxies} proxies`);
    }
    if (elsewhere !== undefined) {
      // The proxy moved here (its instance died, or its network changed): the old socket goes.
      this.deps.log.info({ proxyId, from: elsewhere.instanceId }, 'proxy re-registered from another instance');
      this.deps.cluster.send(elsewhere.instanceId, { kind: 'proxy-replaced', from: this.instanceId, proxyId });
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
      ...(auth.keyFingerprint !== undefined ? { keyFingerprint: auth.keyFingerprint } : {}),
      name: m.name,
      httpUrl: m.httpUrl,
      ...(m.quic !== undefined ? { quic: m.quic } : {}),
      ...(m.assertionKey !== undefined ? { assertionKey: m.assertionKey } : {}),
      modes: new Set(m.modes),
      capacityBps: m.capacityBps,
      uploadBps: 0,
      activeTransfers: 0,
      maxTransfers: m.maxTransfers,
      registeredAt: Date.now(),
      nameCheckedAt: Date.now(),
      connections: new Set(),
      timer: setTimeout(() => this.heartbeatTimeout(proxyId), this.config.heartbeatTimeoutMs),
    };
    entry.timer.unref();
    this.proxies.set(proxyId, entry);
    this.countProxies();
    this.share(entry);
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
        this.toClient(connection, m);
        return;
      }
      case 'staged':
        return this.stages.fromProxy(proxyId, m);
    }
  }

  /** The proxy's socket closed. Ignored when the entry now belongs to a newer socket. */
  proxyGone(proxyId: string, peer: ProxyPeer): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined || proxy.peer !== peer) return;
    this.deps.log.info({ proxyId }, 'proxy disconnected');
    this.removeProxy(proxy);
  }

  /**
   * Keys were reloaded: every key the previous file listed and this one does not (under the same
   * id) is revoked by fingerprint, for every instance and for good, whether or not its proxy is
   * connected now (issue 31: a proxy offline at the reload registered at another instance, and a
   * stale file reloaded anywhere un-revoked keys everywhere). Proxies registered with one are dropped.
   */
  revokeRemoved(previous: ProxyKeys | undefined, next: ProxyKeys): void {
    const fingerprints = removedKeys(previous, next);
    if (fingerprints.length === 0) return;
    this.deps.cluster.revokeKeys(fingerprints);
    this.deps.cluster.broadcast({ kind: 'keys-revoked', from: this.instanceId, fingerprints });
    this.dropRevoked(fingerprints);
  }

  /** Drops this instance's proxies registered with a revoked key; every instance tells its clients. */
  private dropRevoked(fingerprints: readonly string[]): void {
    const revoked = new Set(fingerprints);
    for (const proxy of [...this.proxies.values()]) {
      if (proxy.keyFingerprint === undefined || !revoked.has(proxy.keyFingerprint)) continue;
      this.deps.log.warn({ proxyId: proxy.proxyId }, 'proxy key revoked: proxy removed');
      this.withdraw(proxy.proxyId, 'revoked', true);
      this.endRegistration(proxy, 'this proxy key was revoked');
    }
  }

  /**
   * Origo no longer offers `proxyId`: tells this instance's clients it was offered to
   * (`withdrawn`), so they move their next downloads elsewhere between two segments, and with
   * `broadcast` the other instances, which tell theirs. At most once a minute per proxy.
   */
  private withdraw(proxyId: string, reason: WithdrawReason, broadcast: boolean): void {
    const now = Date.now();
    const last = this.withdrawNotices.get(proxyId);
    if (last !== undefined && now - last < WITHDRAW_NOTICE_INTERVAL_MS) return;
    this.withdrawNotices.delete(proxyId);
    this.withdrawNotices.set(proxyId, now);
    if (this.withdrawNotices.size > MAX_WITHDRAW_NOTICES) {
      this.withdrawNotices.delete(this.withdrawNotices.keys().next().value!);
    }
    if (broadcast) this.deps.cluster.broadcast({ kind: 'proxy-withdrawn', from: this.instanceId, proxyId, reason });
    let told = 0;
    for (const client of this.clients.values()) {
      if (!client.offered.has(proxyId)) continue;
      client.peer.send({ type: 'withdrawn', proxyId, reason });
      told++;
    }
    if (told > 0) this.deps.log.info({ proxyId, reason, clients: told }, 'proxy withdrawn: its clients told');
  }

  /** Every proxy of the cluster: this instance's, then the others' as last read from the shared registry. */
  listProxies(): ProxyStatus[] {
    const status = (p: SharedProxy, connections: number): ProxyStatus => ({
      proxyId: p.proxyId,
      name: p.name,
      httpUrl: p.httpUrl,
      modes: [...p.modes],
      capacityBps: p.capacityBps,
      measuredBps: this.throughput.measured(p.proxyId) ?? null,
      uploadBps: p.uploadBps,
      activeTransfers: p.activeTransfers,
      maxTransfers: p.maxTransfers,
      connections,
      registeredAt: new Date(p.registeredAt).toISOString(),
      lastHeartbeatAt: p.lastHeartbeatAt === undefined ? null : new Date(p.lastHeartbeatAt).toISOString(),
      instanceId: p.instanceId,
      draining: p.draining === true,
    });
    return [
      ...[...this.proxies.values()].map((p) => status(this.shared(p), p.connections.size)),
      ...[...this.remoteEntries()].map((p) => status(p, 0)),
    ];
  }

  /**
   * Proxies other instances own, as last read. One that moved here since that read is ours: the
   * local entry wins until the next read drops the stale one.
   */
  private *remoteEntries(): Iterable<SharedProxy> {
    for (const p of this.deps.cluster.remoteProxies().values()) if (!this.proxies.has(p.proxyId)) yield p;
  }

  private remoteProxy(proxyId: string): SharedProxy | undefined {
    return this.proxies.has(proxyId) ? undefined : this.deps.cluster.remoteProxies().get(proxyId);
  }

  get instanceId(): string {
    return this.deps.cluster.instanceId;
  }

  /** A local proxy as the other instances see it. */
  private shared(p: ProxyEntry): SharedProxy {
    return {
      proxyId: p.proxyId,
      instanceId: this.instanceId,
      name: p.name,
      httpUrl: p.httpUrl,
      ...(p.quic !== undefined ? { quic: p.quic } : {}),
      ...(p.assertionKey !== undefined ? { assertionKey: p.assertionKey } : {}),
      ...(p.keyFingerprint !== undefined ? { keyFingerprint: p.keyFingerprint } : {}),
      modes: [...p.modes],
      capacityBps: p.capacityBps,
      uploadBps: p.uploadBps,
      activeTransfers: p.activeTransfers,
      maxTransfers: p.maxTransfers,
      draining: p.draining,
      registeredAt: p.registeredAt,
      lastHeartbeatAt: p.lastHeartbeatAt,
    };
  }

  /** The gauges of this instance's proxies: registered, and draining among them. */
  private countProxies(): void {
    this.deps.metrics.proxies.set(this.proxies.size);
    let draining = 0;
    for (const proxy of this.proxies.values()) if (proxy.draining === true) draining++;
    this.deps.metrics.proxiesDraining.set(draining);
  }

  /** Publishes a local proxy to the other instances; it expires with the heartbeat timeout. */
  private share(p: ProxyEntry): void {
    this.deps.cluster.publishProxy(this.shared(p), this.config.heartbeatTimeoutMs);
  }

  private heartbeat(proxy: ProxyEntry, m: Heartbeat): void {
    proxy.activeTransfers = m.activeTransfers;
    proxy.uploadBps = m.uploadBps;
    proxy.capacityBps = m.capacityBps;
    if (m.draining === true && proxy.draining !== true) {
      this.deps.log.info({ proxyId: proxy.proxyId }, 'proxy draining: no longer offered');
      this.withdraw(proxy.proxyId, 'draining', true);
    }
    if (proxy.draining !== (m.draining === true)) {
      proxy.draining = m.draining === true;
      this.countProxies();
    }
    // A certificate rotation: new clients authenticate the proxy by the new hashes.
    if (m.quicCertificateHashes !== undefined && proxy.quic !== undefined)
      proxy.quic = { url: proxy.quic.url, certificateHashes: m.quicCertificateHashes };
    proxy.lastHeartbeatAt = Date.now();
    proxy.timer.refresh();
    this.recheckName(proxy);
    // The load just reported includes the transfers recent picks became.
    this.deps.cluster.clearPicks(proxy.proxyId);
    this.share(proxy);
  }

  /** Ends the registration of a proxy of this instance proven false: it would be refused if it came now. */
  private dropProvenFalse(proxyId: string): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined) return;
    this.endRegistration(
      proxy,
      'proven false: the origin contradicts a META this proxy signed (not offered for 24 hours)',
    );
  }

  /** A refused httpUrl on this machine or its network: how a trial on one machine gets it accepted. */
  private withLocalHint(problem: string): string {
    if (this.config.allowLocalProxies || !/(loopback|private), not public|^localhost/.test(problem)) return problem;
    return `${problem} (a trial on one machine: origo --local-dev accepts it)`;
  }

  /** Ends a live registration that registering now would refuse: `error unauthorized` with why, 4001. */
  private endRegistration(proxy: ProxyEntry, why: string): void {
    this.removeProxy(proxy);
    proxy.peer.send({ type: 'error', code: 'unauthorized', message: why });
    proxy.peer.close(CLOSE.unauthorized, 'unauthorized');
  }

  /**
   * A name checked only at registration may be pointed at a private address later (DNS
   * rebinding: clients' downloads and `/v1/http` requests would then reach their own networks).
   * Resolved again every `nameRecheckMs` on a heartbeat (one lookup per proxy per interval, 2 s
   * bound); a non-public answer ends the registration as registration would have refused it.
   * Clients with another resolver can still be answered differently: that half is theirs.
   */
  private recheckName(proxy: ProxyEntry): void {
    const now = Date.now();
    if (now - proxy.nameCheckedAt < (this.deps.nameRecheckMs ?? NAME_RECHECK_MS)) return;
    proxy.nameCheckedAt = now;
    void resolvedHostProblem(proxy.httpUrl, this.config.allowLocalProxies, this.deps.lookup).then((problem) => {
      if (problem === undefined || this.proxies.get(proxy.proxyId) !== proxy) return;
      this.deps.log.warn(
        { proxyId: proxy.proxyId, problem },
        'proxy name now resolves to a non-public address: removed',
      );
      this.withdraw(proxy.proxyId, 'revoked', true);
      this.endRegistration(proxy, `httpUrl refused: ${problem}`);
    });
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
    this.toClient(connection, {
      type: 'signal',
      connectionId: m.connectionId,
      description: m.description,
      candidate: m.candidate,
    });
  }

  /** Delivers to the connection's client, here or on its instance. */
  private toClient(connection: Connection, message: OrigoToClient): void {
    if (connection.clientInstance === undefined) {
      this.clients.get(connection.clientId)?.peer.send(message);
    } else {
      this.deps.cluster.send(connection.clientInstance, {
        kind: 'to-client',
        from: this.instanceId,
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
      this.proxies.get(connection.proxyId)?.peer.send(message);
    } else {
      sent = this.deps.cluster.send(connection.proxyInstance, {
        kind: 'to-proxy',
        from: this.instanceId,
        connection: ref(connection),
        message,
      });
    }
    if (sent) this.deps.metrics.signalsRelayed.inc({ direction: 'client-to-proxy' });
    return sent;
  }

  /**
   * Forgets a proxy and tells the clients connected to it. `movedTo`: another instance took its
   * registration, whose shared entry must stay.
   */
  private removeProxy(proxy: ProxyEntry, movedTo?: string): void {
    clearTimeout(proxy.timer);
    this.proxies.delete(proxy.proxyId);
    this.countProxies();
    if (movedTo === undefined) this.deps.cluster.withdrawProxy(proxy.proxyId);
    for (const connectionId of [...proxy.connections]) {
      const connection = this.connections.get(connectionId)!;
      this.forget(connection);
      this.toClient(connection, { type: 'connection-closed', connectionId, reason: 'proxy-gone' });
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
    if (previousId !== undefined && old === undefined) {
      // Its older session may be on another instance (the client failed over): that one goes.
      this.deps.cluster.broadcast({ kind: 'client-replaced', from: this.instanceId, clientId: previousId });
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
    const clientId = previousId ?? this.newId('c', this.clients);
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
    if (inherited.length > 0) this.reports.noteOffered(clientId, inherited);
    this.deps.metrics.clients.set(this.clients.size);
    const issued = await this.deps.tokens.issue(clientId, Date.now(), undefined, entry.network);
    if (this.clients.get(clientId) !== entry) return undefined; // gone while signing
    peer.send({ type: 'welcome', clientId, ...issued });
    this.scheduleRenewal(entry);
    this.deps.log.info({ clientId, resumed: previousId !== undefined }, 'client connected');
    return clientId;
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

  clientMessage(clientId: string, m: ClientToOrigo): void {
    const client = this.clients.get(clientId);
    if (client === undefined) return;
    switch (m.type) {
      case 'hello':
        this.deps.metrics.invalidMessages.inc({ kind: 'unexpected' });
        client.peer.send({ type: 'error', code: 'unexpected-message', message: 'hello already received' });
        return;
      case 'request-proxies': {
        const timer = this.deps.metrics.requestProxiesSeconds.startTimer();
        return void this.requestProxies(client, m)
          .catch((err: unknown) => this.deps.log.error({ err, clientId }, 'offering proxies failed'))
          .finally(timer);
      }
      case 'signal':
        return this.clientSignal(client, m);
      case 'connection-closed': {
        const connection = this.connections.get(m.connectionId);
        if (connection === undefined || connection.clientId !== clientId) return;
        this.forget(connection);
        this.toProxy(connection, m);
        return;
      }
      case 'record':
        return this.record(client, m);
      case 'report':
        return this.report(client, m);
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
    const client = this.clients.get(clientId);
    if (client === undefined || (peer !== undefined && client.peer !== peer)) return;
    clearTimeout(client.renewTimer);
    this.clients.delete(clientId);
    this.departed.remember(clientId, client.offered, Date.now());
    this.reports.forgetClient(clientId);
    this.deps.metrics.clients.set(this.clients.size);
    for (const connectionId of [...client.connections]) {
      const connection = this.connections.get(connectionId)!;
      this.forget(connection);
      this.toProxy(connection, { type: 'connection-closed', connectionId, reason: 'client-gone' });
    }
    this.deps.log.info({ clientId }, 'client disconnected');
  }

  private async requestProxies(client: ClientEntry, m: RequestProxies): Promise<void> {
    const now = Date.now();
    const cluster = this.deps.cluster;
    const offerable: Candidate[] = [];
    for (const p of [this.proxies.values(), this.remoteEntries()]) {
      for (const proxy of p) {
        if (bannedUntil(cluster, proxy, now) !== undefined) continue;
        const c = this.candidate(proxy);
        // Offers since the last heartbeat count as transfers: clients spread over proxies between beats.
        c.recentPicks = cluster.picks(c.proxyId);
        c.measuredBps = this.throughput.measured(c.proxyId);
        offerable.push(c);
      }
    }
    const chosen = selectProxies(offerable, { count: m.count, mode: m.mode, exclude: m.exclude }, this.deps.random);
    const network = client.network;
    if (chosen.length > 0 && !this.takeOffers(network, chosen.length)) {
      const message = `no proxies offered: more than ${this.config.offerRatePerNetwork} offered proxies/s to this network`;
      client.peer.send({ type: 'error', code: 'rate-limited', requestId: m.requestId, message });
      return;
    }
    for (const p of chosen) {
      const note = `${p.proxyId}\n${network}`;
      if (this.pickedBy.has(note)) continue;
      this.pickedBy.set(note, true);
      cluster.notePick(p.proxyId, this.config.heartbeatTimeoutMs);
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
      token: tokens[i],
    }));
    this.reports.noteOffered(
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
    client.peer.send({ type: 'proxies', requestId: m.requestId, proxies });
    this.deps.log.debug(
      { clientId: client.clientId, requestId: m.requestId, mode: m.mode, chosen: proxies.map((p) => p.proxyId) },
      'proxies selected',
    );
  }

  /**
   * Selection's view of a proxy. A local entry is one itself (its load is live); a remote one is
   * made once per registry read, whose entries are new objects each time: no allocation per
   * proxy per request (request-proxies reads every proxy of the cluster).
   */
  private candidate(p: SharedProxy | ProxyEntry): Candidate {
    if ('peer' in p) return p;
    let c = this.remoteCandidates.get(p);
    if (c === undefined) {
      c = { ...p, modes: new Set(p.modes) };
      this.remoteCandidates.set(p, c);
    }
    return c;
  }

  /** Takes `count` offers from a client network's budget; false (counted as refused) when it is spent. */
  private takeOffers(network: string, count: number): boolean {
    const { offerRatePerNetwork: rate, offerBurstPerNetwork: burst } = this.config;
    if (this.offerBudgets.take(network, rate, burst, count)) return true;
    this.deps.metrics.offersRefused.inc({ reason: 'rate-limited' });
    return false;
  }

  private clientSignal(client: ClientEntry, m: ClientSignal): void {
    const refuse = (code: string, message: string) => client.peer.send({ type: 'error', code, message });
    let connection = this.connections.get(m.connectionId);
    if (connection === undefined) {
      const proxy = this.proxies.get(m.proxyId);
      const remote = proxy === undefined ? this.remoteProxy(m.proxyId) : undefined;
      if (proxy === undefined && remote === undefined) {
        return refuse('unknown-proxy', `proxy ${m.proxyId} is not registered`);
      }
      if (m.description?.type !== 'offer') {
        return refuse(
          'unknown-connection',
          `connection ${m.connectionId} is unknown (a connection starts with an offer)`,
        );
      }
      if (client.connections.size >= this.config.maxConnectionsPerClient) {
        return refuse('too-many-connections', `at most ${this.config.maxConnectionsPerClient} connections per client`);
      }
      // A connection to a proxy this instance did not offer the client (a staged set kept across a
      // failover, or a client that never asks) costs its network an offer: the peer slot it holds
      // at the proxy is budgeted like the offers (issue 31), and nothing honest is refused.
      if (!this.reports.wasOffered(client.clientId, m.proxyId) && !this.takeOffers(client.network, 1)) {
        return refuse('rate-limited', `more than ${this.config.offerRatePerNetwork} proxies/s to this network`);
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

  private report(client: ClientEntry, m: ClientReport): void {
    // Reporters count per network: the addresses of one /24 (or /48) are one reporter.
    const reporter = client.network;
    const outcome = this.reports.report(client.clientId, reporter, m.proxyId, Date.now());
    const fields = { clientId: client.clientId, proxyId: m.proxyId, kind: m.kind, outcome };
    this.deps.log.info(fields, 'pollution report');
    // Not a ban: the clients that proved it avoid it themselves; its operator can look at it.
    if (outcome === 'flagged')
      this.deps.log.warn(
        { proxyId: m.proxyId, networks: this.reports.policy.threshold },
        'proxy reported as a polluter by clients of several networks: check it (reports alone do not stop offers)',
      );
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
    this.throughput.observe(client.network, m.record);
  }

  // ------------------------------------------------------------------------------ shared

  private forget(connection: Connection): void {
    this.connections.delete(connection.connectionId);
    this.clients.get(connection.clientId)?.connections.delete(connection.connectionId);
    this.proxies.get(connection.proxyId)?.connections.delete(connection.connectionId);
    this.deps.metrics.connections.set(this.connections.size);
  }

  private newId(prefix: string, ...taken: ReadonlyMap<string, unknown>[]): string {
    for (;;) {
      const id = `${prefix}-${randomBytes(12).toString('base64url')}`;
      if (!taken.some((map) => map.has(id))) return id;
    }
  }

  // ------------------------------------------------------------------------------ other instances

  /** A message from another origo instance (validated by the cluster). */
  private instanceMessage(m: InstanceMessage): void {
    switch (m.kind) {
      case 'to-proxy':
        return this.relayedToProxy(m.from, m.connection, m.message);
      case 'to-client':
        return this.relayedToClient(m.connection, m.message);
      case 'proxy-replaced': {
        const proxy = this.proxies.get(m.proxyId);
        if (proxy === undefined) return;
        this.deps.log.info({ proxyId: m.proxyId, to: m.from }, 'proxy re-registered on another instance');
        this.removeProxy(proxy, m.from);
        proxy.peer.send({ type: 'error', code: 'replaced', message: 'a newer registration took this proxyId' });
        proxy.peer.close(CLOSE.replaced, 'replaced');
        return;
      }
      case 'client-replaced': {
        const client = this.clients.get(m.clientId);
        if (client === undefined) return;
        this.clientGone(client.clientId);
        client.peer.send({ type: 'error', code: 'replaced', message: 'a newer session presented this token' });
        client.peer.close(CLOSE.replaced, 'replaced');
        return;
      }
      case 'keys-revoked':
        return this.dropRevoked(m.fingerprints);
      case 'proxy-withdrawn':
        // A proven-false ban came with it (the cluster noted it) or comes with the next read.
        this.withdraw(m.proxyId, m.reason, false);
        if (m.reason === 'proven-false') this.dropProvenFalse(m.proxyId);
        return;
      case 'stage':
        return this.stages.fromInstance(m.from, m.proxyId, m.message);
      case 'staged':
        return this.stages.fromInstanceStaged(m.clientId, m.message);
      case 'stale':
        return this.proxies.get(m.proxyId)?.peer.send(m.message);
    }
  }

  /** Signalling from a client on instance `from` to a proxy of this one. */
  private relayedToProxy(from: string, c: ConnectionRef, message: OrigoToProxy): void {
    const proxy = this.proxies.get(c.proxyId);
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
  private relayedToClient(c: ConnectionRef, message: OrigoToClient): void {
    const connection = this.connections.get(c.connectionId);
    if (connection === undefined || connection.clientId !== c.clientId || connection.proxyId !== c.proxyId) return;
    if (message.type === 'connection-closed') this.forget(connection);
    this.clients.get(c.clientId)?.peer.send(message);
    this.deps.metrics.signalsRelayed.inc({ direction: 'proxy-to-client' });
  }

  /**
   * Stops the heartbeat timers (origo is shutting down; the sockets are closed by the server).
   * Its proxies leave the shared registry at once so other instances stop offering them.
   */
  close(): void {
    this.closed = true;
    for (const proxy of this.proxies.values()) {
      clearTimeout(proxy.timer);
      this.deps.cluster.withdrawProxy(proxy.proxyId);
    }
    for (const client of this.clients.values()) clearTimeout(client.renewTimer);
  }
}

/** What selection sees of a proxy, local or remote. */
interface Candidate extends ProxyLoad {
  name: string;
  httpUrl: string;
  quic?: QuicEndpoint;
  /** The key its METAs are signed with (register), published to clients. */
  assertionKey?: string;
}

function ref(c: Connection): ConnectionRef {
  return { connectionId: c.connectionId, clientId: c.clientId, proxyId: c.proxyId };
}
