/**
 * What the broker's desks share: the proxies and clients connected to this instance, what more
 * than one desk reads about them (pollution reports, measured throughput, offer budgets), and the
 * other instances' proxies as last read from the cluster's registry.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { QuicEndpoint, Random } from '@mutp/shared';
import type { SharedProxy, Cluster } from '../cluster/cluster';
import type { OrigoConfig } from '../config';
import type { OriginFetcher } from '../conflicts';
import { BudgetBook } from '../limits';
import type { Metrics } from '../metrics';
import type { Lookup, ProxyKeys } from '../proxy-auth';
import type { RecordWriter } from '../records/record-writer';
import { ProxyReports } from '../reports';
import type { ProxyLoad } from '../selection';
import { ThroughputBook } from '../throughput';
import type { IssuedToken, TokenIssuer } from '../tokens';
import type { ClientPeer, ProxyPeer } from './peers';

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
  /** How often a registered proxy's httpUrl name is resolved again (default NAME_RECHECK_MS, registry.ts). */
  nameRecheckMs?: number;
  /** How origo fetches an object to judge a conflict (server.ts: the SSRF-guarded origin fetch). */
  fetchOrigin: OriginFetcher;
}

/** A proxy whose socket this instance holds. */
export interface ProxyEntry extends ProxyLoad {
  peer: ProxyPeer;
  /** The fingerprint of the per-proxy key it registered with (revocation). */
  keyFingerprint?: string;
  name: string;
  httpUrl: string;
  quic?: QuicEndpoint;
  /** The key its METAs are signed with (register), published to clients. */
  assertionKey?: string;
  /** The optional MUTP features it declared (register; docs/protocol.md §13), passed on in offers. */
  capabilities?: readonly string[];
  registeredAt: number;
  lastHeartbeatAt?: number;
  /** When its httpUrl name was last resolved (registration, then recheckName). */
  nameCheckedAt: number;
  connections: Set<string>;
  timer: NodeJS.Timeout;
}

/** A client whose socket this instance holds. */
export interface ClientEntry {
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

/** A Map that counts its insertions and deletions (what caches of its keys check). */
export class VersionedMap<K, V> extends Map<K, V> {
  version = 0;

  override set(key: K, value: V): this {
    if (!this.has(key)) this.version++;
    return super.set(key, value);
  }

  override delete(key: K): boolean {
    const deleted = super.delete(key);
    if (deleted) this.version++;
    return deleted;
  }

  override clear(): void {
    this.version++;
    super.clear();
  }
}

export class BrokerState {
  readonly proxies = new VersionedMap<string, ProxyEntry>();
  readonly clients = new Map<string, ClientEntry>();
  /** Pollution reports: told to the operator, never a ban (reports.ts). */
  readonly reports = new ProxyReports();
  readonly throughput = new ThroughputBook();
  /** Proxies offered per client network: its client ids are free, its offers are not (issue 31). */
  private readonly offerBudgets = new BudgetBook();
  /** remoteEntries() as last listed, for the registry read and the local proxies it was listed against. */
  private remoteList?: { read: ReadonlyMap<string, SharedProxy>; localVersion: number; list: SharedProxy[] };

  constructor(
    readonly config: OrigoConfig,
    readonly deps: BrokerDeps,
  ) {}

  get instanceId(): string {
    return this.deps.cluster.instanceId;
  }

  /**
   * Proxies other instances own, as last read. One that moved here since that read is ours: the
   * local entry wins until the next read drops the stale one.
   */
  remoteEntries(): readonly SharedProxy[] {
    // Listed once per registry read (and per change of the local proxies), not per request:
    // request-proxies walks every proxy of the cluster.
    const read = this.deps.cluster.remoteProxies();
    const cached = this.remoteList;
    if (cached !== undefined && cached.read === read && cached.localVersion === this.proxies.version) {
      return cached.list;
    }
    const list: SharedProxy[] = [];
    for (const p of read.values()) if (!this.proxies.has(p.proxyId)) list.push(p);
    this.remoteList = { read, localVersion: this.proxies.version, list };
    return list;
  }

  remoteProxy(proxyId: string): SharedProxy | undefined {
    return this.proxies.has(proxyId) ? undefined : this.deps.cluster.remoteProxies().get(proxyId);
  }

  /** A proxy of this instance, or else of another one as last read. */
  anyProxy(proxyId: string): ProxyEntry | SharedProxy | undefined {
    return this.proxies.get(proxyId) ?? this.remoteProxy(proxyId);
  }

  /** Takes `count` offers from a client network's budget; false (counted as refused) when it is spent. */
  takeOffers(network: string, count: number): boolean {
    const { offerRatePerNetwork: rate, offerBurstPerNetwork: burst } = this.config;
    if (this.offerBudgets.take(network, rate, burst, count)) return true;
    this.deps.metrics.offersRefused.inc({ reason: 'rate-limited' });
    return false;
  }
}

/** A new random id with `prefix`, in none of the `taken` maps. */
export function newId(prefix: string, ...taken: ReadonlyMap<string, unknown>[]): string {
  for (;;) {
    const id = `${prefix}-${randomBytes(12).toString('base64url')}`;
    if (!taken.some((map) => map.has(id))) return id;
  }
}
