/**
 * Proven-false bans (issue 31, evidence). A proxy whose signed statement the origin contradicted
 * (conflicts.ts) is not offered, and may not register, for `PROVEN_FALSE_BAN_MS`, on every origo
 * instance: those up at the verdict, and those that start or restart within the day. The bans
 * live in the cluster's shared state (cluster/: a Redis sorted set when origo runs clustered,
 * memory when alone), like revoked keys; each instance keeps its own copy, so checking one costs
 * a map lookup and never waits for Redis.
 *
 * A ban names the proxy twice: by its id, and (per-proxy keys, `--proxy-keys`) by the fingerprint
 * of the key it registered with. The id holds when the operator gives that id a new key; the
 * fingerprint holds when the same key is listed under another id. A proxy cannot take a new id on
 * its own: a key opens only its own id. In the shared-secret dev mode there is no credential to
 * ban, and any holder of the secret registers under any free id: a ban there is by id only.
 *
 * Bounded: a ban needs a verdict (a registered proxy's signed lie, judged against the origin
 * within each client network's verdict budget), and at most `MAX_PROVEN_FALSE_BANS` subjects are
 * kept anyway, the one nearest its end forgotten first (Redis keeps the same bound).
 */
/** How long a proxy whose signed statement the origin contradicted is not offered or registered. */
export const PROVEN_FALSE_BAN_MS = 24 * 60 * 60_000;

/** Ban subjects kept at most (each proven-false proxy is one or two: its id and its key). */
export const MAX_PROVEN_FALSE_BANS = 10_000;

/** What a ban can name of a proxy. */
export interface Bannable {
  proxyId: string;
  /** The fingerprint of the per-proxy key it registered with (proxy-auth.ts `keyFingerprint`). */
  keyFingerprint?: string;
}

/**
 * Where bans in force are looked up: the cluster's shared state (cluster/cluster.ts), which keeps
 * its copy in a BanList from here; named here so this module needs nothing of the cluster's.
 */
export interface BanLookup {
  provenFalseUntil(subject: string, now: number): number | undefined;
  /** Whether any ban is known (none: nothing to look up per proxy, as request-proxies does for each). */
  hasProvenFalseBans(): boolean;
}

/** What a ban of `p` records: `id:<proxyId>` and, with a per-proxy key, `key:<fingerprint>`. */
export function banSubjects(p: Bannable): string[] {
  return [`id:${p.proxyId}`, ...(p.keyFingerprint !== undefined ? [`key:${p.keyFingerprint}`] : [])];
}

/** Until when (ms since the epoch) `p` is banned by its id or its key on any instance, or undefined. */
export function bannedUntil(cluster: BanLookup, p: Bannable, now: number): number | undefined {
  if (!cluster.hasProvenFalseBans()) return undefined;
  let until: number | undefined;
  for (const subject of banSubjects(p)) {
    const u = cluster.provenFalseUntil(subject, now);
    if (u !== undefined && (until === undefined || u > until)) until = u;
  }
  return until;
}

/**
 * Bans in force, by subject: an instance's copy of the shared set. A subject banned again keeps
 * the later end; beyond `max` subjects the oldest ban (the nearest its end: every ban lasts as
 * long) is forgotten first; an expired one is forgotten when it is looked up.
 */
export class BanList {
  private readonly until = new Map<string, number>();

  constructor(private readonly max = MAX_PROVEN_FALSE_BANS) {}

  add(subject: string, until: number): void {
    const known = this.until.get(subject);
    if (known !== undefined && known >= until) return;
    this.until.delete(subject);
    this.until.set(subject, until);
    while (this.until.size > this.max) this.until.delete(this.until.keys().next().value!);
  }

  /** Until when `subject` is banned, or undefined (an expired ban is forgotten here). */
  get(subject: string, now: number): number | undefined {
    const until = this.until.get(subject);
    if (until === undefined || now < until) return until;
    this.until.delete(subject);
    return undefined;
  }

  /** The bans still in force at `now` (to write them back to a shared store that lost them). */
  entries(now: number): [string, number][] {
    return [...this.until].filter(([, until]) => now < until);
  }

  get size(): number {
    return this.until.size;
  }
}
