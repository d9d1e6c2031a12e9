/**
 * What one origo instance shares with the others behind the same name (docs/signalling.md,
 * "Several origo instances"): the proxy registry (each proxy's last heartbeat, expiring with its
 * heartbeat timeout), recent picks (selection spreads clients over proxies between heartbeats),
 * revoked proxy keys, proven-false bans, and a message bus between instances for signalling whose client and proxy
 * sit on different instances. Sockets never move: an instance owns the proxies and clients
 * connected to it and relays for them.
 *
 * Two implementations: `SoloCluster` (one instance, nothing shared, the embedded default) and
 * `RedisCluster` (redis.ts). The broker calls these synchronously and never awaits them: a slow
 * or absent Redis costs remote proxies and cross-instance relay, never the local event loop.
 */
import { z } from 'zod';
import {
  OrigoToClient,
  origoToClient,
  OrigoToProxy,
  origoToProxy,
  QuicEndpoint,
  quicEndpoint,
  assertionKey,
  StagedAnswer,
  StageHint,
  withdrawReason,
} from '@mutp/shared';
import type { SelectableMode } from '../selection';
import { BanList } from '../proven-false-bans';

/** A proxy as the other instances see it (its owner's last heartbeat). */
export interface SharedProxy {
  proxyId: string;
  /** The instance holding its socket. */
  instanceId: string;
  name: string;
  httpUrl: string;
  quic?: QuicEndpoint;
  assertionKey?: string;
  /** The optional MUTP features it declared (docs/protocol.md §13). */
  capabilities?: string[];
  /** The fingerprint of the per-proxy key it registered with: a proven-false ban names it too. */
  keyFingerprint?: string;
  /** Who runs it, as the keys file named it (selection rule 7); absent: its own operator. */
  operator?: string;
  modes: SelectableMode[];
  capacityBps: number;
  uploadBps: number;
  activeTransfers: number;
  maxTransfers: number;
  draining?: boolean;
  /** The region it declared and the client prefixes that region serves (locality, selection.ts rule 6). */
  region?: string;
  prefixes?: string[];
  registeredAt: number;
  lastHeartbeatAt?: number;
}

const sharedProxy = z.object({
  proxyId: z.string().max(128),
  instanceId: z.string().max(128),
  name: z.string().max(256),
  httpUrl: z.string().max(2048),
  quic: quicEndpoint.optional(),
  assertionKey: assertionKey.optional(),
  capabilities: z.array(z.string().max(32)).max(32).optional(),
  keyFingerprint: z.string().max(64).optional(),
  operator: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,64}$/)
    .optional(),
  modes: z.array(z.enum(['uncoded', 'rlnc', 'fountain'])).max(3),
  capacityBps: z.number().nonnegative(),
  uploadBps: z.number().nonnegative(),
  activeTransfers: z.number().int().nonnegative(),
  maxTransfers: z.number().int().nonnegative(),
  draining: z.boolean().optional(),
  region: z.string().max(63).optional(),
  prefixes: z.array(z.string().max(64)).max(16).optional(),
  registeredAt: z.number(),
  lastHeartbeatAt: z.number().optional(),
});

export function parseSharedProxy(json: string): SharedProxy | undefined {
  try {
    const parsed = sharedProxy.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Identifies a relayed connection on the instance that does not own both ends. */
const connectionRef = z.object({
  connectionId: z.string().max(128),
  clientId: z.string().max(128),
  proxyId: z.string().max(128),
});

/**
 * Messages between instances, validated on arrival like any frame from a socket. The relayed
 * `message` is checked against the shared signalling schemas separately (parseInstanceMessage).
 */
const envelope = z.discriminatedUnion('kind', [
  /** For a proxy the receiving instance owns; `from` owns the client. */
  z.object({ kind: z.literal('to-proxy'), from: z.string().max(128), connection: connectionRef, message: z.unknown() }),
  /** For a client the receiving instance owns; `from` owns the proxy. */
  z.object({
    kind: z.literal('to-client'),
    from: z.string().max(128),
    connection: connectionRef,
    message: z.unknown(),
  }),
  /** A staging hint for a proxy the receiving instance owns; `from` owns the client (and checked its budget). */
  z.object({ kind: z.literal('stage'), from: z.string().max(128), proxyId: z.string().max(128), message: z.unknown() }),
  /** A proxy's answer to a hint, for a client the receiving instance owns. */
  z.object({
    kind: z.literal('staged'),
    from: z.string().max(128),
    clientId: z.string().max(128),
    message: z.unknown(),
  }),
  /** A conflict's verdict for a proxy the receiving instance owns (`stale`: drop that version). */
  z.object({ kind: z.literal('stale'), from: z.string().max(128), proxyId: z.string().max(128), message: z.unknown() }),
  /** Another instance took this proxy's registration: close the socket here. */
  z.object({ kind: z.literal('proxy-replaced'), from: z.string().max(128), proxyId: z.string().max(128) }),
  /** A client presented its token on another instance: its older session here is replaced. */
  z.object({ kind: z.literal('client-replaced'), from: z.string().max(128), clientId: z.string().max(128) }),
  /** A proxy the sender owns began to drain: tell the clients it was offered to (`withdrawn`). */
  z.object({
    kind: z.literal('proxy-withdrawn'),
    from: z.string().max(128),
    proxyId: z.string().max(128),
    reason: withdrawReason,
  }),
  /** Keys were revoked somewhere: drop the proxies registered with them wherever they are. */
  z.object({
    kind: z.literal('keys-revoked'),
    from: z.string().max(128),
    fingerprints: z.array(z.string().max(64)).max(100_000),
  }),
]);
type Envelope = z.infer<typeof envelope>;
type Relay<K, M> = Omit<Extract<Envelope, { kind: K }>, 'message'> & { message: M };
export type InstanceMessage =
  | Relay<'to-proxy', OrigoToProxy>
  | Relay<'to-client', OrigoToClient>
  | Relay<'stage', StageHint>
  | Relay<'staged', StagedAnswer>
  | Relay<'stale', Extract<OrigoToProxy, { type: 'stale' }>>
  | Exclude<Envelope, { kind: 'to-proxy' | 'to-client' | 'stage' | 'staged' | 'stale' }>;

/** The message, or undefined when it is not one (a bad publisher or a corrupted payload). */
export function parseInstanceMessage(json: string): InstanceMessage | undefined {
  let parsed;
  try {
    parsed = envelope.safeParse(JSON.parse(json));
  } catch {
    return undefined;
  }
  if (!parsed.success) return undefined;
  const m = parsed.data;
  if (m.kind === 'to-proxy') {
    const inner = origoToProxy.safeParse(m.message);
    return inner.success ? { ...m, message: inner.data } : undefined;
  }
  if (m.kind === 'stage') {
    const inner = origoToProxy.safeParse(m.message);
    return inner.success && inner.data.type === 'stage' ? { ...m, message: inner.data } : undefined;
  }
  if (m.kind === 'stale') {
    const inner = origoToProxy.safeParse(m.message);
    return inner.success && inner.data.type === 'stale' ? { ...m, message: inner.data } : undefined;
  }
  if (m.kind === 'staged') {
    const inner = origoToClient.safeParse(m.message);
    return inner.success && inner.data.type === 'staged' ? { ...m, message: inner.data } : undefined;
  }
  if (m.kind === 'to-client') {
    const inner = origoToClient.safeParse(m.message);
    return inner.success ? { ...m, message: inner.data } : undefined;
  }
  return m;
}
export type ConnectionRef = z.infer<typeof connectionRef>;

export interface ClusterHandlers {
  /** A message from another instance, already validated. */
  onMessage(message: InstanceMessage): void;
  /** The shared store came back (e.g. Redis restarted empty): republish what this instance owns. */
  onResync(): void;
}

export interface Cluster {
  readonly instanceId: string;
  /** True when other instances may exist (shared state configured). */
  readonly shared: boolean;
  start(handlers: ClusterHandlers): Promise<void>;
  /** Publishes (or refreshes) a proxy this instance owns; it expires after `ttlMs` without a refresh. */
  publishProxy(proxy: SharedProxy, ttlMs: number): void;
  /** Removes a proxy this instance owned (gone, timed out, revoked). */
  withdrawProxy(proxyId: string): void;
  /** The proxies other instances own, as last read (expired ones already gone). */
  remoteProxies(): ReadonlyMap<string, SharedProxy>;
  /** Clients were offered this proxy since its last heartbeat (counted everywhere until it beats again). */
  notePick(proxyId: string, ttlMs: number): void;
  /** Picks since the proxy's last heartbeat, on every instance together (local ones included). */
  picks(proxyId: string): number;
  /** The proxy beat: its load now includes the transfers those picks became. */
  clearPicks(proxyId: string): void;
  /** Whether a proxy key (by fingerprint, `keyFingerprint`) was revoked on any instance. */
  isKeyRevoked(fingerprint: string): boolean;
  /**
   * Revokes keys for every instance, for good: the set only grows, so no instance's key file,
   * however stale, brings a revoked key back (a new key for the same id has a new fingerprint).
   */
  revokeKeys(fingerprints: readonly string[]): void;
  /**
   * Bans proven-false proxies (proven-false-bans.ts `banSubjects`) until `until` (ms since the
   * epoch) for every instance, including those that start or restart before then.
   */
  banProvenFalse(subjects: readonly string[], until: number): void;
  /** Until when `subject` is banned on any instance, or undefined. */
  provenFalseUntil(subject: string, now: number): number | undefined;
  hasProvenFalseBans(): boolean;
  /** Changes whenever a ban is added here (what is indexed for selection is checked again then). */
  bansVersion(): number;
  /** Sends to one instance; false when it cannot be sent now (no shared bus). */
  send(instanceId: string, message: InstanceMessage): boolean;
  /** Sends to every other instance. */
  broadcast(message: InstanceMessage): boolean;
  /** For /readyz and logs: whether the shared store is reachable now. */
  readonly healthy: boolean;
  close(): Promise<void>;
}

/**
 * The other instances' proxies this one may offer: none while it cannot reach the shared store.
 * Signalling to them goes over that store's bus, so each such offer would fail; and the last read
 * of the registry keeps them for a heartbeat timeout (issue 34: ~6 s of failing offers). Its own
 * proxies are offered as before.
 */
export function offerableRemote<T>(cluster: Cluster, remote: Iterable<T>): Iterable<T> {
  return reachesOtherInstances(cluster) ? remote : [];
}

/** Whether this instance can reach the others now (alone, trivially). */
export function reachesOtherInstances(cluster: Cluster): boolean {
  return !cluster.shared || cluster.healthy;
}

/** One instance alone: nothing is shared, picks are counted locally. */
export class SoloCluster implements Cluster {
  readonly shared = false;
  readonly healthy = true;
  private readonly pickCounts = new Map<string, number>();
  private readonly revoked = new Set<string>();
  private readonly bans = new BanList();
  private bansChanged = 0;
  private static readonly none: ReadonlyMap<string, SharedProxy> = new Map();

  constructor(readonly instanceId: string) {}

  async start(): Promise<void> {}
  publishProxy(): void {}
  withdrawProxy(proxyId: string): void {
    this.pickCounts.delete(proxyId);
  }
  remoteProxies(): ReadonlyMap<string, SharedProxy> {
    return SoloCluster.none;
  }
  notePick(proxyId: string): void {
    this.pickCounts.set(proxyId, (this.pickCounts.get(proxyId) ?? 0) + 1);
  }
  picks(proxyId: string): number {
    return this.pickCounts.get(proxyId) ?? 0;
  }
  clearPicks(proxyId: string): void {
    this.pickCounts.delete(proxyId);
  }
  isKeyRevoked(fingerprint: string): boolean {
    return this.revoked.has(fingerprint);
  }
  revokeKeys(fingerprints: readonly string[]): void {
    for (const f of fingerprints) this.revoked.add(f);
  }
  banProvenFalse(subjects: readonly string[], until: number): void {
    for (const s of subjects) this.bans.add(s, until);
    this.bansChanged++;
  }
  hasProvenFalseBans(): boolean {
    return this.bans.size > 0;
  }
  bansVersion(): number {
    return this.bansChanged;
  }

  provenFalseUntil(subject: string, now: number): number | undefined {
    return this.bans.get(subject, now);
  }
  send(): boolean {
    return false;
  }
  broadcast(): boolean {
    return false;
  }
  async close(): Promise<void> {}
}
