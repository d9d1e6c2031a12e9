/**
 * Origo instances sharing state through Redis (`--redis URL`). Keys (prefix `mutp:`):
 *
 * - `proxy:<id>`: a proxy's last heartbeat (JSON SharedProxy), written by its owner with a PX
 *   expiry of the heartbeat timeout, so a dead instance's proxies vanish on Redis's clock without
 *   anyone cleaning up; `proxies` is the set of ids to read them by (stale ids are pruned).
 * - `picks:<id>`: offers of that proxy since its last heartbeat, by every instance (INCR, PX).
 * - `revoked-keys`: fingerprints of proxy keys removed or replaced on some instance (append-only).
 * - `proven-false`: proven-false bans (proven-false-bans.ts), a sorted set of subjects scored by
 *   when each ends (ms since the epoch), at most MAX_PROVEN_FALSE_BANS (the nearest their end
 *   go first), expired ones pruned at each write; `proven-false-version` counts the writes, so
 *   the set is read again only when it changed. An instance republishes what it knows (NX: never
 *   shortening a ban) when Redis comes back, so a Redis restarted empty gets them back.
 * - channels `instance:<id>` (one per instance) and `broadcast`: InstanceMessage JSON.
 *
 * The broker never awaits Redis: writes are fire-and-forget (ioredis keeps order per connection),
 * and the per-proxy ones (heartbeats, picks) are coalesced into one pipeline per turn of the event
 * loop (ProxyWrites): a heartbeat whose proxy changed nothing but its beat time only extends the
 * key's expiry (its `lastHeartbeatAt` in Redis is rewritten at least every REWRITE_MS), so the
 * registry read finds the same text and reuses what it parsed last time. The
 * registry is read every `refreshMs` into a snapshot the broker reads synchronously, and
 * messages arrive on a subscriber connection. Redis down: commands fail fast (no offline queue),
 * the snapshot keeps what it had until the entries' own expiry, cross-instance relay fails and
 * callers are told. Redis back (restarted empty): `onResync` republishes what this instance owns.
 */
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { BanList, MAX_PROVEN_FALSE_BANS, PROVEN_FALSE_BAN_MS } from '../proven-false-bans';
import {
  Cluster,
  ClusterHandlers,
  InstanceMessage,
  parseInstanceMessage,
  parseSharedProxy,
  SharedProxy,
} from './cluster';

export interface RedisClusterOptions {
  url: string;
  instanceId: string;
  /** How often the registry snapshot is read. */
  refreshMs: number;
  /** While Redis is unreachable, remote proxies are kept this long after the last good read (the heartbeat timeout). */
  staleAfterMs: number;
  /** Key prefix (several deployments, or tests, on one Redis). */
  prefix?: string;
  log: Logger;
  /** Counts what failed to reach Redis, by operation. */
  onError?: (operation: string) => void;
}

/** Refresh reads at most this many proxies (a bound on one MGET; origo's maxProxies is lower by default). */
const MAX_SHARED_PROXIES = 100_000;
/** A proxy whose content did not change is written in full again after this long anyway (its beat time). */
export const REWRITE_MS = 10_000;

/** What the next flush writes for one proxy this instance owns. */
interface ProxyWrite {
  /** The whole entry (new or changed content, or due for a rewrite); else only its expiry is extended. */
  json?: string;
  ttlMs?: number;
  /** It beat: the picks counted since its last beat go (before any picked since, below). */
  clearPicks?: boolean;
  /** Offers of it since, to add to the shared count, and the count's expiry. */
  picks?: number;
  picksTtlMs?: number;
}

type Shared = SharedProxy & { expiresAt: number };

/**
 * Removes from the `proxies` set the ids whose key is gone, each only if its key is still gone when
 * Redis runs this (one script, atomic): the registry read found them gone a round trip earlier, and
 * meanwhile the owner may have written one again (a key expired in a stall is written in full at
 * once, flush()). A plain SREM then took a live proxy out of the set, and as an unchanged beat only
 * extends its key's expiry (no SADD), the other instances lost it until its next full write
 * (REWRITE_MS): offers of it in flight failed `unknown-proxy` there (issue 34). Returns how many went.
 */
export async function pruneGone(redis: Redis, prefix: string, ids: readonly string[]): Promise<number> {
  const keys = [prefix + 'proxies', ...ids.map((id) => `${prefix}proxy:${id}`)];
  return (await redis.eval(PRUNE_GONE, keys.length, ...keys, ...ids)) as number;
}

/** KEYS[1] the id set, KEYS[i + 1] the key of ARGV[i]. */
const PRUNE_GONE = `
local removed = 0
for i, id in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then removed = removed + redis.call('SREM', KEYS[1], id) end
end
return removed`;

export class RedisCluster implements Cluster {
  readonly shared = true;
  readonly instanceId: string;
  private readonly command: Redis;
  private readonly subscriber: Redis;
  private readonly prefix: string;
  private snapshot = new Map<string, Shared>();
  /** What the last read parsed, by id, with the text it came from: the same text is not parsed again. */
  private parsed = new Map<string, { raw: string; proxy: Shared }>();
  /**
   * Per proxy this instance owns: its content (without the beat time) as last written, when, and
   * the whole entry as last published (written again at once if its key is found gone).
   */
  private readonly written = new Map<string, { body: string; at: number; json: string; ttlMs: number }>();
  /** Writes waiting for the next flush (one pipeline per turn of the event loop). */
  private readonly outbox = new Map<string, ProxyWrite>();
  private flushQueued = false;
  private readonly pickCounts = new Map<string, number>();
  private revoked = new Set<string>();
  private readonly bans = new BanList();
  /** Counts additions to `bans` (bansVersion). */
  private bansChanged = 0;
  /** `proven-false-version` at the last read of the bans (undefined: never read). */
  private bansReadVersion: string | null | undefined;
  private handlers?: ClusterHandlers;
  private timer?: NodeJS.Timeout;
  private refreshing = false;
  private closed = false;
  /** Whether the last refresh reached Redis. */
  private reachable = false;
  private everReady = false;

  constructor(private readonly options: RedisClusterOptions) {
    this.instanceId = options.instanceId;
    this.prefix = options.prefix ?? 'mutp:';
    const common = {
      // Fail fast while disconnected instead of queueing: nothing on the message path waits.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      commandTimeout: 2000,
      retryStrategy: (attempt: number) => Math.min(2000, 50 * 2 ** Math.min(attempt, 6)),
      lazyConnect: true,
    };
    this.command = new Redis(options.url, { ...common, connectionName: `mutp-origo-${this.instanceId}` });
    // Subscriptions are replayed by ioredis on reconnect; it needs its queue to do so.
    this.subscriber = new Redis(options.url, { ...common, enableOfflineQueue: true });
    for (const [name, client] of [
      ['commands', this.command],
      ['subscriber', this.subscriber],
    ] as const) {
      client.on('error', (err: Error) => this.options.log.debug({ err: err.message, connection: name }, 'redis error'));
    }
    this.command.on('ready', () => {
      if (!this.everReady) {
        this.everReady = true;
        return;
      }
      this.options.log.info('redis reachable again: republishing this instance’s proxies');
      // Redis may have restarted empty: nothing written before counts as written.
      this.written.clear();
      this.handlers?.onResync();
      this.republishBans();
    });
    this.command.on('close', () => (this.reachable = false));
  }

  private key(...parts: string[]): string {
    return this.prefix + parts.join(':');
  }

  get healthy(): boolean {
    return this.reachable && this.command.status === 'ready';
  }

  /** Connects both connections; rejects when Redis cannot be reached within the connect timeout. */
  async start(handlers: ClusterHandlers): Promise<void> {
    this.handlers = handlers;
    this.subscriber.on('message', (_channel: string, payload: string) => this.deliver(payload));
    await Promise.all([this.command.connect(), this.subscriber.connect()]);
    await this.subscriber.subscribe(this.key('instance', this.instanceId), this.key('broadcast'));
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.options.refreshMs);
    this.timer.unref();
  }

  private deliver(payload: string): void {
    const message = parseInstanceMessage(payload);
    if (message === undefined) {
      this.options.log.warn({ bytes: payload.length }, 'invalid message from another origo instance: dropped');
      this.options.onError?.('invalid-message');
      return;
    }
    if (message.from === this.instanceId) return; // our own broadcast
    // Refused from now on, not from the next read of the registry on.
    if (message.kind === 'keys-revoked') for (const f of message.fingerprints) this.revoked.add(f);
    // Not offered from now on; its key's ban comes with the next read.
    if (message.kind === 'proxy-withdrawn' && message.reason === 'proven-false') {
      this.bans.add(`id:${message.proxyId}`, Date.now() + PROVEN_FALSE_BAN_MS);
      this.bansChanged++;
    }
    this.handlers?.onMessage(message);
  }

  publishProxy(proxy: SharedProxy, ttlMs: number): void {
    // Its content without the beat time: what, changed, must be written at once.
    const body = JSON.stringify({ ...proxy, lastHeartbeatAt: undefined });
    const now = Date.now();
    const last = this.written.get(proxy.proxyId);
    const write = this.pending(proxy.proxyId);
    const json = JSON.stringify(proxy);
    if (write.json !== undefined || last === undefined || last.body !== body || now - last.at >= REWRITE_MS) {
      this.written.set(proxy.proxyId, { body, at: now, json, ttlMs });
      write.json = json;
    } else {
      last.json = json;
      last.ttlMs = ttlMs;
    }
    write.ttlMs = ttlMs;
  }

  withdrawProxy(proxyId: string): void {
    this.outbox.delete(proxyId);
    this.written.delete(proxyId);
    this.pickCounts.delete(proxyId);
    this.run('withdraw-proxy', () =>
      this.command
        .multi()
        .del(this.key('proxy', proxyId), this.key('picks', proxyId))
        .srem(this.key('proxies'), proxyId)
        .exec(),
    );
  }

  remoteProxies(): ReadonlyMap<string, SharedProxy> {
    return this.snapshot;
  }

  notePick(proxyId: string, ttlMs: number): void {
    this.pickCounts.set(proxyId, (this.pickCounts.get(proxyId) ?? 0) + 1);
    const write = this.pending(proxyId);
    write.picks = (write.picks ?? 0) + 1;
    write.picksTtlMs = ttlMs;
  }

  picks(proxyId: string): number {
    return this.pickCounts.get(proxyId) ?? 0;
  }

  clearPicks(proxyId: string): void {
    // The count kept here goes at the next read, as on every other instance: clearing it now would
    // make this instance's own proxies look less loaded than the others' until then, and selection
    // would favour them (measured: 18 % of offers crossed instances with proxies split evenly).
    const write = this.pending(proxyId);
    write.clearPicks = true;
    write.picks = undefined; // picked before this beat: counted in the load it reported
  }

  /** The proxy's entry in the next flush (queued for the end of this turn of the event loop). */
  private pending(proxyId: string): ProxyWrite {
    let write = this.outbox.get(proxyId);
    if (write === undefined) {
      write = {};
      this.outbox.set(proxyId, write);
    }
    if (!this.flushQueued && !this.closed) {
      this.flushQueued = true;
      setImmediate(() => this.flush());
    }
    return write;
  }

  /**
   * Sends the coalesced writes in one pipeline (ordered on the connection like the commands they
   * replace). An entry whose key had expired when only its expiry was to be extended is written
   * in full at once (other instances read it again at their next refresh); one whose write failed
   * (Redis unreachable) is written in full at its next heartbeat.
   */
  private flush(): void {
    this.flushQueued = false;
    if (this.outbox.size === 0 || this.closed) return;
    const batch = this.command.pipeline();
    let commands = 0;
    const added: string[] = [];
    /** Proxies whose expiry alone is extended, by the index of their PEXPIRE in the pipeline. */
    const extended = new Map<number, string>();
    for (const [id, w] of this.outbox) {
      const key = this.key('proxy', id);
      if (w.json !== undefined) {
        batch.set(key, w.json, 'PX', w.ttlMs!);
        added.push(id);
        commands++;
      } else if (w.ttlMs !== undefined) {
        batch.pexpire(key, w.ttlMs);
        extended.set(commands++, id);
      }
      const picks = this.key('picks', id);
      if (w.clearPicks) {
        batch.del(picks);
        commands++;
      }
      if (w.picks !== undefined) {
        batch.incrby(picks, w.picks).pexpire(picks, w.picksTtlMs!);
        commands += 2;
      }
    }
    this.outbox.clear();
    if (added.length > 0) batch.sadd(this.key('proxies'), ...added);
    const rewrite = (ids: Iterable<string>) => {
      for (const id of ids) this.written.delete(id);
    };
    this.run('publish-proxy', () =>
      batch.exec().then(
        (results) => {
          if (results === null || results.some(([err]) => err !== null)) {
            rewrite([...added, ...extended.values()]);
            throw new Error('pipeline failed');
          }
          // PEXPIRE answers 0 when the key is gone (expired in a stall, Redis emptied): write it again.
          for (const [index, id] of extended) {
            const last = this.written.get(id);
            if (results[index][1] !== 0 || last === undefined) continue;
            const write = this.pending(id);
            write.json ??= last.json;
            write.ttlMs ??= last.ttlMs;
          }
        },
        (err: unknown) => {
          rewrite([...added, ...extended.values()]);
          throw err;
        },
      ),
    );
  }

  isKeyRevoked(fingerprint: string): boolean {
    return this.revoked.has(fingerprint);
  }

  revokeKeys(fingerprints: readonly string[]): void {
    if (fingerprints.length === 0) return;
    for (const f of fingerprints) this.revoked.add(f);
    // Append-only: nothing ever removes a member (SREM), so a stale key file cannot un-revoke.
    this.run('revoke-keys', () => this.command.sadd(this.key('revoked-keys'), ...fingerprints));
  }

  banProvenFalse(subjects: readonly string[], until: number): void {
    if (subjects.length === 0) return;
    for (const s of subjects) this.bans.add(s, until);
    this.bansChanged++;
    this.writeBans(subjects.flatMap((s) => [until, s]));
  }

  /** Whether any ban is known here: none, and nothing needs looking up per proxy (request-proxies). */
  hasProvenFalseBans(): boolean {
    return this.bans.size > 0;
  }

  provenFalseUntil(subject: string, now: number): number | undefined {
    return this.bans.get(subject, now);
  }

  bansVersion(): number {
    return this.bansChanged;
  }

  /** Adds bans (score, subject pairs) to the shared set; `nx`: only those it lacks. Bounded, pruned. */
  private writeBans(scored: (number | string)[], nx = false): void {
    const key = this.key('proven-false');
    const version = this.key('proven-false-version');
    this.run('ban-proven-false', () =>
      (nx ? this.command.multi().zadd(key, 'NX', ...scored) : this.command.multi().zadd(key, ...scored))
        .zremrangebyscore(key, '-inf', Date.now())
        .zremrangebyrank(key, 0, -(MAX_PROVEN_FALSE_BANS + 1))
        .pexpire(key, PROVEN_FALSE_BAN_MS)
        .incr(version)
        .pexpire(version, PROVEN_FALSE_BAN_MS)
        .exec(),
    );
  }

  /** Redis is back (perhaps restarted empty): the bans this instance knows go back in. */
  private republishBans(): void {
    const known = this.bans.entries(Date.now());
    if (known.length > 0)
      this.writeBans(
        known.flatMap(([s, until]) => [until, s]),
        true,
      );
  }

  /** Reads the bans when another instance wrote some since the last read; they add to what this one knows. */
  private async readBans(version: string | null): Promise<void> {
    if (version === this.bansReadVersion) return;
    const scored = await this.command.zrangebyscore(
      this.key('proven-false'),
      Date.now(),
      '+inf',
      'WITHSCORES',
      'LIMIT',
      0,
      MAX_PROVEN_FALSE_BANS,
    );
    for (let i = 0; i + 1 < scored.length; i += 2) {
      const until = Number(scored[i + 1]);
      if (Number.isFinite(until)) this.bans.add(scored[i], until);
    }
    this.bansChanged++;
    this.bansReadVersion = version;
  }

  send(instanceId: string, message: InstanceMessage): boolean {
    return this.publish(this.key('instance', instanceId), message);
  }

  broadcast(message: InstanceMessage): boolean {
    return this.publish(this.key('broadcast'), message);
  }

  private publish(channel: string, message: InstanceMessage): boolean {
    if (this.command.status !== 'ready') {
      this.options.onError?.('publish');
      return false;
    }
    this.run('publish', () => this.command.publish(channel, JSON.stringify(message)));
    return true;
  }

  /** Reads the registry: ids, then every proxy and its picks in one round trip. */
  private async refresh(): Promise<void> {
    if (this.refreshing || this.closed) return;
    this.refreshing = true;
    try {
      const ids = (await this.command.srandmember(this.key('proxies'), MAX_SHARED_PROXIES)) as string[];
      const [values, picks, revoked, bansVersion] = await Promise.all([
        ids.length > 0 ? this.command.mget(ids.map((id) => this.key('proxy', id))) : Promise.resolve([]),
        ids.length > 0 ? this.command.mget(ids.map((id) => this.key('picks', id))) : Promise.resolve([]),
        this.command.smembers(this.key('revoked-keys')),
        this.command.get(this.key('proven-false-version')),
      ]);
      await this.readBans(bansVersion);
      const expiresAt = Date.now() + this.options.staleAfterMs;
      const next = new Map<string, Shared>();
      const parsed = new Map<string, { raw: string; proxy: Shared }>();
      const stale: string[] = [];
      ids.forEach((id, i) => {
        const raw = values[i];
        const known = raw === null ? undefined : this.parsed.get(id);
        // The same text as last read (a beat that changed nothing): the same object, so that
        // nothing derived from it (selection's candidates) is made again either.
        let proxy = known?.raw === raw ? known?.proxy : undefined;
        if (proxy === undefined && raw !== null) {
          const fresh = parseSharedProxy(raw);
          proxy = fresh === undefined || fresh.proxyId !== id ? undefined : { ...fresh, expiresAt };
        }
        if (proxy === undefined || raw === null) {
          stale.push(id);
          return;
        }
        proxy.expiresAt = expiresAt;
        parsed.set(id, { raw, proxy });
        // Our own proxies are in the broker already; picks count everyone's offers.
        const count = Number(picks[i] ?? 0);
        this.pickCounts.set(id, Number.isFinite(count) ? count : 0);
        if (proxy.instanceId === this.instanceId) return;
        // Another instance holds it now: if it comes back here, it is written in full.
        this.written.delete(id);
        next.set(id, proxy);
      });
      // An id whose key expired (its instance died): forget it in the set too, unless written again since.
      if (stale.length > 0) this.run('prune', () => pruneGone(this.command, this.prefix, stale));
      this.snapshot = next;
      this.parsed = parsed;
      // Union with what this instance knows: a revocation whose write has not landed yet stays.
      for (const f of revoked) this.revoked.add(f);
      this.reachable = true;
    } catch (err) {
      if (this.reachable)
        this.options.log.warn({ err: (err as Error).message }, 'redis unreachable: registry snapshot kept');
      this.reachable = false;
      this.options.onError?.('refresh');
      // Without Redis the snapshot ages: entries go once they are older than a heartbeat timeout
      // (swept here, every refreshMs, not on the message path).
      // A new map, never this one changed: readers cache what they derive per read (state.ts).
      const now = Date.now();
      const kept = new Map<string, Shared>();
      for (const [id, p] of this.snapshot) if (p.expiresAt > now) kept.set(id, p);
      if (kept.size !== this.snapshot.size) this.snapshot = kept;
    } finally {
      this.refreshing = false;
    }
  }

  /** Fire-and-forget: failures are counted and logged once per outage, never thrown into the broker. */
  private run(operation: string, command: () => Promise<unknown>): void {
    let pending: Promise<unknown>;
    try {
      pending = command();
    } catch {
      this.options.onError?.(operation);
      return;
    }
    pending.catch(() => this.options.onError?.(operation));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.subscriber.disconnect();
    await this.command.quit().catch(() => this.command.disconnect());
  }
}
