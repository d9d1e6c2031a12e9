/**
 * The proxy registry: registration (credentials, httpUrl and name checks, bans, replacement),
 * heartbeats (load, draining, certificate rotation, name rechecks), and the end of a registration
 * (socket gone, heartbeat timeout, key revoked, proven false). This instance's proxies are
 * published to the other instances; theirs are listed from the shared registry.
 */
import type { OrigoToProxy, ProxyToOrigo } from '@mutp/shared';
import type { SharedProxy } from '../cluster/cluster';
import {
  authenticateProxy,
  httpPortProblem,
  httpUrlProblem,
  operatorOf,
  ProxyKeys,
  quicUrlProblem,
  removedKeys,
  resolvedHostProblem,
} from '../proxy-auth';
import { OfferIndex } from '../offer-index';
import { bannedUntil, banSubjects, PROVEN_FALSE_BAN_MS } from '../proven-false-bans';
import type { SelectableMode } from '../selection';
import { CLOSE, type ProxyPeer } from './peers';
import type { SignalRelay } from './signal-relay';
import { type BrokerDeps, type BrokerState, newId, type ProxyEntry } from './state';
import type { Withdrawals } from './withdrawals';

type Register = Extract<ProxyToOrigo, { type: 'register' }>;
type Heartbeat = Extract<ProxyToOrigo, { type: 'heartbeat' }>;
type Stale = Extract<OrigoToProxy, { type: 'stale' }>;

/** How often a registered proxy's httpUrl name is resolved again (recheckName). */
export const NAME_RECHECK_MS = 10 * 60_000;

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
  /** The region it declared (locality), null when none. */
  region: string | null;
}

export class ProxyRegistry {
  private readonly deps: BrokerDeps;
  /** What request-proxies offers from (the client desk's), told of each heartbeat here. */
  readonly offers: OfferIndex;

  constructor(
    private readonly state: BrokerState,
    private readonly relay: SignalRelay,
    private readonly withdrawals: Withdrawals,
  ) {
    this.deps = state.deps;
    this.offers = new OfferIndex(state);
  }

  private get config() {
    return this.state.config;
  }

  private get proxies() {
    return this.state.proxies;
  }

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
    const proxyId = auth.proxyId ?? newId('p', this.proxies, remote);
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
    const elsewhere = previous === undefined ? this.state.remoteProxy(proxyId) : undefined;
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
      this.deps.cluster.send(elsewhere.instanceId, { kind: 'proxy-replaced', from: this.state.instanceId, proxyId });
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
      // Shared-secret (dev) mode names no operators: each proxy is its own.
      operator: auth.operator ?? proxyId,
      name: m.name,
      httpUrl: m.httpUrl,
      ...(m.quic !== undefined ? { quic: m.quic } : {}),
      ...(m.assertionKey !== undefined ? { assertionKey: m.assertionKey } : {}),
      ...(m.capabilities !== undefined ? { capabilities: m.capabilities } : {}),
      ...this.locality(m, auth.keyFingerprint),
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
      {
        proxyId,
        name: m.name,
        httpUrl: m.httpUrl,
        modes: m.modes,
        capacityBps: m.capacityBps,
        region: entry.region,
        prefixes: entry.prefixes,
        operator: entry.operator,
      },
      'proxy registered',
    );
    return proxyId;
  }

  heartbeat(proxy: ProxyEntry, m: Heartbeat): void {
    proxy.activeTransfers = m.activeTransfers;
    proxy.uploadBps = m.uploadBps;
    proxy.capacityBps = m.capacityBps;
    if (m.draining === true && proxy.draining !== true) {
      this.deps.log.info({ proxyId: proxy.proxyId }, 'proxy draining: no longer offered');
      this.withdrawals.withdraw(proxy.proxyId, 'draining', true);
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
    this.offers.changed(proxy.proxyId);
  }

  /** The proxy's socket closed. Ignored when the entry now belongs to a newer socket. */
  proxyGone(proxyId: string, peer: ProxyPeer): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined || proxy.peer !== peer) return;
    this.deps.log.info({ proxyId }, 'proxy disconnected');
    this.removeProxy(proxy);
  }

  /** Another instance took the registration of a proxy of this one (`proxy-replaced`): its socket here goes. */
  replacedElsewhere(proxyId: string, by: string): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined) return;
    this.deps.log.info({ proxyId, to: by }, 'proxy re-registered on another instance');
    this.removeProxy(proxy, by);
    proxy.peer.send({ type: 'error', code: 'replaced', message: 'a newer registration took this proxyId' });
    proxy.peer.close(CLOSE.replaced, 'replaced');
  }

  /**
   * Keys were reloaded: every key the previous file listed and this one does not (under the same
   * id) is revoked by fingerprint, for every instance and for good, whether or not its proxy is
   * connected now (issue 31: a proxy offline at the reload registered at another instance, and a
   * stale file reloaded anywhere un-revoked keys everywhere). Proxies registered with one are dropped.
   */
  revokeRemoved(previous: ProxyKeys | undefined, next: ProxyKeys): void {
    this.renameOperators(next);
    const fingerprints = removedKeys(previous, next);
    if (fingerprints.length === 0) return;
    this.deps.cluster.revokeKeys(fingerprints);
    this.deps.cluster.broadcast({ kind: 'keys-revoked', from: this.state.instanceId, fingerprints });
    this.dropRevoked(fingerprints);
  }

  /**
   * The reloaded keys may name other operators: this instance's proxies registered with a key
   * take theirs at once (offers read it; the other instances see it at the next heartbeat's share).
   */
  private renameOperators(keys: ProxyKeys): void {
    for (const proxy of this.proxies.values()) {
      if (proxy.keyFingerprint === undefined) continue;
      const operator = operatorOf(keys, proxy.proxyId);
      if (operator === proxy.operator) continue;
      this.deps.log.info({ proxyId: proxy.proxyId, from: proxy.operator, to: operator }, 'proxy operator renamed');
      proxy.operator = operator;
    }
  }

  /** Drops this instance's proxies registered with a revoked key; every instance tells its clients. */
  dropRevoked(fingerprints: readonly string[]): void {
    const revoked = new Set(fingerprints);
    for (const proxy of [...this.proxies.values()]) {
      if (proxy.keyFingerprint === undefined || !revoked.has(proxy.keyFingerprint)) continue;
      this.deps.log.warn({ proxyId: proxy.proxyId }, 'proxy key revoked: proxy removed');
      this.withdrawals.withdraw(proxy.proxyId, 'revoked', true);
      this.endRegistration(proxy, 'this proxy key was revoked');
    }
  }

  /** A conflict verdict proved a proxy's signed statement false: banned everywhere, withdrawn, dropped. */
  banProvenFalse(proxyId: string, url: string): void {
    // Evidence is global: banned by id and key in the cluster's shared state (proven-false-bans.ts).
    const keyFingerprint = this.state.anyProxy(proxyId)?.keyFingerprint;
    this.deps.cluster.banProvenFalse(banSubjects({ proxyId, keyFingerprint }), Date.now() + PROVEN_FALSE_BAN_MS);
    this.deps.log.warn({ proxyId, url }, 'proxy proven false against the origin: not offered for a day');
    this.withdrawals.withdraw(proxyId, 'proven-false', true);
    this.dropProvenFalse(proxyId);
  }

  /** Ends the registration of a proxy of this instance proven false: it would be refused if it came now. */
  dropProvenFalse(proxyId: string): void {
    const proxy = this.proxies.get(proxyId);
    if (proxy === undefined) return;
    this.endRegistration(
      proxy,
      'proven false: the origin contradicts a META this proxy signed (not offered for 24 hours)',
    );
  }

  /** A message for a proxy of this instance or, through the cluster, of the one holding its socket. */
  toProxyAnywhere(proxyId: string, message: Stale): void {
    const local = this.proxies.get(proxyId);
    if (local !== undefined) {
      local.peer.send(message);
      return;
    }
    const instance = this.state.remoteProxy(proxyId)?.instanceId;
    if (instance !== undefined)
      this.deps.cluster.send(instance, { kind: 'stale', from: this.state.instanceId, proxyId, message });
  }

  /** Every proxy of the cluster: this instance's, then the others' as last read from the shared registry. */
  listProxies(): ProxyStatus[] {
    const status = (p: SharedProxy, connections: number): ProxyStatus => ({
      proxyId: p.proxyId,
      name: p.name,
      httpUrl: p.httpUrl,
      modes: [...p.modes],
      capacityBps: p.capacityBps,
      measuredBps: this.state.throughput.measured(p.proxyId) ?? null,
      uploadBps: p.uploadBps,
      activeTransfers: p.activeTransfers,
      maxTransfers: p.maxTransfers,
      connections,
      registeredAt: new Date(p.registeredAt).toISOString(),
      lastHeartbeatAt: p.lastHeartbeatAt === undefined ? null : new Date(p.lastHeartbeatAt).toISOString(),
      instanceId: p.instanceId,
      draining: p.draining === true,
      region: p.region ?? null,
    });
    return [
      ...[...this.proxies.values()].map((p) => status(this.shared(p), p.connections.size)),
      ...[...this.state.remoteEntries()].map((p) => status(p, 0)),
    ];
  }

  /** Publishes every proxy of this instance again (the shared registry lost them: onResync). */
  shareAll(): void {
    for (const proxy of this.proxies.values()) this.share(proxy);
  }

  /** Stops the heartbeat timers; this instance's proxies leave the shared registry at once. */
  close(): void {
    for (const proxy of this.proxies.values()) {
      clearTimeout(proxy.timer);
      this.deps.cluster.withdrawProxy(proxy.proxyId);
    }
  }

  /** A local proxy as the other instances see it. */
  private shared(p: ProxyEntry): SharedProxy {
    return {
      proxyId: p.proxyId,
      instanceId: this.state.instanceId,
      name: p.name,
      httpUrl: p.httpUrl,
      ...(p.quic !== undefined ? { quic: p.quic } : {}),
      ...(p.assertionKey !== undefined ? { assertionKey: p.assertionKey } : {}),
      ...(p.capabilities !== undefined ? { capabilities: [...p.capabilities] } : {}),
      ...(p.keyFingerprint !== undefined ? { keyFingerprint: p.keyFingerprint } : {}),
      ...(p.operator !== undefined ? { operator: p.operator } : {}),
      modes: [...p.modes],
      capacityBps: p.capacityBps,
      uploadBps: p.uploadBps,
      activeTransfers: p.activeTransfers,
      maxTransfers: p.maxTransfers,
      draining: p.draining,
      ...(p.region !== undefined ? { region: p.region } : {}),
      ...(p.prefixes !== undefined ? { prefixes: [...p.prefixes] } : {}),
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

  /**
   * What a registration declares for locality (selection.ts rule 6): its region, and the client
   * prefixes that region serves. Prefixes pull clients towards a region, so they are taken only
   * from a proxy registered with a key of its own (revocable, and logged with its id); a proxy of
   * the shared dev secret keeps its region but not its prefixes. Prefixes without a region say nothing.
   */
  private locality(m: Register, keyFingerprint: string | undefined): { region?: string; prefixes?: string[] } {
    if (m.region === undefined) return {};
    if (m.prefixes === undefined || m.prefixes.length === 0) return { region: m.region };
    if (keyFingerprint === undefined) {
      this.deps.log.warn(
        { name: m.name, region: m.region },
        'region prefixes ignored: only a proxy with a key of its own (--proxy-keys) may declare them',
      );
      return { region: m.region };
    }
    return { region: m.region, prefixes: [...new Set(m.prefixes)] };
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
      this.withdrawals.withdraw(proxy.proxyId, 'revoked', true);
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

  /**
   * Forgets a proxy and tells the clients connected to it. `movedTo`: another instance took its
   * registration, whose shared entry must stay.
   */
  private removeProxy(proxy: ProxyEntry, movedTo?: string): void {
    clearTimeout(proxy.timer);
    this.proxies.delete(proxy.proxyId);
    this.countProxies();
    if (movedTo === undefined) this.deps.cluster.withdrawProxy(proxy.proxyId);
    this.relay.proxyGone(proxy);
  }
}
