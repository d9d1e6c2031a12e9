/**
 * What request-proxies offers from, kept up to date instead of listed per request (issue 34): the
 * proxies of this instance and, while it reaches them, of the other instances, less the banned
 * ones, each with its picks and measured throughput, in a SelectionIndex.
 *
 * Changes reach it two ways. Told (`changed`): a heartbeat (registry.ts), a pick and a download
 * record (the client desk). Noticed at the next request: a registration or removal here (the
 * local map's version), a registry read (a new list of the other instances' proxies, whose picks
 * are read again with it: every proxy is compared, the changed ones moved), losing or regaining
 * the other instances, a new ban (the cluster's ban version) and, while any ban is known, once a
 * second (bans end by the clock).
 */
import type { QuicEndpoint, Random } from '@mutp/shared';
import type { BrokerState } from './broker/state';
import { reachesOtherInstances, type SharedProxy } from './cluster/cluster';
import { bannedUntil } from './proven-false-bans';
import type { ProxyLoad, SelectionRequest } from './selection';
import { SelectionIndex } from './selection-index';

/** How often bans are checked again while any is known (they end by the clock, unannounced). */
const BAN_RECHECK_MS = 1000;

/** What selection sees of a proxy, local or remote, and what an offer tells of it. */
export interface Candidate extends ProxyLoad {
  name: string;
  httpUrl: string;
  quic?: QuicEndpoint;
  /** The key its METAs are signed with (register), published to clients. */
  assertionKey?: string;
  /** The optional MUTP features it declared (register; docs/protocol.md §13), passed on to clients. */
  capabilities?: readonly string[];
}

/** Proxies told changed between two requests beyond which the next one reads them all again. */
const MAX_DIRTY = 4096;

const NONE: readonly SharedProxy[] = [];

export class OfferIndex {
  private readonly index = new SelectionIndex<Candidate>();
  /** Proxies told changed since the last request. */
  private readonly dirty = new Set<string>();
  /** What the index was last filled from. */
  private seen?: { local: number; remote: readonly SharedProxy[]; bans: number; at: number };
  /** Selection's view of each remote proxy, per registry read: an unchanged entry keeps its object. */
  private readonly remoteCandidateOf = new WeakMap<SharedProxy, Candidate>();

  constructor(private readonly state: BrokerState) {}

  /** A proxy's load, picks or measured throughput changed. */
  changed(proxyId: string): void {
    if (this.seen === undefined) return; // the next request reads everything anyway
    this.dirty.add(proxyId);
    // Many changes between two requests: one pass over every proxy then is cheaper than each alone.
    if (this.dirty.size > MAX_DIRTY) {
      this.seen = undefined;
      this.dirty.clear();
    }
  }

  /**
   * The proxies offered a client at `address`: rule 6's region from where it is now (a network
   * change re-evaluates it), then rules 1-5 (selection.ts).
   */
  choose(address: string, request: Omit<SelectionRequest, 'region'>, random: Random): Candidate[] {
    this.sync();
    const region = this.index.clientRegion(address);
    return this.index.select({ ...request, ...(region !== undefined ? { region } : {}) }, random);
  }

  private sync(): void {
    const { cluster } = this.state.deps;
    const now = Date.now();
    const remote = reachesOtherInstances(cluster) ? this.state.remoteEntries() : NONE;
    const seen = this.seen;
    const stale =
      seen === undefined ||
      seen.local !== this.state.proxies.version ||
      seen.remote !== remote ||
      seen.bans !== cluster.bansVersion() ||
      (cluster.hasProvenFalseBans() && now - seen.at >= BAN_RECHECK_MS);
    if (stale) {
      this.index.resync(this.offerable(remote, now));
      this.seen = { local: this.state.proxies.version, remote, bans: cluster.bansVersion(), at: now };
      this.dirty.clear();
      return;
    }
    for (const id of this.dirty) {
      const local = this.state.proxies.get(id);
      const shared = local === undefined ? this.state.remoteProxy(id) : undefined;
      const candidate = local ?? (shared !== undefined && remote !== NONE ? this.candidate(shared) : undefined);
      if (candidate === undefined || !this.refresh(candidate, now)) this.index.remove(id);
      else this.index.upsert(candidate);
    }
    this.dirty.clear();
  }

  /** Every proxy that may be offered now, with its picks and measured throughput read again. */
  private *offerable(remote: readonly SharedProxy[], now: number): Iterable<Candidate> {
    for (const c of this.state.proxies.values()) if (this.refresh(c, now)) yield c;
    for (const p of remote) {
      const c = this.candidate(p);
      if (this.refresh(c, now)) yield c;
    }
  }

  /** Reads a candidate's picks and measured throughput; false when it is banned (not offered). */
  private refresh(c: Candidate, now: number): boolean {
    const { cluster } = this.state.deps;
    if (bannedUntil(cluster, c, now) !== undefined) return false;
    // Offers since the last heartbeat count as transfers: clients spread over proxies between beats.
    c.recentPicks = cluster.picks(c.proxyId);
    c.measuredBps = this.state.throughput.measured(c.proxyId);
    return true;
  }

  /** Selection's view of another instance's proxy, made once per entry object (the read reuses unchanged ones). */
  private candidate(p: SharedProxy): Candidate {
    let c = this.remoteCandidateOf.get(p);
    if (c === undefined) {
      c = { ...p, modes: new Set(p.modes) };
      this.remoteCandidateOf.set(p, c);
    }
    return c;
  }
}
